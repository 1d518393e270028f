"""The acceptance checks, in the order of the acceptance plan; one module per check id.

``CHECKS`` is the list of check classes; "catalogue" in quotecheck names the hardware catalogue only
(rules/catalogue.py, rules/data/catalogue.json).
"""

from rules.checks.base import Check
from rules.checks.checkpoint_bandwidth import CheckpointBandwidth
from rules.checks.data_feed import DataFeed
from rules.checks.gpu_nic_topology import GpuNicTopology
from rules.checks.gradient_accumulation import GradientAccumulation
from rules.checks.host_ram import HostRam
from rules.checks.inference_capacity import InferenceCapacity
from rules.checks.inference_memory import InferenceMemory
from rules.checks.interconnect_scaling import InterconnectScaling
from rules.checks.peak_memory import PeakMemory
from rules.checks.rack_power import RackPower
from rules.checks.restart_behavior import RestartBehavior
from rules.checks.sharding import Sharding
from rules.checks.time_to_result import TimeToResult
from rules.checks.training_objective import TrainingObjective

CHECKS: tuple[type[Check], ...] = (
    TrainingObjective,
    PeakMemory,
    Sharding,
    GradientAccumulation,
    InterconnectScaling,
    DataFeed,
    CheckpointBandwidth,
    HostRam,
    GpuNicTopology,
    RestartBehavior,
    RackPower,
    TimeToResult,
    InferenceMemory,
    InferenceCapacity,
)

CHECK_IDS = tuple(check.id for check in CHECKS)
