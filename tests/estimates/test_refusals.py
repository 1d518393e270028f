"""Estimators refuse out-of-domain arguments with InconsistentInput, which evaluations report as contradictions."""

import math

import pytest

from rules.errors import InconsistentInput
from rules.estimates.communication import interconnect, nccl_tests
from rules.estimates.memory import model_state
from rules.estimates.power_cost import power
from rules.estimates.reliability import checkpoint
from rules.estimates.reliability import failures as reliability
from rules.estimates.training_time import scaling


@pytest.mark.parametrize(("estimator", "arguments", "words"), [
    (reliability.job_mtbf_h, (math.nan, 16), "node_mtbf_h must be a positive finite number"),
    (interconnect.busbw_factor, ("all-reduce", 0), "ranks must be an integer >= 1"),
    (scaling.measured_scaling_efficiency, ([(8, 1e5), (8, 2e5)],), "two measurements at 8 GPUs"),
    (nccl_tests.busbw_at_size_gbs, ((), 1e6), "no row of a non-zero size"),
    (model_state.model_state_bytes_per_param, ("fp8", "adamw"), "unknown precision 'fp8'"),
    (power.pdu_capacity_kw, ([], "2N", 0.8), "at least one PDU"),
])
def test_estimators_raise_inconsistent_input_naming_the_argument(estimator, arguments, words) -> None:
    with pytest.raises(InconsistentInput, match=words):
        estimator(*arguments)


def test_an_empty_checkpoint_is_refused() -> None:
    # An adapter run that trains nothing and saves no frozen weights would write an empty checkpoint.
    with pytest.raises(InconsistentInput, match="empty"):
        checkpoint.training_checkpoint_size(7e9, "bf16-mixed", "adamw", trainable_parameters=0,
                                            save_frozen_weights=False)


def test_inconsistent_input_is_a_value_error() -> None:
    # Callers that only need to know an argument was refused may keep catching ValueError.
    assert issubclass(InconsistentInput, ValueError)
