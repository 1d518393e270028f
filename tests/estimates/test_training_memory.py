"""Tests for rules.estimates.memory.step_memory: one step's memory on the most loaded GPU, by hand from its terms."""

from dataclasses import replace

import pytest

from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.measured_fit import FittingMicroBatch, MeasuredPeak, largest_fitting_given_measurement
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.step_memory import (
    MemorySettings,
    TrainingBatch,
    TrainingJob,
    largest_fitting_micro_batch,
    memory_min_gpus,
    no_fit_reason,
    training_memory,
)
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape

GIB = 2**30
# Two layers of h = 1024, 16 heads, GPT-style (gelu, dropout), s = 1024, full recompute. Korthikanti
# Table 2: each layer keeps its input 2sbh = 2,097,152 B; the embedding adds 8sb + sbh = 1,056,768 B
# (§4.3, Megatron compute_activation_memory). One micro-batch: 2 × 2,097,152 + 1,056,768 = 5,251,072 B.
SHAPE = ModelShape(layers=2, hidden=1024, heads=16)
ACTIVATIONS_PER_SEQUENCE = 5_251_072
FULL_RECOMPUTE = ActivationSaving(recompute="full")
BARE = MemorySettings(convention="zero-paper", cuda_context_gib=0.0, fragmentation_fraction=0.0,
                      headroom_fraction=0.0, gathered_layers=2)


def _job(parameters: float = 1e9, shape: ModelShape | None = SHAPE, micro_batch: int = 1) -> TrainingJob:
    return TrainingJob(TrainedModel(parameters, parameters, "bf16-mixed", "adamw"), shape,
                       TrainingBatch(sequence_length=1024, micro_batch=micro_batch, global_batch=None),
                       FULL_RECOMPUTE, virtual_stages=1, offload="none")


def test_ddp_step_is_16_bytes_per_parameter_plus_activations_context_and_fragmentation():
    # Given 1e9 parameters under DDP on 8 GPUs (ZeRO §3.1: 16Ψ = 16e9 B of model state per GPU),
    settings = replace(BARE, cuda_context_gib=1.0, fragmentation_fraction=0.1, headroom_fraction=0.1)

    estimate = training_memory(_job(), training_layout(8, 8, 1), 80, settings)

    # then other = 1 GiB + 10 % of (16e9 + 5,251,072) = 1,073,741,824 + 1,600,525,107.2 B,
    assert estimate.model_state_bytes == 16e9
    assert estimate.activations_bytes == ACTIVATIONS_PER_SEQUENCE
    assert estimate.other_bytes == pytest.approx(1_073_741_824 + 1_600_525_107.2)
    assert estimate.total_bytes == pytest.approx(18_679_518_003.2)
    # and 80 GiB less 10 % headroom leaves 77,309,411,328 B usable: it fits.
    assert estimate.usable_bytes == pytest.approx(77_309_411_328)
    assert estimate.fits is True
    assert estimate.model_state_total_bytes == 16e9


def test_zero3_holds_deepspeeds_working_set_of_the_largest_module_its_gradient_the_prefetch_and_small_tensors():
    # DeepSpeed stage3.py / memory.rst: the largest module (the tied 32,000 × 1024 embedding, 32,768,000
    # parameters) gathered and its gradient computed, 2 × 32,768,000; the prefetch bucket of
    # deepspeed/runtime/zero/config.py, 5e7 elements (max live 1e9 leaves room); the persistent tensors of at
    # most 1e5 elements, here the LayerNorms (weight + bias of 1024): 2 layers × 2 norms × 2048 + the final
    # 2048 = 10,240. (65,536,000 + 50,000,000 + 10,240) × 2 B = 231,092,480 B. ZeRO-3 on 8 ranks: 16e9 / 8.
    job = _job(shape=replace(SHAPE, vocab=32000, tied_embeddings=True))

    estimate = training_memory(job, training_layout(8, 8, 1), 80, BARE, sharding="zero3")

    assert estimate.sharding == "zero3"
    assert estimate.gathered_bytes == 231_092_480
    assert estimate.model_state_bytes == pytest.approx(2e9)


def test_fsdp_holds_two_decoder_layers_unsharded():
    # PyTorch FSDP with prefetch: memory.gathered_layers = 2 units of the larger of one decoder layer
    # (4 × 1024² attention + 2 × 1024 × 4096 MLP + 2 LayerNorms of 2,048 = 12,587,008 parameters) and the root
    # (the tied embedding + final norm, 32,770,048): 2 × 2 B × 32,770,048 = 131,080,192 B.
    job = _job(shape=replace(SHAPE, vocab=32000, tied_embeddings=True))

    estimate = training_memory(job, training_layout(8, 8, 1), 80, BARE, sharding="fsdp-full")

    assert estimate.gathered_bytes == 131_080_192


def test_parameter_offload_leaves_only_the_working_set_on_the_gpu_and_the_host_holds_the_rest_with_buffers():
    # Given ZeRO-3 with optimizer and parameters offloaded (ZeRO-Infinity) on one 8-GPU node,
    job = replace(_job(shape=replace(SHAPE, vocab=32000, tied_embeddings=True)), offload="optimizer+parameters")

    estimate = training_memory(job, training_layout(8, 8, 1), 80, BARE, sharding="zero3")

    # then the GPU keeps no weight, gradient or optimizer shard, only the gathered working set (above),
    assert estimate.model_state_bytes == 0
    assert estimate.gathered_bytes == 231_092_480
    # each rank offloads its (2 + 2 + 12) × 1e9 / 8 B, and the node's host holds 8 of them × DeepSpeed's 1.5.
    assert estimate.host_offload_bytes == 2e9
    assert estimate.host.state_bytes == 16e9
    assert estimate.host.buffer_bytes == 8e9 and estimate.host.total_bytes == 24e9


