"""Tests for rules.estimates.sharding: one row per strategy and the one that communicates least."""

import pytest

from rules.estimates.communication import communication_bytes_per_step
from rules.estimates.interconnect import Bandwidth
from rules.estimates.memory import TrainingMemory
from rules.estimates.model_state import model_state_bytes_per_param
from rules.estimates.sharding import least_communication, refused_option, sized_option, with_common_usable

GIB = 2**30
ONE_DGX_H100 = Bandwidth(360.0, 360.0, None, "node", "NVLink 900 GB/s", "", 1)


def _memory(total_gib: float, usable_gib: float) -> TrainingMemory:
    state = model_state_bytes_per_param("bf16-mixed", "adamw")
    return TrainingMemory("zero1", 1, state, "zero-paper", total_gib * GIB, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                          80 * GIB, usable_gib * GIB, 7e9)


def test_a_sized_row_by_hand():
    # 48 GiB of 72 usable leaves 1/3 spare, comfortable at a 20 % headroom; a DDP all-reduce of 7e9 bf16
    # gradients on one 8-GPU node moves 2 × 7/8 × 14e9 = 24.5 GB per GPU, 24.5 / 360 = 68.1 ms.
    step = communication_bytes_per_step("ddp", 7e9, 8, ranks_per_node=8)

    row = sized_option("ddp", _memory(48, 72), step, ONE_DGX_H100, comfortable_headroom_fraction=0.2)

    assert (row.total_gib, row.usable_gib, row.fits, row.comfortable) == (48, 72, True, True)
    assert row.spare_fraction == pytest.approx(1 / 3)
    assert row.comm_gb_per_step == pytest.approx(24.5)
    assert row.comm_s_per_step == pytest.approx(24.5 / 360)
    tight = sized_option("ddp", _memory(66, 72), step, ONE_DGX_H100, comfortable_headroom_fraction=0.2)
    assert tight.fits and not tight.comfortable


def test_least_communication_prefers_the_less_aggressive_strategy_on_a_tie():
    # ZeRO §7.2.1: ZeRO-1 communicates as much as DDP; the less aggressive one is preferred.
    step = communication_bytes_per_step("ddp", 7e9, 8, ranks_per_node=8)
    rows = [sized_option(s, _memory(40, 72), step, ONE_DGX_H100, 0.2) for s in ("zero1", "ddp")]
    assert least_communication(rows).strategy == "ddp"
    assert least_communication([refused_option("fsdp-hybrid", "needs whole nodes")]) is None


def test_refused_rows_take_the_usable_memory_of_the_sized_ones():
    step = communication_bytes_per_step("ddp", 7e9, 8, ranks_per_node=8)
    rows = with_common_usable([refused_option("fsdp-hybrid", "needs whole nodes"),
                               sized_option("zero3", _memory(20, 71.7), step, ONE_DGX_H100, 0.2)])
    assert [row.usable_gib for row in rows] == [71.7, 71.7]
    assert rows[0].note == "needs whole nodes" and rows[0].total_gib is None
