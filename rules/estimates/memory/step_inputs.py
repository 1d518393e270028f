"""What sizes one training step's memory (rules/estimates/memory/step_memory.py): the job, its batch, the policy's
settings.

Plain frozen dataclasses, so that every estimate and search of an evaluation keys what it keeps on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.comm_buffers import CommunicationSettings
from rules.estimates.memory.expert_activations import ExpertRouting
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.offload import ZeroSettings
from rules.estimates.memory.training_state import StateSettings
from rules.estimates.model.shapes import ModelShape


@dataclass(frozen=True)
class MemorySettings:
    """The policy's memory parameters (rules/data/policy.default.json, memory.* and conventions.*)."""

    convention: str  # bytes per parameter of model state: a key of model_state.BYTE_CONVENTIONS
    cuda_context_gib: float  # CUDA context per GPU (the catalogue's figure for the GPU, else the policy's)
    fragmentation_fraction: float  # allocator overhead over the tensors it holds
    headroom_fraction: float  # share of GPU memory kept free
    gathered_layers: int  # decoder layers FSDP holds unsharded at once (the current one and those prefetched)
    activation_convention: str = "physical"  # a key of activation_conventions.ACTIVATION_CONVENTIONS
    # NCCL and framework buffers (comm_buffers.py); None: not counted, the bare arithmetic of the published tables
    communication: CommunicationSettings | None = None
    zero: ZeroSettings = field(default_factory=ZeroSettings)  # DeepSpeed's buffer factor and ZeRO-3 working set
    routing: ExpertRouting = field(default_factory=ExpertRouting)  # a mixture of experts' capacity (memory.moe)

    @property
    def state_settings(self) -> StateSettings:
        """Returns the part of the settings that sizes model state (rules/estimates/memory/training_state.py)."""
        return StateSettings(self.convention, self.gathered_layers, self.zero)


@dataclass(frozen=True)
class TrainingBatch:
    """The batch of one optimizer step; any of it may be unknown."""

    sequence_length: int | None
    micro_batch: int | None  # sequences per GPU per forward pass
    global_batch: int | None  # sequences per optimizer step


@dataclass(frozen=True)
class TrainingJob:
    """What a training job trains and how, independent of the hardware it runs on."""

    model: TrainedModel
    shape: ModelShape | None  # None: the architecture is not known (activations cannot be estimated)
    batch: TrainingBatch
    saving: ActivationSaving
    virtual_stages: int
    offload: str  # one of model_state.OFFLOADS
    gradient_as_bucket_view: bool = False  # PyTorch DDP: gradients are views into its all-reduce buckets
