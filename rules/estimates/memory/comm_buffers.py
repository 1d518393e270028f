"""Communication buffers one training rank holds besides its tensors: NCCL's own and the framework's buckets.

Both come from the frameworks' defaults, so that a figure can be held against a run that did not tune them:

- NCCL allocates, per communicator, per channel and per connection, one FIFO buffer for each of its three
  protocols: Simple (``NCCL_BUFFSIZE``, default 4,194,304 B, NCCL user guide "Environment Variables"; NCCL
  ``src/init.cc`` DEFAULT_BUFFSIZE), LL (``DEFAULT_LL_BUFFSIZE`` = NCCL_LL_LINES_PER_THREAD 8 ×
  NCCL_LL_MAX_NTHREADS 512 × NCCL_STEPS 8 × 16 B = 524,288 B) and LL128 (``DEFAULT_LL128_BUFFSIZE`` =
  NCCL_LL128_ELEMS_PER_THREAD 120 × NCCL_LL128_MAX_NTHREADS 640 × NCCL_STEPS 8 × 8 B = 4,915,200 B; constants
  in ``src/include/device.h``). NCCL's maintainers: the memory is linear in the number of channels, a ring
  "only has 2 connections regardless of the scale", and every communicator has its own (NVIDIA/nccl#986,
  #864). These buffers are NCCL's ``cudaMalloc``/``cuMem`` allocations, outside PyTorch's caching allocator:
  they occupy the GPU but never show in ``torch.cuda.max_memory_allocated``.
- PyTorch ``DistributedDataParallel`` copies the gradients into flat all-reduce buckets (``bucket_cap_mb`` 25)
  that together hold every gradient once more, unless ``gradient_as_bucket_view=True``, which "can reduce
  peak memory usage, where the saved memory size will be equal to the total gradients size" (PyTorch docs,
  ``torch.nn.parallel.DistributedDataParallel``).
- DeepSpeed ZeRO keeps a contiguous reduce bucket of ``reduce_bucket_size`` elements (default 5e8, with
  ``contiguous_gradients`` true; ``deepspeed/runtime/zero/config.py``) in the 16-bit working dtype: stage 1/2
  ``ipg_buffer`` (``stage_1_and_2.py``, a second one only with ``overlap_comm``, off by default below stage 3),
  stage 3 ``__ipg_bucket_flat_buffer`` (``stage3.py``).
- Megatron-LM's buckets (``DistributedDataParallelConfig.bucket_size``, default max(40,000,000, 1,000,000 ×
  DP) parameters) are views into the contiguous ``grad_data`` and ``param_data`` buffers of
  ``megatron/core/distributed/param_and_grad_buffer.py``, which are the gradients and weights the model state
  already counts; the reduce-scatter and all-gather run in place, so they add nothing.
- PyTorch FSDP needs "2 times communication buffers of total_transformer_block_params × dtype_bytes /
  num_gpus" besides the two unsharded units it holds (PyTorch docs, "FSDP Notes", FSDP buffers sizes); the
  unsharded units are the gathered layers of ``rules.estimates.memory.step_memory``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from rules.estimates._args import require_bool, require_non_negative, require_non_negative_int
from rules.estimates.model.layout import Layout
from rules.estimates.model.parameters import largest_layer_parameters
from rules.estimates.model.shapes import ModelShape

NCCL_SIMPLE_BUFFER_BYTES: Final = 4_194_304  # NCCL_BUFFSIZE default (1 << 22)
NCCL_LL_BUFFER_BYTES: Final = 8 * 512 * 8 * 16  # lines/thread × threads × steps × sizeof(ncclLLFifoLine)
NCCL_LL128_BUFFER_BYTES: Final = 120 * 640 * 8 * 8  # elements/thread × threads × steps × sizeof(uint64_t)
NCCL_CONNECTION_BYTES: Final = NCCL_SIMPLE_BUFFER_BYTES + NCCL_LL_BUFFER_BYTES + NCCL_LL128_BUFFER_BYTES
NCCL_RING_CONNECTIONS: Final = 2  # the ring's send and receive connection of each channel (NVIDIA/nccl#986)
DEEPSPEED_REDUCE_BUCKET_ELEMENTS: Final = 500_000_000  # DeepSpeedZeroConfig.reduce_bucket_size
FSDP_COMMUNICATION_BUFFERS: Final = 2  # PyTorch "FSDP Notes": the buffer in use and the one prefetched
MEGATRON_CONVENTIONS: Final = ("megatron", "megatron-distributed-optimizer")
FRAMEWORKS: Final = ("megatron-core", "pytorch-ddp", "deepspeed-zero", "pytorch-fsdp")


@dataclass(frozen=True)
class CommunicationSettings:
    """The policy's communication parameters (rules/data/policy.default.json, memory.nccl_channels)."""

    nccl_channels: int  # channels one NCCL communicator opens