def test_fp32_training_stores_4_byte_activations():
    # Korthikanti Table 2 at 4 bytes: each layer keeps its input 4sbh = 4,194,304 B; the token ids (8sb) and
    # the 1-byte embedding dropout mask (sbh) keep their width: 2 × 4,194,304 + 1,056,768 = 9,445,376 B.
    job = _job()
    fp32 = replace(job, model=replace(job.model, precision="fp32"))

    estimate = training_memory(fp32, training_layout(8, 8, 1), 80, BARE)

    assert estimate.activations_bytes == 9_445_376
    assert estimate.activation_counting.element_bytes == 4


def test_megatron_activation_convention_counts_megatron_lm_formula():
    # Megatron-LM theoretical_memory_usage.py, compute_activation_memory_without_sp (t = 1):
    # sbh(10 + 24/t) × L + 8sb + sbh = 34 × 1,048,576 × 2 + 8,192 + 1,048,576 = 72,359,936; × 1.05.
    settings = replace(BARE, activation_convention="megatron")

    estimate = training_memory(_job(), training_layout(8, 8, 1), 80, settings)

    assert estimate.activations_bytes == pytest.approx(75_977_932.8, rel=1e-15)
    assert estimate.activation_counting.convention == "megatron"


def test_unknown_architecture_leaves_the_activations_and_the_verdict_open():
    estimate = training_memory(_job(shape=None), training_layout(8, 8, 1), 80, BARE)
    assert estimate.activations_bytes is None and estimate.fits is None
    assert estimate.within_usable  # model state alone fits


def test_largest_fitting_micro_batch_by_hand():
    # 1e8 parameters under DDP: 1.6e9 B of state, plus 5,251,072 B per sequence of the micro-batch.
    # A GPU of 1.6e9 + 10.5 × 5,251,072 B holds micro-batch 10 and not 11.
    capacity_gib = (1.6e9 + 10.5 * ACTIVATIONS_PER_SEQUENCE) / GIB
    layout = training_layout(8, 8, 1)

    assert largest_fitting_micro_batch(_job(1e8), layout, capacity_gib, BARE, limit=64) == 10
    assert largest_fitting_micro_batch(_job(1e8), layout, capacity_gib, BARE, limit=4) == 4
    assert largest_fitting_micro_batch(_job(1e9), layout, capacity_gib, BARE, limit=64) == 0
    assert largest_fitting_micro_batch(_job(1e8, shape=None), layout, capacity_gib, BARE, limit=64) is None


def test_a_measured_peak_moves_the_largest_fitting_micro_batch_past_or_below_the_measured_one():
    # Activations grow with the micro-batch (Korthikanti et al. 2022 Table 2), so the fitting ones are 1..k.
    # Estimated k = 2 on 72 GiB usable; a measured 70.1 GiB at micro-batch 4 shows 4 fits: k is at least 4.
    fits = largest_fitting_given_measurement(2, 72.0, MeasuredPeak(micro_batch=4, peak_gib=70.1))
    assert (fits.largest, fits.measured_fits) == (4, True)
    # Estimated k = 16; a measured 75.3 GiB at micro-batch 8 shows 8 does not fit: k is at most 7.
    over = largest_fitting_given_measurement(16, 72.0, MeasuredPeak(micro_batch=8, peak_gib=75.3))
    assert (over.largest, over.measured_fits) == (7, False)
    # A measurement that agrees with the estimate leaves it: k = 16, 8 measured within 72 GiB; 1 over it → 0.
    assert largest_fitting_given_measurement(16, 72.0, MeasuredPeak(8, 60.0)).largest == 16
    assert largest_fitting_given_measurement(16, 72.0, MeasuredPeak(1, 80.0)).largest == 0
    assert largest_fitting_given_measurement(5, 72.0, None) == FittingMicroBatch(5, None)


def test_memory_min_gpus_by_hand_in_whole_nodes():
    # ZeRO-3 shards 16e9 B over N ranks: 16e9/N + 5,251,072 ≤ 1 GiB needs N ≥ 14.97, so 15 GPUs,
    # which is two nodes of 8: 16.
    layout = training_layout(8, 8, 1, sharding="zero3")
    assert memory_min_gpus(_job(), layout, 1.0, BARE) == 16


def test_no_gpu_count_fits_ddp_and_the_reason_quotes_the_need():
    # DDP replicates the 16e9 B on every GPU: 16,005,251,072 B = 14.9 GiB against 1 GiB on any count.
    layout = training_layout(8, 8, 1)
    assert memory_min_gpus(_job(), layout, 1.0, BARE) is None
    assert no_fit_reason(_job(), layout, 1.0, BARE) == (
        "no GPU count fits memory: under ddp one training step needs 14.9 GiB per GPU even on 131,072 GPUs, "
        "more than the 1.0 GiB usable")
    assert no_fit_reason(_job(), layout, 80.0, BARE) is None
