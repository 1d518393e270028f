"""An adapter fine-tune in the step model: the frozen weights get no weight gradients, and only the adapters are
reduced across data-parallel ranks and stepped by the optimizer (LoRA, Hu et al. 2021, arXiv 2106.09685 §4.1:
the pretrained weights are frozen; PEFT still back-propagates the data gradients through them)."""

from __future__ import annotations

import pytest

from rules.catalogue import load_catalogue
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.step_time import StepTimeModel
from rules.estimates.training_time.step_time_figures import (
    Measured,
    achievable_rates,
    efficiencies_from_data,
    hardware_from_catalogue,
)
from rules.estimates.training_time.transformer_work import LayerSlice, layer_gemms
from rules.policy import default_policy

# Llama-2-70B (Meta's config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads, ffn 28672, vocab 32000)
LLAMA_2_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=32000, mlp="swiglu",
                         norm="rmsnorm", dropout=False, tied_embeddings=False)
SEQUENCE = 4096
ADAPTER = 0.005  # trainable ÷ all parameters (LoRA rank 64 on every projection of a 70B model is about 0.4-0.6 %)


def _model(adapter_fraction: float | None) -> StepTimeModel:
    catalogue = load_catalogue().document
    efficiencies = efficiencies_from_data(catalogue, default_policy().document, "H100-SXM5-80GB")
    return StepTimeModel(LLAMA_2_70B, SEQUENCE, hardware_from_catalogue(catalogue, "DGX-H100"), efficiencies,
                         adapter_fraction=adapter_fraction)


def test_an_adapter_fine_tune_of_70b_runs_faster_by_the_weight_gradients_it_skips():
    """Two DGX H100, tensor 8 × pipeline 2, 16 micro-batches of one sequence, one data-parallel replica.

    Per micro-batch on the slowest (last) stage of 40 layers, the full fine-tune runs each layer's four weight-gradient
    GEMMs (n, k, m) for every forward GEMM (m, n, k) and the output layer's (V/t, h, s); the adapter fine-tune runs
    none of them and adds its adapters' 6 FLOPs per trainable parameter and token: 3 × 0.005 × the forward's FLOPs at
    the forward's rate, i.e. 0.015 × the forward's seconds. The step is (m + (p − 1)) stage times plus the sends and
    the optimizer, whose AdamW step shrinks to the 0.5 % of parameters trained.
    """
    layout = training_layout(16, 8, 0, tensor=8, pipeline=2, micro_batch=1, global_batch=16, sequence_parallel=True,
                             flash_attention=True, precision="bf16-mixed", sharding="ddp")
    full, adapter = _model(None), _model(ADAPTER)
    full_step, adapter_step = full.evaluate(layout), adapter.evaluate(layout)

    rates = achievable_rates(full.hardware, full.efficiencies, Measured(), "bf16-mixed")
    sweep, flops_s = full.efficiencies.gemm_sweep, rates.gemm_flops_s

    def seconds(m: float, n: float, k: float, rate: float = flops_s) -> float:
        return 2 * m * n * k / (rate * sweep.efficiency(m, n, k))

    part = LayerSlice(SEQUENCE, 1, tensor=8, sequence_parallel=True, flash_attention=True)
    gemms = layer_gemms(LLAMA_2_70B, part)
    weight_gradients = sum(seconds(n, k, m) for m, n, k in gemms)
    adapters = 3 * ADAPTER * sum(seconds(m, n, k) for m, n, k in gemms)
    output_weight_gradient = seconds(32000 / 8, 8192, SEQUENCE, rates.attention_flops_s)
    saved_per_stage = 40 * (weight_gradients - adapters) + output_weight_gradient
    stage_times = 16 + (2 - 1)  # m + (p − 1)/v
    expected = (full_step.step_s - stage_times * saved_per_stage
                - full_step.breakdown.optimizer_s * (1 - ADAPTER))
    assert adapter_step.step_s == pytest.approx(expected, rel=1e-9)
    speed_up = full_step.step_s / adapter_step.step_s
    print(f"full {full_step.step_s:.3f} s, adapter {adapter_step.step_s:.3f} s per step: {speed_up:.3f}× the tokens/s")
    assert adapter_step.tokens_per_s_per_gpu == pytest.approx(full_step.tokens_per_s_per_gpu * speed_up)
    # the weight gradients are a third of the GEMM FLOPs: more than a fifth of the step goes
    assert 1.2 < speed_up < 1.5


def test_an_adapter_reduces_only_its_trainable_parameters_across_replicas():
    """Eight replicas of tensor 8: the gradient all-reduce of a full fine-tune moves 2(n−1)/n × 2 B per parameter of
    the GPU's shard; an adapter fine-tune moves the same for its 0.5 %."""
    layout = training_layout(64, 8, 0, tensor=8, micro_batch=1, global_batch=64, sequence_parallel=True,
                             flash_attention=True, precision="bf16-mixed", sharding="ddp")
    full, adapter = _model(None).evaluate(layout), _model(ADAPTER).evaluate(layout)
    assert adapter.dp_comm_s == pytest.approx(full.dp_comm_s * ADAPTER)
    assert adapter.breakdown.optimizer_s == pytest.approx(full.breakdown.optimizer_s * ADAPTER)


def test_adapter_fraction_must_be_a_fraction():
    with pytest.raises(ValueError, match="adapter_fraction"):
        _model(1.5)
