"""Tests for rules.estimates.reliability.checkpoint: each quotes the published figure it reproduces."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.reliability.checkpoint import (
    checkpoint_save,
    checkpoint_size,
    interval_deviation_ratio,
    training_checkpoint_size,
    young_daly_interval_s,
)


def test_bf16_adam_checkpoint_is_14_bytes_per_param_reference_table():
    # shared/reference: bf16 weights (2) + fp32 master (4) + Adam m and v (8) = 14 B/param; no gradients.
    size = checkpoint_size(70e9, "bf16", "adamw")
    assert size.bytes_per_parameter == pytest.approx(14.0)
    assert (size.weights_bytes, size.master_weights_bytes, size.optimizer_bytes, size.gradients_bytes) == (
        140e9,
        280e9,
        560e9,
        0.0,
    )
    assert size.total_gb == pytest.approx(980.0)


def test_saving_gradients_adds_their_bytes():
    assert checkpoint_size(1e9, save_gradients=True).bytes_per_parameter == pytest.approx(16.0)
    # Megatron-LM keeps fp32 gradients (theoretical_memory_usage.py counts 18 B/param in memory).
    fp32_grads = checkpoint_size(1e9, save_gradients=True, gradient_bytes_per_parameter=4)
    assert fp32_grads.bytes_per_parameter == pytest.approx(18.0)


def test_other_optimizers_and_pure_fp32_per_eleutherai_cookbook():
    # Pure fp32 AdamW: 4 weights + 8 moments (gradients not saved) = 12.
    assert checkpoint_size(1e9, "fp32", "adamw").bytes_per_parameter == pytest.approx(12.0)
    # SGD with momentum in mixed precision: 2 + 4 master + 4 momentum = 10; 8-bit Adam: 2 + 4 + 2 = 8.
    assert checkpoint_size(1e9, "bf16", "sgd-momentum").bytes_per_parameter == pytest.approx(10.0)
    assert checkpoint_size(1e9, "bf16", "adam-8bit").bytes_per_parameter == pytest.approx(8.0)
    # Weights-only export (no master): 2 + Adam 8 = 10 when master_weights is switched off.
    assert checkpoint_size(1e9, master_weights=False).bytes_per_parameter == pytest.approx(10.0)
    with pytest.raises(ValueError):
        checkpoint_size(1e9, "fp32", master_weights=True)


def test_invalid_enums_name_allowed_values():
    with pytest.raises(ValueError, match="bf16, fp16, fp32"):
        checkpoint_size(1e9, "fp8")
    with pytest.raises(ValueError, match="adamw, adam, adam-8bit, sgd-momentum, sgd"):
        checkpoint_size(1e9, optimizer="lion")
    with pytest.raises(ValueError, match="first, daly"):
        young_daly_interval_s(60, 10_800, order="third")


def test_save_time_bound_by_storage_or_node_nics():
    # 980 GB to storage that writes 50 GB/s, from 16 nodes with 25 GB/s storage NICs (400 GB/s): 19.6 s.
    save = checkpoint_save(980e9, storage_write_gbs=50.0, writing_nodes=16, storage_nic_gbs_per_node=25.0)
    assert save.save_s == pytest.approx(19.6) and save.bound_by == "storage"
    # The same from one writer node (rank-0 torch.save): bounded by its 25 GB/s NIC: 39.2 s.
    single = checkpoint_save(980e9, 50.0, 1, 25.0)
    assert single.save_s == pytest.approx(39.2) and single.bound_by == "node-nics"


def test_young_daly_60s_save_3h_mtbf_is_1138_s():
    # Young 1974 / Daly 2006 first order: τ = √(2·δ·M); δ = 60 s, M = 3 h = 10 800 s.
    tau = young_daly_interval_s(60.0, 3 * 3600.0)
    assert tau == pytest.approx(math.sqrt(2 * 60 * 10_800))
    assert tau == pytest.approx(1138.4, abs=0.05)
    assert tau / 60 == pytest.approx(19.0, abs=0.1)


def test_daly_2006_higher_order_estimate():
    # Daly 2006: τ = √(2δM)·[1 + (1/3)√(δ/2M) + (1/9)(δ/2M)] − δ for δ < 2M; τ = M otherwise.
    delta, m = 60.0, 10_800.0
    r = delta / (2 * m)
    expected = math.sqrt(2 * delta * m) * (1 + math.sqrt(r) / 3 + r / 9) - delta
    assert young_daly_interval_s(delta, m, order="daly") == pytest.approx(expected)
    assert expected == pytest.approx(1098.8, abs=0.1)
    assert young_daly_interval_s(5000.0, 2000.0, order="daly") == 2000.0


@given(save=st.floats(1e-3, 1e6), mtbf=st.floats(1e-3, 1e9), order=st.sampled_from(["first", "daly"]))
def test_interval_is_finite_and_positive(save, mtbf, order):
    tau = young_daly_interval_s(save, mtbf, order)
    assert math.isfinite(tau) and tau > 0


def test_training_checkpoint_of_llama3_70b_bf16_adamw_is_14_bytes_per_param_reference_table():
    # shared/reference: bf16 weights 2 + fp32 master 4 + Adam m and v 8 = 14 B/param; 70,553,706,496 params
    # (Llama-3-70B) → 987.75 GB, the same as checkpoint_size in its own vocabulary.
    size = training_checkpoint_size(70_553_706_496, "bf16-mixed", "adamw")
    assert size.bytes_per_parameter == pytest.approx(14.0)
    assert size.total_gb == pytest.approx(987.751891, abs=1e-6)
    assert size.total_bytes == checkpoint_size(70_553_706_496, "bf16", "adamw").total_bytes


def test_training_checkpoint_gradients_follow_the_memory_convention():
    # Gradients are saved at the width the convention keeps them: 2 B (ZeRO paper), 4 B (Megatron-LM).
    assert training_checkpoint_size(1e9, "bf16-mixed", "adamw", save_gradients=True).bytes_per_parameter == 16.0
    megatron = training_checkpoint_size(1e9, "bf16-mixed", "adamw", save_gradients=True, convention="megatron")
    assert megatron.bytes_per_parameter == 18.0
    # Pure fp32 AdamW (4 + 8) and pure bf16 AdamW, whose moments torch.optim keeps in bf16 (2 + 4).
    assert training_checkpoint_size(1e9, "fp32", "adamw").bytes_per_parameter == 12.0
    assert training_checkpoint_size(1e9, "bf16-pure", "adamw").bytes_per_parameter == 6.0


def test_adapter_checkpoint_leaves_the_frozen_base_out():
    # LoRA on a 70B base with 0.2B trainable: without the base, 0.2B × 14 = 2.8 GB; with it, 140 GB more.
    adapter = training_checkpoint_size(70e9, "bf16-mixed", "adamw", trainable_parameters=0.2e9,
                                       save_frozen_weights=False)
    assert adapter.total_gb == pytest.approx(2.8)
    full = training_checkpoint_size(70e9, "bf16-mixed", "adamw", trainable_parameters=0.2e9)
    assert full.total_gb == pytest.approx(2.8 + 69.8 * 2)
    with pytest.raises(ValueError):
        training_checkpoint_size(1e9, "bf16-mixed", "adamw", trainable_parameters=2e9)
    with pytest.raises(ValueError):
        training_checkpoint_size(1e9, "bf16", "adamw")  # the submission's name is bf16-mixed


def test_interval_deviation_is_symmetric_around_the_young_daly_optimum():
    # Lost-time fraction δ/τ + τ/(2M) is (r + 1/r)/2 times its minimum at τ = r·τ* or τ*/r: one ratio for both.
    optimum = young_daly_interval_s(60.0, 3 * 3600.0)
    assert interval_deviation_ratio(2 * optimum, optimum) == pytest.approx(2.0)
    assert interval_deviation_ratio(optimum / 2, optimum) == pytest.approx(2.0)
    assert interval_deviation_ratio(optimum, optimum) == 1.0

    def lost(tau: float) -> float:
        return 60.0 / tau + tau / (2 * 3 * 3600.0)

    assert lost(2 * optimum) == pytest.approx(lost(optimum / 2))
    assert lost(2 * optimum) / lost(optimum) == pytest.approx(1.25)


def test_overhead_at_the_young_optimum_is_the_published_minimum() -> None:
    # Young 1974: at τ* = √(2δM) the first-order overhead δ/τ* + τ*/(2M) equals √(2δ/M).
    from rules.estimates.reliability.checkpoint import checkpoint_overhead_fraction, young_daly_interval_s

    save_s, mtbf_s = 60.0, 3 * 3600.0
    optimum_s = young_daly_interval_s(save_s, mtbf_s)

    assert checkpoint_overhead_fraction(optimum_s, save_s, mtbf_s) == pytest.approx(math.sqrt(2 * save_s / mtbf_s))
    # an interval twice the optimum costs (2 + 1/2)/2 = 1.25× the minimum (Daly 2006)
    assert checkpoint_overhead_fraction(2 * optimum_s, save_s, mtbf_s) == pytest.approx(
        1.25 * math.sqrt(2 * save_s / mtbf_s))


def test_a_quoted_write_bandwidth_is_discounted_by_the_write_efficiency() -> None:
    # 140e9 B from 4 nodes with one 400 Gb/s storage NIC each (200 GB/s) to storage quoted at 40 GB/s,
    # of which a checkpoint burst sustains 80 %: 32 GB/s bounds the save, 140 / 32 = 4.375 s.
    from rules.estimates.reliability.checkpoint import checkpoint_save

    save = checkpoint_save(140e9, 40.0, 4, 50.0, write_efficiency=0.8)

    assert (save.write_gbs, save.bound_by, save.save_s) == (32.0, "storage", pytest.approx(4.375))
    with pytest.raises(ValueError, match="write_efficiency"):
        checkpoint_save(140e9, 40.0, 4, 50.0, write_efficiency=0.0)


def test_an_hourly_interval_against_the_young_daly_optimum_by_hand() -> None:
    # δ = 60 s, M = 3 h: τ* = √(2 × 60 × 10,800) = 1138.4 s (Young 1974). An hourly interval is
    # 3600 / 1138.4 = 3.16× off; δ/τ + τ/2M is 0.18333 at τ = 3600 s and 0.10541 at τ*, 7.79 % more wall time.
    from rules.estimates.reliability.checkpoint import interval_review

    review = interval_review(3600, 60, 10_800)

    assert review.optimum_s == pytest.approx(1138.42, abs=0.01)
    assert review.off_ratio == pytest.approx(3.1623, abs=1e-4)
    assert review.excess_overhead == pytest.approx(60 / 3600 + 3600 / 21_600 - 2 * 60 / review.optimum_s)
    assert review.excess_overhead == pytest.approx(0.0779, abs=1e-4)
