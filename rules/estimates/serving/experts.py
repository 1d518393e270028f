"""Serving a mixture of experts: the FLOPs a token runs through, the expert weights a batch touches, the all-to-all.

Pure arithmetic: no I/O, no configuration. ``_bytes`` bytes, ``_s`` seconds, ``_gbs`` GB/s (10^9 B/s).

A served mixture of experts holds every expert's weights (``inference_memory.replica_memory`` sizes them all), but
a token runs through the ``active`` (top-k) of each layer's ``count`` routed experts only, so:

- compute: 2·N_active FLOPs per token (Kaplan et al. 2020, Table 1, with N the parameters a token runs through:
  Jiang et al. 2024, "Mixtral of Experts", arXiv 2401.04088 §2.1, "each token has access to 47B parameters, but only
  uses 13B active parameters during inference"; ``rules.estimates.model.parameters.active_parameters``). The
  attention term is left out, as for dense models (``inference_latency.prefill_time_s``).
- weight traffic: a decode step reads the weights it touches: everything but the routed experts, and in each
  mixture-of-experts layer the experts at least one of the step's tokens is routed to. Assumption: routing is
  uniform and independent across tokens (a balanced router; real routers are skewed, which touches fewer experts
  at a batch and so errs towards reading more). A given expert is then missed by one token's top-k with
  probability 1 − k/E, by all B tokens with (1 − k/E)^B, so the expected number of distinct experts hit is
  E·(1 − (1 − k/E)^B) (linearity of expectation over the E experts: the occupancy count of the classic
  balls-in-bins problem, e.g. Feller, *An Introduction to Probability Theory*, vol. 1, §II.5 and §IV.2).
  At B = 1 it is k; as B grows it tends to E (Mixtral, k = 2 of E = 8: 2 at B = 1, 3.5 at B = 2, 7.6 at B = 16),
  the observation behind MoE offloading and serving systems such as Fiddler (Kamahori et al. 2024,
  arXiv 2402.07033) and MoE-Lightning (Cao et al. 2024, arXiv 2411.11217) that small batches read few experts.
- expert parallelism (``inference.parallelism.expert`` > 1: whole experts placed on the expert-parallel ranks,
  vLLM ``--enable-expert-parallel``): each mixture-of-experts layer dispatches every token's k copies of the hidden
  state to the ranks of its experts and combines them back, two all-to-alls per layer and forward pass, each
  GPU sending its share of the step's tokens (tokens / tp) × k × hidden × 2 bytes (bf16 activations), timed by the
  training step model's all-to-all (``rules.estimates.training_time.expert_step.all_to_all_time_s``, DeepEP's
  measured bandwidths) and not overlapped with compute, as there.
"""

from __future__ import annotations

from dataclasses import dataclass

from rules.errors import InconsistentInput
from rules.estimates._args import require_at_most, require_non_negative, require_positive, require_positive_int
from rules.estimates.model.parameters import active_parameters, routed_expert_parameters, transformer_parameters
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.expert_step import all_to_all_time_s
from rules.estimates.training_time.expert_work import ALL_TO_ALLS_PER_PASS
from rules.estimates.training_time.memory_bound import ACTIVATION_BYTES


def experts_hit(count: int, active: int, tokens: float) -> float:
    """Returns the expected distinct experts of one layer that ``tokens`` tokens, each routed to ``active`` of
    ``count`` experts, hit under uniform routing: E·(1 − (1 − k/E)^B) (module docstring; Mixtral at B = 1: 2)."""
    require_positive_int("experts", count)
    require_positive_int("active experts", active)
    require_at_most("active experts", active, "experts", count)
    require_non_negative("tokens", tokens)
    return count * (1.0 - (1.0 - active / count) ** tokens)


@dataclass(frozen=True)
class AllToAllLinks:
    """The bandwidths an expert-parallel all-to-all runs at (``step_time_figures.all_to_all_gbs``)."""

    domain_gpus: int  # GPUs of one NVLink domain
    domain_gbs: float  # per GPU, inside the domain
    nic_gbs: float  # per GPU, across domains (0: not known)
    load_factor: float  # the busiest receiver's tokens over the balanced mean (policy memory.moe)


