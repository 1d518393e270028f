"""The acceptance-check catalogue, in the order of the acceptance plan; one module per check id."""

from rules.checks.base import Check
from rules.checks.peak_memory import PeakMemory
from rules.checks.rack_power import RackPower
from rules.checks.training_objective import TrainingObjective

CATALOGUE: tuple[type[Check], ...] = (
    TrainingObjective,
    PeakMemory,
    RackPower,
)

CHECK_IDS = tuple(check.id for check in CATALOGUE)
