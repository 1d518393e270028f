"""How a training job's GPUs are split: data × tensor × pipeline × context parallelism, and how state is sharded.

The data-parallel size is what remains of the GPUs once tensor, pipeline and context parallelism have taken
theirs (Megatron-LM ``megatron/core/parallel_state.py``, ``initialize_model_parallel``: data_parallel_size =
world_size // (tensor_model_parallel_size × pipeline_model_parallel_size × context_parallel_size), after
raising "world_size (…) is not divisible by …" when it does not divide). Megatron-LM orders ranks tensor,
context, data, pipeline (fastest first), so a node holds whole tensor-parallel groups and its remaining GPUs
are context- and data-parallel ranks. Context-parallel ranks hold the same parameters and see different
tokens of the same sequences, so gradients are reduced, and ZeRO / the distributed optimizer shard state,
over the data × context ranks (Megatron-LM ``megatron/core/optimizer/__init__.py``, ``get_megatron_optimizer``:
``data_parallel_group=get_data_parallel_group(with_context_parallel=True)``; ``DistributedDataParallel``
reduces gradients over the same group).

A mixture-of-experts model's routed experts are laid out on a grid of their own over the same GPUs (Megatron-Core
"parallel folding", ``initialize_model_parallel``'s expert rank generator): expert tensor × expert × expert data ×
pipeline, where expert_data_parallel = world_size // (expert_tensor_parallel_size × expert_model_parallel_size ×
pipeline_model_parallel_size), after raising "world_size (…) is not divisible by
expert_tensor_model_pipeline_parallel size (…)"; the experts' gradients are reduced, and the distributed optimizer
shards their state, over the expert-data-parallel ranks. Context parallelism has no place on the expert grid (its
ranks fold into expert data parallelism). With expert_tensor = tensor and context 1, as Megatron-LM's
--expert-tensor-parallel-size defaults, this is the older rule that the expert degree divides the data-parallel one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import require_positive_int


class NotWholeReplicas(InconsistentInput):
    """A GPU count that is not a whole number of model replicas (tensor × pipeline × context GPUs each)."""


class NotWholeExpertGrid(InconsistentInput):
    """An expert layout Megatron-Core refuses: experts the expert degree does not divide, or GPUs that are not a whole
    number of expert tensor × expert × pipeline groups."""


@dataclass(frozen=True)
class Layout:
    """A training job laid out on nodes of identical GPUs: how its GPUs split, how its state is sharded, and how
    each micro-batch runs.

    The degrees and the sharding size memory and communication (:func:`training_layout` builds them); the step-time
    model (rules/estimates/training_time/step_time.py) also reads the batch, the recompute, sequence parallelism,
    FlashAttention, the precision, the kernels and the fp8 recipe, and refuses a layout without a batch
    (``rules.estimates.training_time.step_layout.require_step_layout``).
    """

    gpus: int
    gpus_per_node: int
    nodes: int  # whole nodes the GPUs occupy
    tensor: int
    pipeline: int
    data_parallel: int  # replicas that see different sequences: gpus / (tensor × pipeline × context)
    sharding: str  # ddp, zero1, zero2, zero3, fsdp-full or fsdp-hybrid
    shard_group: int | None  # ranks one fsdp-hybrid shard spans; None for the other shardings
    context: int = 1  # context-parallel degree: each sequence's tokens split over this many ranks
    virtual_stages: int = 1  # interleaved 1F1B chunks per pipeline stage
    micro_batch: int | None = None  # sequences per micro-batch
    global_batch: int | None = None  # sequences per optimizer step
    recompute: str = "none"  # activation recompute: none | selective | full
    sequence_parallel: bool = False
    flash_attention: bool = False
    precision: str = "bf16-mixed"  # fp8-mixed: FP8 GEMMs, 16-bit activations, fp32 master state
    tensor_comm_overlap: bool = False  # tensor-parallel collectives overlapped with the GEMMs (TE --tp-comm-overlap)
    kernels: str = "fused"  # who writes the memory-bound kernels: fused (Megatron/TE), compiled (Inductor) or eager
    fp8_recipe: str = "delayed"  # the scaling of fp8-mixed GEMM inputs: delayed, current or mxfp8
    expert: int = 1  # expert-parallel degree: a mixture-of-experts layer's routed experts split over this many ranks
    expert_tensor: int = 1  # expert tensor-parallel degree: each routed expert's matrices split over this many ranks

    @property
    def expert_grid_gpus(self) -> int:
        """Returns the GPUs one expert-data-parallel replica of the routed experts spans: expert_tensor × expert ×
        pipeline (Megatron-Core's expert_tensor_model_pipeline_parallel_size)."""
        return self.expert_tensor * self.expert * self.pipeline

    @property
    def expert_shards(self) -> int:
        """Returns the ranks one stage's routed experts are split over: expert × expert_tensor."""
        return self.expert * self.expert_tensor

    @property
    def expert_data_parallel(self) -> int:
        """Returns the ranks that hold the same routed-expert shard: gpus / (expert_tensor × expert × pipeline).

        The experts' gradients are reduced, and their optimizer state sharded, over them (Megatron-Core
        ``get_expert_data_parallel_group``)."""
        return self.gpus // self.expert_grid_gpus

    @property
    def model_parallel(self) -> int:
        """Returns the ranks the parameters are split over: tensor × pipeline (context ranks hold the same shard)."""
        return self.tensor * self.pipeline

    @property
    def replica_gpus(self) -> int:
        """Returns the GPUs one data-parallel replica spans: tensor × pipeline × context."""
        return self.tensor * self.pipeline * self.context

    @property
    def shard_ranks(self) -> int:
        """Returns the ranks that hold the same parameter shard: data × context (Megatron's dp-cp group).

        Gradients are reduced, and ZeRO / FSDP / the distributed optimizer shard model state, over them.
        """
        return self.data_parallel * self.context

    @property
    def gpus_on_node(self) -> int:
        """Returns the job's GPUs on one of its nodes (all of its GPUs when it fits on part of a node)."""
        return min(self.gpus, self.gpus_per_node)

    @property
    def dp_ranks_per_node(self) -> int:
        """Returns the ranks of one gradient-reduction (data × context) group sharing a node.

        Tensor parallelism is innermost, as Megatron-LM orders ranks, so a node holds gpus_per_node / tensor
        of them.
        """
        return max(1, min(self.shard_ranks, self.gpus_per_node // self.tensor))

    @property
    def whole_unit_gpus(self) -> int:
        """Returns the step in which the job can grow: whole nodes, whole model replicas and whole expert grids,
        lcm(node, t × p × c, expert_tensor × expert × p)."""
        return math.lcm(self.gpus_per_node, self.replica_gpus, self.expert_grid_gpus)

    @property
    def micro_batches(self) -> int:
        """Returns m, the micro-batches each pipeline runs per optimizer step (a layout with its batch)."""
        return self.global_batch // (self.micro_batch * self.data_parallel)  # type: ignore[operator]


def hybrid_shard_group(shard_ranks: int, gpus_per_node: int, tensor: int) -> int:
    """Returns FSDP HYBRID_SHARD's default shard group: the data × context ranks of one node.

    PyTorch FSDP (ShardingStrategy.HYBRID_SHARD) shards within a node and replicates across nodes; the
    group must divide the ranks that hold the same parameters, so it is the largest common divisor of the two.
    """
    return math.gcd(shard_ranks, max(1, gpus_per_node // tensor))


def require_whole_replicas(gpus: int, tensor: int, pipeline: int, context: int) -> None:
    """Raises NotWholeReplicas unless ``gpus`` is a whole number (≥ 1) of tensor × pipeline × context replicas.

    Megatron-LM ``initialize_model_parallel`` refuses the same layout: "world_size (…) is not divisible by
    tensor_model_parallel_size (…) x pipeline_model_parallel_size (…) x context_parallel_size (…)".
    """
    for name, degree in (("gpus", gpus), ("tensor", tensor), ("pipeline", pipeline), ("context", context)):
        require_positive_int(name, degree)
    replica = tensor * pipeline * context
    if gpus % replica:
        raise NotWholeReplicas(
            f"{gpus} GPUs are not a whole number of model replicas of tensor {tensor} × pipeline {pipeline} × "
            f"context {context} = {replica} GPUs; Megatron-LM refuses a world size that tensor × pipeline × "
            f"context does not divide")


def require_expert_grid(gpus: int, pipeline: int, expert: int, expert_tensor: int, experts: int | None) -> None:
    """Raises NotWholeExpertGrid unless Megatron-Core would lay out ``experts`` routed experts so (None: a dense model).

    Megatron-LM ``megatron/training/arguments.py``: "num_experts must be non None to use expert model parallelism"
    and "Number of experts should be a multiple of expert model parallel_size."; ``megatron/core/parallel_state.py``
    (``initialize_model_parallel``): "world_size (…) is not divisible by expert_tensor_model_pipeline_parallel size
    (…)", that size being expert_tensor × expert × pipeline.
    """
    for name, degree in (("expert", expert), ("expert_tensor", expert_tensor)):
        require_positive_int(name, degree)
    if experts is None:
        if expert > 1 or expert_tensor > 1:
            raise NotWholeExpertGrid(f"expert parallelism (expert {expert}, expert_tensor {expert_tensor}) needs a "
                                     "mixture-of-experts model; Megatron-LM refuses it without --num-experts")
        return
    if experts % expert:
        raise NotWholeExpertGrid(f"{experts} experts cannot be split over expert parallelism {expert}; Megatron-LM "
                                 "refuses a number of experts that is not a multiple of the expert degree")
    grid = expert_tensor * expert * pipeline
    if gpus % grid:
        raise NotWholeExpertGrid(
            f"{gpus} GPUs are not a whole number of expert grids of expert_tensor {expert_tensor} × expert {expert} × "
            f"pipeline {pipeline} = {grid} GPUs; Megatron-Core refuses a world size that this does not divide")


def training_layout(gpus: int | None, gpus_per_node: int, nodes_quoted: int, tensor: int = 1, pipeline: int = 1,
                    sharding: str = "ddp", shard_group: int | None = None, context: int = 1, *,
                    virtual_stages: int = 1, micro_batch: int | None = None, global_batch: int | None = None,
                    recompute: str = "none", sequence_parallel: bool = False, flash_attention: bool = False,
                    precision: str = "bf16-mixed", tensor_comm_overlap: bool = False, kernels: str = "fused",
                    fp8_recipe: str = "delayed", expert: int = 1, expert_tensor: int = 1,
                    experts: int | None = None) -> Layout:
    """Returns the layout of a job on ``gpus`` GPUs (all ``gpus_per_node × nodes_quoted`` when None).

    data_parallel = gpus / (tensor × pipeline × context) (Megatron-LM parallel_state; NotWholeReplicas when
    it does not divide, :func:`require_whole_replicas`); the nodes are the whole nodes the GPUs fill;
    fsdp-hybrid without a stated shard group shards over one node's data × context ranks
    (:func:`hybrid_shard_group`). The batch, recompute, sequence parallelism, FlashAttention, precision, overlap,
    kernels and fp8 recipe are carried as given. The expert degrees of a model with ``experts`` routed experts (None:
    dense) are validated as Megatron-Core validates them (:func:`require_expert_grid`, NotWholeExpertGrid).
    """
    require_positive_int("gpus_per_node", gpus_per_node)
    if gpus is None:
        gpus = gpus_per_node * nodes_quoted
    require_whole_replicas(gpus, tensor, pipeline, context)
    require_expert_grid(gpus, pipeline, expert, expert_tensor, experts)
    data_parallel = gpus // (tensor * pipeline * context)
    if sharding == "fsdp-hybrid" and shard_group is None:
        shard_group = hybrid_shard_group(data_parallel * context, gpus_per_node, tensor)
    return Layout(gpus, gpus_per_node, math.ceil(gpus / gpus_per_node), tensor, pipeline, data_parallel, sharding,
                  shard_group if shard_group else None, context, virtual_stages, micro_batch, global_batch, recompute,
                  sequence_parallel, flash_attention, precision, tensor_comm_overlap, kernels, fp8_recipe, expert,
                  expert_tensor)


def resized(layout: Layout, gpus: int) -> Layout:
    """Returns the same layout (degrees but data, sharding, batch) on ``gpus`` GPUs; data parallelism absorbs it.

    A stated fsdp-hybrid shard group that no longer divides the data × context ranks is dropped, so that
    :func:`with_sharding` falls back to one node's ranks.
    """
    data_parallel = max(1, gpus // layout.replica_gpus)
    shard_ranks = data_parallel * layout.context
    shard_group = layout.shard_group
    if shard_group is not None and (shard_group > shard_ranks or shard_ranks % shard_group):
        shard_group = None
    return _varied(layout, gpus, math.ceil(gpus / layout.gpus_per_node), data_parallel, layout.sharding, shard_group)


def with_sharding(layout: Layout, sharding: str) -> Layout:
    """Returns the layout under another sharding; fsdp-hybrid gets one node's data × context ranks by default."""
    shard_group = layout.shard_group
    if sharding == "fsdp-hybrid" and shard_group is None:
        shard_group = hybrid_shard_group(layout.shard_ranks, layout.gpus_per_node, layout.tensor)
    if sharding == layout.sharding and shard_group == layout.shard_group:
        return layout  # already so (a Layout is immutable)
    return _varied(layout, layout.gpus, layout.nodes, layout.data_parallel, sharding, shard_group)


def _varied(layout: Layout, gpus: int, nodes: int, data_parallel: int, sharding: str,
            shard_group: int | None) -> Layout:
    """Returns ``layout`` with the given GPUs, nodes, data parallelism and sharding, built directly: cheaper than
    dataclasses.replace, and the searches resize and re-shard at every count they try."""
    return Layout(gpus, layout.gpus_per_node, nodes, layout.tensor, layout.pipeline, data_parallel, sharding,
                  shard_group, layout.context, layout.virtual_stages, layout.micro_batch, layout.global_batch,
                  layout.recompute, layout.sequence_parallel, layout.flash_attention, layout.precision,
                  layout.tensor_comm_overlap, layout.kernels, layout.fp8_recipe, layout.expert, layout.expert_tensor)
