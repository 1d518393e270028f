"""The training facts sharding.py and gradient_accumulation.py import, under the names they import them by.

The facts themselves live in rules/checks/facts/ (layout, memory, batch, sharding); new code imports them
from there, and this module goes once those two check modules do too.
"""

from rules.checks.facts.batch import accumulation
from rules.checks.facts.layout import layout
from rules.checks.facts.memory import largest_fitting_micro_batch, measured_peak_gib, memory_estimate
from rules.checks.facts.pointers import TRAINING
from rules.checks.facts.sharding import sharding_options
from rules.estimates.ratios import fraction_of
from rules.estimates.sharding import SHARDING_ORDER, ShardingOption, least_communication

__all__ = ["SHARDING_ORDER", "ShardingOption", "T", "accumulation", "fraction_of", "largest_fitting_micro_batch",
           "layout", "least_communication", "measured_peak_gib", "memory_estimate", "sharding_options"]

T = TRAINING  # the name sharding.py and gradient_accumulation.py import; new code imports TRAINING
