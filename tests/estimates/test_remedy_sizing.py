"""rules.estimates.search.remedy_sizing: each size, fed back to the estimator it inverts, lands on the limit it aims
at."""

import pytest

from rules.errors import InconsistentInput
from rules.estimates.power_cost import power
from rules.estimates.reliability import checkpoint
from rules.estimates.search import remedy_sizing as sizing

DGX_H100_KW = 10.2  # NVIDIA DGX H100 user guide: 10.2 kW maximum input


def test_a_17_3_kw_pdu_limit_holds_one_dgx_h100_below_the_90_percent_warn_share():
    # 0.9 × 17.28 kW = 15.55 kW: one 10.2 kW node fits, two (20.4 kW) do not.
    assert sizing.nodes_per_rack_within(17.28, DGX_H100_KW, 0.9) == 1
    # A 50 kW budget at 90 %: 45 kW holds four (40.8 kW), not five (51 kW).
    assert sizing.nodes_per_rack_within(50.0, DGX_H100_KW, 0.9) == 4


def test_a_limit_exactly_at_the_share_counts_the_node():
    # 4 nodes × 10 kW = 40 kW = 0.8 × 50 kW: rack-power warns above the share, not at it.
    assert sizing.nodes_per_rack_within(50.0, 10.0, 0.8) == 4


def test_racks_split_into_full_racks_and_one_for_the_remainder():
    assert sizing.rack_split(4, 1) == ((4, 1),)
    assert sizing.rack_split(5, 2) == ((2, 2), (1, 1))
    assert sizing.rack_split(1, 4) == ((1, 1),)
    assert sizing.racks_needed(5, 2) == 3


@pytest.mark.parametrize(("redundancy", "pdus"), [("N", 1), ("N+1", 3), ("2N", 2), ("2N", 4)])
def test_the_pdu_rating_it_gives_derates_to_the_draw_over_the_share(redundancy, pdus):
    # Two DGX H100 (20.4 kW) at most 90 % of the derated PDU capacity (NEC 210.20(A): 80 % continuous load).
    rating = sizing.pdu_rating_kw(20.4, pdus, redundancy, 0.8, 0.9)

    capacity = power.pdu_capacity_kw([power.PduGroup(pdus, rating)], redundancy, 0.8)

    assert capacity == pytest.approx(20.4 / 0.9)


def test_2n_with_two_pdus_needs_each_to_carry_the_rack_alone():
    # 20.4 kW ÷ (0.9 × 0.8 × 1 PDU per feed) = 28.33 kW, quoted in 0.1 kW steps as 28.4 kW.
    rating = sizing.pdu_rating_kw(20.4, 2, "2N", 0.8, 0.9)
    assert rating == pytest.approx(28.333, abs=1e-3)
    assert sizing.round_up(rating, 0.1) == pytest.approx(28.4)


def test_too_few_pdus_for_the_redundancy_mode_are_refused():
    with pytest.raises(InconsistentInput, match="2N redundancy needs at least 2 PDUs"):
        sizing.pdu_rating_kw(10.0, 1, "2N", 0.8, 0.9)


def test_round_up_keeps_an_exact_multiple():
    assert sizing.round_up(28.3, 0.1) == pytest.approx(28.3)
    assert sizing.round_up(28.31, 0.1) == pytest.approx(28.4)
    assert sizing.round_up(2246.4, 1.0) == 2247


def test_the_write_bandwidth_it_gives_saves_the_checkpoint_in_the_allowed_time():
    # 987.75 GB (Llama-3-70B, 14 B/param) within 120 s at 80 % of the quoted write bandwidth.
    write = sizing.write_gbs_for_save(987.75, 120.0, 0.8)

    saved = checkpoint.checkpoint_save(987.75e9, write, 4, 100.0, write_efficiency=0.8)

    assert saved.bound_by == "storage" and saved.save_s == pytest.approx(120.0)


def test_capacity_with_spare_leaves_the_spare_share():
    capacity = sizing.capacity_with_spare(6.0, 0.25)
    assert capacity == pytest.approx(8.0) and 1 - 6.0 / capacity == pytest.approx(0.25)


def test_host_ram_meets_the_margin_and_the_gpu_memory_multiple():
    # DGX H200: 8 × 140.4 GiB = 1,123.2 GiB of GPU memory; the 2× rule of thumb asks 2,246.4 GiB.
    assert sizing.host_ram_gib(87.2, 0.2, 1123.2, 2.0) == pytest.approx(2246.4)
    assert sizing.host_ram_gib(87.2, 0.2, 1123.2, None) == pytest.approx(109.0)


def test_nodes_for_gpus_and_window():
    assert sizing.nodes_for_gpus(24, 8) == 3 and sizing.nodes_for_gpus(25, 8) == 4
    # A run at 90 % of its window on 10 nodes reaches 75 % on ⌈10 × 0.9 ÷ 0.75⌉ = 12 nodes.
    assert sizing.nodes_for_window(10, 0.9, 0.75) == 12


def test_nodes_dividing_batch_finds_the_next_count_with_whole_micro_batch_rounds():
    # Global batch 256, micro-batch 1, one GPU per replica: 26 nodes (208 ranks) leave 48 sequences over;
    # 32 nodes (256 ranks) are the fewest at or above 26 that split 256 whole.
    assert sizing.nodes_dividing_batch(26, 8, 128, 128, 256, 1) == 32
    assert sizing.nodes_dividing_batch(16, 8, 128, 128, 256, 1) == 16
    # Tensor 8 (16 replicas on 128 GPUs): 3 nodes are 3 replicas, which do not divide 64; 4 do.
    assert sizing.nodes_dividing_batch(3, 8, 128, 16, 64, 1) == 4
    # No count up to one micro-batch per rank splits a batch of 7 over 8-GPU nodes.
    assert sizing.nodes_dividing_batch(1, 8, 8, 8, 7, 1) is None


def test_compute_nics_give_each_gpu_its_nic_and_line_rate():
    assert sizing.compute_nics(8, 1.0, 400.0, 200.0) == (8, 400.0)
    assert sizing.compute_nics(8, 1.0, 100.0, 400.0) == (8, 400.0)


def test_prices_and_cost_differences():
    assert sizing.price_change(16, 289_000) == 4_624_000
    assert sizing.price_change(-1, 295_000) == -295_000
    assert sizing.added_cost([4_624_000, 0.0]) == 4_624_000
    assert sizing.cost_difference(90.0, 100.0) == -10.0
    assert sizing.rack_draw_kw(2, DGX_H100_KW) == pytest.approx(20.4)
    assert sizing.gpus_on(4, 8) == 32
    assert sizing.whole_minutes(785.71) == 786


def test_nodes_dividing_batch_below_finds_the_previous_count_with_whole_rounds():
    # Global batch 512 on 3 DGX A100 (24 ranks) is 21.3 rounds; 2 nodes (16 ranks) split it into 32.
    assert sizing.nodes_dividing_batch_below(2, 8, 24, 24, 512, 1) == 2
    assert sizing.nodes_dividing_batch(4, 8, 24, 24, 512, 1) == 4
    # One node of 8 GPUs in tensor 16 replicas holds no whole replica: none below 2 nodes splits anything.
    assert sizing.nodes_dividing_batch_below(1, 8, 32, 2, 64, 1) is None