@dataclass(frozen=True)
class BufferInputs:
    """What sizes one rank's communication buffers: its layout, its framework, and the tensors they mirror."""

    layout: Layout  # under the sharding the model state is sized with
    convention: str  # the model-state convention: a Megatron one means Megatron-LM's DDP and optimizer
    gradients_on_gpu_bytes: float  # the gradients this GPU holds (PyTorch DDP's buckets copy them)
    working_bytes_per_param: float  # the 16-bit (or fp32) working dtype of DeepSpeed's and FSDP's buffers
    largest_unit_parameters: float | None  # FSDP's largest flat parameter on this GPU; None: shape unknown
    gradient_as_bucket_view: bool = False  # PyTorch DDP's option: gradients are views into the buckets


@dataclass(frozen=True)
class CommunicationBuffers:
    """One rank's communication buffers, in bytes, and what they were sized for."""

    framework: str  # one of FRAMEWORKS
    communicators: int  # NCCL communicators the rank joins
    nccl_bytes: float  # NCCL's protocol buffers (outside PyTorch's caching allocator)
    bucket_bytes: float  # the framework's gradient / flat-parameter buckets (inside it)

    @property
    def total_bytes(self) -> float:
        return self.nccl_bytes + self.bucket_bytes


def framework_of(sharding: str, convention: str) -> str:
    """Returns the framework whose buffers a sharding stands for: Megatron-LM under a Megatron convention for
    ddp and its distributed optimizer (zero1), PyTorch DDP, DeepSpeed ZeRO stages 1-3, PyTorch FSDP."""
    if convention in MEGATRON_CONVENTIONS and sharding in ("ddp", "zero1"):
        return "megatron-core"
    if sharding == "ddp":
        return "pytorch-ddp"
    if sharding.startswith("fsdp"):
        return "pytorch-fsdp"
    return "deepspeed-zero"


