"""Tests for rules.estimates.memory.sharding: one row per strategy and the one that communicates least."""

import pytest

from rules.estimates.communication.collectives import communication_bytes_per_step
from rules.estimates.communication.interconnect import Bandwidth
from rules.estimates.memory.model_state import model_state_bytes_per_param
from rules.estimates.memory.sharding import (
    compare_strategies,
    least_communication,
    refused_option,
    sized_option,
    with_common_usable,
)
from rules.estimates.memory.step_memory import TrainingMemory

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


def _rows(totals_gib: dict[str, float]) -> list:
    """Returns one row per strategy for a 7e9-parameter model on one 8-GPU DGX H100 (72 GiB usable, 20 % headroom).

    By hand (ZeRO, arXiv 1910.02054 §7.2): DDP, ZeRO-1 and ZeRO-2 move one all-reduce of the bf16 gradients,
    2 × 7/8 × 14e9 = 24.5 GB per GPU (68.1 ms at 360 GB/s); ZeRO-3 moves 1.5× that, 36.75 GB (102.1 ms).
    """
    return [sized_option(strategy, _memory(total, 72), communication_bytes_per_step(strategy, 7e9, 8, 8),
                         ONE_DGX_H100, comfortable_headroom_fraction=0.2)
            for strategy, total in totals_gib.items()]


def test_zero3_chosen_where_zero1_fits_comfortably_recommends_zero1_at_1_5_times_less_communication():
    # Given ddp over usable memory, zero1 at 48 of 72 GiB (33 % spare) and zero3 at 20 GiB, zero3 chosen:
    compared = compare_strategies(_rows({"ddp": 90, "zero1": 48, "zero3": 20}), "zero3")

    # then both fit comfortably, zero1 communicates least (24.5 GB against 36.75 GB: ZeRO §7.2.2's 1.5×),
    # and zero3 is the leanest.
    assert [o.strategy for o in compared.fitting] == ["zero1", "zero3"]
    assert [o.strategy for o in compared.comfortable] == ["zero1", "zero3"]
    assert compared.recommended.strategy == "zero1"
    assert compared.chosen_comm_ratio == pytest.approx(1.5)
    assert (compared.leanest.strategy, compared.leanest.total_gib) == ("zero3", 20)


def test_the_chosen_strategy_is_recommended_when_it_ties_the_least_communication():
    # ddp and zero1 both move 24.5 GB per GPU (ZeRO §7.2.1); ddp, chosen and comfortable, stays the choice.
    compared = compare_strategies(_rows({"ddp": 50, "zero1": 48, "zero3": 20}), "ddp")

    assert compared.recommended.strategy == "ddp"
    assert compared.chosen_comm_ratio == pytest.approx(1.0)


def test_a_tight_chosen_strategy_gives_way_to_one_that_fits_comfortably_even_if_it_communicates_more():
    # zero1 at 66 of 72 GiB leaves 8 % spare, under the 20 % headroom; zero3 at 20 GiB is the only comfortable
    # candidate, so it is recommended although zero1 moves 24.5 / 36.75 = 2/3 as much.
    compared = compare_strategies(_rows({"ddp": 90, "zero1": 66, "zero3": 20}), "zero1")

    assert [o.strategy for o in compared.comfortable] == ["zero3"]
    assert compared.recommended.strategy == "zero3"
    assert compared.chosen_comm_ratio == pytest.approx(2 / 3)


def test_when_nothing_fits_the_chosen_strategy_is_its_own_recommendation_and_the_leanest_is_named():
    rows = _rows({"ddp": 160, "zero1": 120, "zero3": 95}) + [refused_option("fsdp-hybrid", "needs whole nodes")]

    compared = compare_strategies(rows, "ddp")

    assert compared.fitting == () and compared.comfortable == ()
    assert compared.recommended.strategy == "ddp" and compared.chosen_comm_ratio == 1.0
    assert (compared.leanest.strategy, compared.leanest.total_gib) == ("zero3", 95)