@dataclass(frozen=True)
class ServedExperts:
    """A served mixture of experts: what a token runs through, what the routed experts weigh, how they are split."""

    count: int  # routed experts per layer (E)
    active: int  # routed experts per token (k)
    expert_layers: int  # layers with routed experts
    hidden: int
    active_parameters: float  # N_active: the parameters one token runs through
    routed_weight_bytes: float  # every routed expert's weights, whole model
    expert_parallel: int = 1  # ranks the routed experts are split over (1: each expert split over the tp GPUs)
    links: AllToAllLinks | None = None  # needed when expert_parallel > 1

    def __post_init__(self) -> None:
        require_positive_int("experts", self.count)
        require_positive_int("active experts", self.active)
        require_at_most("active experts", self.active, "experts", self.count)
        require_positive_int("expert layers", self.expert_layers)
        require_positive("active parameters", self.active_parameters)
        require_non_negative("routed weight bytes", self.routed_weight_bytes)
        require_positive_int("expert parallel", self.expert_parallel)
        if self.count % self.expert_parallel:
            raise InconsistentInput(f"expert parallelism {self.expert_parallel} does not divide the {self.count} "
                                    "experts of each layer")
        if self.expert_parallel > 1 and self.links is None:
            raise InconsistentInput("expert-parallel serving needs the all-to-all bandwidths")

    def touched_weight_bytes(self, weight_bytes: float, tokens: float) -> float:
        """Returns the whole model's weight bytes a forward pass over ``tokens`` tokens reads: all but the routed
        experts, and the routed experts' bytes × :func:`experts_hit` / E."""
        require_non_negative("weight_bytes", weight_bytes - self.routed_weight_bytes)
        hit = experts_hit(self.count, self.active, tokens)
        return weight_bytes - self.routed_weight_bytes + self.routed_weight_bytes * hit / self.count

    def all_to_all_s(self, tokens: float, tensor_parallel: int) -> float:
        """Returns the dispatch and combine all-to-alls of a forward pass over ``tokens`` tokens, every expert layer:
        2 × layers × one all-to-all of tokens / tp × k × hidden × 2 bytes per GPU over the expert-parallel ranks
        (0 without expert parallelism)."""
        links = self.links
        if self.expert_parallel == 1 or links is None:
            return 0.0
        require_positive_int("tensor_parallel", tensor_parallel)
        size_bytes = tokens / tensor_parallel * self.active * self.hidden * ACTIVATION_BYTES
        one = all_to_all_time_s(size_bytes, self.expert_parallel, links.load_factor, links.domain_gpus,
                                links.domain_gbs, links.nic_gbs)
        return ALL_TO_ALLS_PER_PASS * self.expert_layers * one


def serving_split(count: int, expert_parallel: int, expert_tensor: int, tensor_parallel: int,
                  domain_gpus: int) -> None:
    """Refuses (InconsistentInput) an expert split a replica of ``tensor_parallel`` GPUs cannot serve as modelled:
    expert tensor parallelism (not modelled), an expert degree that does not divide the experts or the replica's
    GPUs (vLLM places the experts over the replica's ranks), or one spanning more than one NVLink domain."""
    if expert_tensor > 1:
        raise InconsistentInput(f"expert tensor parallelism {expert_tensor} in serving is not modelled")
    if count % expert_parallel or tensor_parallel % expert_parallel:
        raise InconsistentInput(f"expert parallelism {expert_parallel} must divide the {count} experts of each layer "
                                f"and the replica's tensor_parallel {tensor_parallel} GPUs")
    if expert_parallel > domain_gpus:
        raise InconsistentInput(f"expert parallelism {expert_parallel} spans more than one NVLink domain of "
                                f"{domain_gpus} GPUs; serving across domains is not modelled")


def served_experts(shape: ModelShape, weight_bytes: float, expert_parallel: int = 1,
                   links: AllToAllLinks | None = None) -> ServedExperts:
    """Returns the served experts of ``shape`` (a mixture of experts) whose whole weights take ``weight_bytes``: its
    active parameters (:func:`rules.estimates.model.parameters.active_parameters`) and its routed experts' share of
    the weights, routed_expert_parameters / transformer_parameters of the architecture × ``weight_bytes`` (the
    quantisation metadata in proportion). Mixtral 8x7B: 12,879,925,248 active; 32 layers × 8 × 3 × 4096 × 14336 =
    45,097,156,608 routed of 46,702,792,704."""
    experts = shape.experts
    if experts is None:
        raise InconsistentInput("serving a mixture of experts needs architecture.experts")
    routed = routed_expert_parameters(shape) / transformer_parameters(shape) * weight_bytes
    return ServedExperts(count=experts.count, active=experts.active, expert_layers=shape.expert_layers,
                         hidden=shape.hidden, active_parameters=active_parameters(shape), routed_weight_bytes=routed,
                         expert_parallel=expert_parallel, links=links)


@dataclass(frozen=True)
class ExpertDecode:
    """What a decode step of ``batch`` sequences does with a mixture of experts, per GPU of the replica."""

    flops_per_token: float  # 2·N_active (attention left out)
    experts_hit: float  # expected distinct routed experts per layer the batch's tokens touch
    weight_bytes_read_per_gpu: float  # the weights the step touches / tp
    all_to_all_s: float  # dispatch and combine over every expert layer (0 without expert parallelism)


def expert_decode(experts: ServedExperts, weight_bytes: float, tensor_parallel: int, batch: int) -> ExpertDecode:
    """Returns the figures of one decode step of ``batch`` sequences (one token each): 2·N_active FLOPs per token,
    :func:`experts_hit` at B = batch, :meth:`ServedExperts.touched_weight_bytes` / tp and the all-to-all."""
    require_positive_int("tensor_parallel", tensor_parallel)
    require_positive_int("batch", batch)
    return ExpertDecode(flops_per_token=2.0 * experts.active_parameters,
                        experts_hit=experts_hit(experts.count, experts.active, batch),
                        weight_bytes_read_per_gpu=experts.touched_weight_bytes(weight_bytes, batch) / tensor_parallel,
                        all_to_all_s=experts.all_to_all_s(batch, tensor_parallel))