def process_groups(layout: Layout) -> tuple[int, ...]:
    """Returns the sizes of the process groups a rank runs collectives in, one NCCL communicator each.

    The gradient group (data × context ranks; under fsdp-hybrid its intra-node shard group and inter-node
    replicate group instead), the tensor-, pipeline- and context-parallel groups (Megatron-LM
    ``parallel_state``), and the default group of all GPUs when none of those spans them (barriers and
    checkpoint coordination run there). A layout with expert parallelism (expert or expert_tensor > 1) adds the
    expert grid's expert, expert tensor and expert data-parallel groups (Megatron-Core creates them apart from the
    others: ``_EXPERT_MODEL_PARALLEL_GROUP``, ``_EXPERT_TENSOR_PARALLEL_GROUP``, ``_EXPERT_DATA_PARALLEL_GROUP``). A
    group of one rank needs no communicator.
    """
    if layout.sharding == "fsdp-hybrid" and layout.shard_group:
        gradient_groups = (layout.shard_group, layout.shard_ranks // layout.shard_group)
    else:
        gradient_groups = (layout.shard_ranks,)
    expert_groups = ((layout.expert, layout.expert_tensor, layout.expert_data_parallel)
                     if layout.expert > 1 or layout.expert_tensor > 1 else ())
    groups = tuple(size for size in (*gradient_groups, layout.tensor, layout.pipeline, layout.context, *expert_groups)
                   if size > 1)
    if layout.gpus > 1 and layout.gpus not in groups:
        groups += (layout.gpus,)
    return groups


def nccl_communicator_bytes(settings: CommunicationSettings) -> float:
    """Returns one communicator's NCCL buffers: channels × 2 ring connections × (Simple + LL + LL128)."""
    require_non_negative_int("nccl_channels", settings.nccl_channels)
    return settings.nccl_channels * NCCL_RING_CONNECTIONS * NCCL_CONNECTION_BYTES


def communication_buffers(inputs: BufferInputs, settings: CommunicationSettings) -> CommunicationBuffers:
    """Returns the NCCL buffers and framework buckets one rank of ``inputs.layout`` holds (module docstring).

    NCCL: one communicator per process group (:func:`process_groups`) × :func:`nccl_communicator_bytes`.
    Buckets: none for Megatron-LM (views into its contiguous buffers); PyTorch DDP one more copy of the
    gradients unless gradient_as_bucket_view; DeepSpeed ZeRO one reduce bucket of 5e8 elements of the working
    dtype; FSDP 2 × the largest unit's parameters × the working dtype / the ranks one unit is sharded over.
    """
    require_non_negative("gradients_on_gpu_bytes", inputs.gradients_on_gpu_bytes)
    require_non_negative("working_bytes_per_param", inputs.working_bytes_per_param)
    require_bool("gradient_as_bucket_view", inputs.gradient_as_bucket_view)
    layout = inputs.layout
    framework = framework_of(layout.sharding, inputs.convention)
    communicators = len(process_groups(layout))
    nccl = communicators * nccl_communicator_bytes(settings)
    buckets = 0.0
    if framework == "pytorch-ddp" and not inputs.gradient_as_bucket_view:
        buckets = inputs.gradients_on_gpu_bytes
    elif framework == "deepspeed-zero":
        buckets = DEEPSPEED_REDUCE_BUCKET_ELEMENTS * inputs.working_bytes_per_param
    elif framework == "pytorch-fsdp" and inputs.largest_unit_parameters is not None:
        require_non_negative("largest_unit_parameters", inputs.largest_unit_parameters)
        sharded_over = layout.shard_group if layout.sharding == "fsdp-hybrid" and layout.shard_group \
            else layout.shard_ranks
        buckets = (FSDP_COMMUNICATION_BUFFERS * inputs.largest_unit_parameters * inputs.working_bytes_per_param
                   / sharded_over)
    return CommunicationBuffers(framework=framework, communicators=communicators, nccl_bytes=nccl,
                                bucket_bytes=buckets)


def rank_buffers(shape: ModelShape | None, layout: Layout, convention: str, gradients_on_gpu_bytes: float,
                 working_bytes_per_param: float, gradient_as_bucket_view: bool,
                 settings: CommunicationSettings | None) -> CommunicationBuffers | None:
    """Returns :func:`communication_buffers` of a training rank of ``layout``, None when ``settings`` do not count them.

    FSDP's unit is one wrapped decoder layer or the root (:func:`largest_layer_parameters`, ``block``; a
    mixture-of-experts layer with its routed experts split over expert × expert_tensor ranks), split over the
    tensor-parallel ranks; unknown without the architecture's vocabulary.
    (rules/estimates/memory/step_memory.py sizes each step's buffers with it.)
    """
    if settings is None:
        return None
    unit = None
    if shape is not None and shape.vocab is not None:
        unit = largest_layer_parameters(shape, "block", layout.expert_shards) / layout.tensor
    inputs = BufferInputs(layout=layout, convention=convention, gradients_on_gpu_bytes=gradients_on_gpu_bytes,
                          working_bytes_per_param=working_bytes_per_param, largest_unit_parameters=unit,
                          gradient_as_bucket_view=gradient_as_bucket_view)
    return communication_buffers(inputs, settings)
