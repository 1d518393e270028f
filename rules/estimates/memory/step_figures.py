"""The figures of one training step's memory on its most loaded GPU (rules/estimates/memory/step_memory.py).

Model state (ZeRO, Rajbhandari et al. SC'20, arXiv 1910.02054 §3.1 and §5), activations (Korthikanti et al. 2022,
arXiv 2205.05198, Table 2), the layers ZeRO-3/FSDP gather, communication buffers, CUDA context and the allocator's
fragmentation, in bytes; the step fits when their sum is within the GPU's memory less a headroom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates.memory.activation_conventions import ActivationCounting
from rules.estimates.memory.comm_buffers import CommunicationBuffers
from rules.estimates.memory.model_state import StateBytesPerParam
from rules.estimates.memory.offload import NO_HOST_MODEL_STATE, HostModelState
from rules.estimates.ratios import spare_fraction


@dataclass(frozen=True)
class TrainingMemory:
    """Per-GPU memory of one training step, in bytes, with the convention that sized the model state."""

    sharding: str
    micro_batch: int | None
    state: StateBytesPerParam
    convention: str
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float | None  # None: the architecture or batch shape is not known
    gathered_bytes: float
    other_bytes: float
    host_offload_bytes: float
    capacity_bytes: float
    usable_bytes: float
    parameters: float
    first_stage_factor: float = 1.0  # the most loaded pipeline stage's parameters over an even share
    context_parallel: int = 1  # the layout's context-parallel degree: activations are ÷ it, state sharded over d × c
    activation_counting: ActivationCounting = ActivationCounting()  # the convention and width that sized activations
    communication: CommunicationBuffers | None = None  # None: not counted (MemorySettings.communication)
    cuda_context_bytes: float = 0.0

    @property
    def communication_bytes(self) -> float:
        """Returns the NCCL buffers and framework buckets, which other_bytes includes; 0 when not counted."""
        return self.communication.total_bytes if self.communication else 0.0
    host: HostModelState = NO_HOST_MODEL_STATE  # the model state the node's host holds (host-ram's figure)

    @property
    def model_state_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def overhead_bytes(self) -> float:
        """Returns what is neither model state nor activations: gathered layers, communication buffers, CUDA
        context, fragmentation."""
        return self.gathered_bytes + self.other_bytes

    @property
    def model_state_total_bytes(self) -> float:
        """Returns the whole model's state, unsharded: parameters × bytes per parameter (ZeRO §3.1)."""
        return self.parameters * self.state.total_bytes_per_param

    @property
    def total_bytes(self) -> float:
        return step_total_bytes(self.model_state_bytes, self.activations_bytes, self.gathered_bytes, self.other_bytes)

    @property
    def spare_fraction(self) -> float:
        return spare_fraction(self.total_bytes, self.usable_bytes)

    @property
    def within_usable(self) -> bool:
        """Returns whether what was sized (model state alone when activations are unknown) fits usable memory."""
        return self.total_bytes <= self.usable_bytes

    @property
    def fits(self) -> bool | None:
        """Returns whether one step fits the usable memory; None when the activations cannot be estimated."""
        if self.activations_bytes is None:
            return None
        return self.within_usable


def step_total_bytes(model_state_bytes: float, activations_bytes: float | None, gathered_bytes: float,
                     other_bytes: float) -> float:
    """Returns one step's bytes on the GPU: model state + activations (0 when unknown) + gathered + other."""
    return model_state_bytes + (activations_bytes or 0) + gathered_bytes + other_bytes


@dataclass(frozen=True)
class StepTerms:
    """The bytes of one step on a layout that do not depend on its activations, and the sums that add them.

    :class:`rules.estimates.memory.step_memory.StepMemoryModel` sizes every step's other bytes and total with these
    (its estimates and, candidate by candidate, the layout search), so there is one formula for both.
    """

    model_state_bytes: float  # weights, gradients and optimizer state on the GPU
    gathered_bytes: float  # the layers ZeRO-3/FSDP hold unsharded
    bucket_bytes: float  # the framework's buckets: tensors the allocator holds (fragmented with the others)
    buffer_bytes: float  # all communication buffers, the buckets included (CommunicationBuffers.total_bytes)
    cuda_context_bytes: float
    fragmentation_fraction: float  # allocator overhead over the tensors it holds
    usable_bytes: float  # the GPU's memory less the headroom

    def other_bytes(self, activations_bytes: float | None) -> float:
        """Returns the CUDA context, the allocator's fragmentation over the tensors it holds (model state,
        activations, gathered layers, buckets; NCCL's buffers are not its) and the communication buffers."""
        tensors = self.model_state_bytes + (activations_bytes or 0) + self.gathered_bytes + self.bucket_bytes
        return self.cuda_context_bytes + self.fragmentation_fraction * tensors + self.buffer_bytes

    def fitting_bytes(self, activations_bytes: float | None) -> float | None:
        """Returns the step's total bytes (:attr:`TrainingMemory.total_bytes`) when it fits usable memory; None when
        it does not, or when the activations are unknown (:attr:`TrainingMemory.fits` false or None)."""
        if activations_bytes is None:
            return None
        total = step_total_bytes(self.model_state_bytes, activations_bytes, self.gathered_bytes,
                                 self.other_bytes(activations_bytes))
        return total if total <= self.usable_bytes else None

    def activation_bounds(self) -> tuple[float, float]:
        """Returns (fit, no_fit): activations of at most ``fit`` bytes fit (:meth:`fitting_bytes` is not None), and
        more than ``no_fit`` bytes do not; between the two, only :meth:`fitting_bytes` tells.

        The total is (1 + fragmentation) · activations + the rest, so the step fits below the activations
        (usable − rest) / (1 + fragmentation). Summed in floating point the total may differ from that by a few
        units in the last place of the largest term (each of the ~10 operations rounds by at most half of one),
        so both bounds stand 2⁻³⁰ of the sum of the terms (and of the usable bytes) from it: 10⁶ times wider than
        that error. Unless every term and the fragmentation are finite and not negative, nothing is bounded
        (−inf, inf). The layout search sorts its candidates with these (rules/estimates/search/layout_search.py)
        and asks :meth:`fitting_bytes` of those between them and of those it ranks.
        """
        state, gathered, buckets = self.model_state_bytes, self.gathered_bytes, self.bucket_bytes
        context, buffers = self.cuda_context_bytes, self.buffer_bytes
        fragmentation, usable = self.fragmentation_fraction, self.usable_bytes
        scale = (state + gathered + buckets + context + buffers + usable) * (1 + fragmentation)
        if not (state >= 0 and gathered >= 0 and buckets >= 0 and context >= 0 and buffers >= 0 and usable >= 0
                and fragmentation >= 0 and scale < math.inf):  # NaN compares false
            return -math.inf, math.inf
        rest = state + gathered + context + fragmentation * (state + gathered + buckets) + buffers
        limit, margin = (usable - rest) / (1 + fragmentation), scale * 2.0**-30
        return limit - margin, limit + margin
