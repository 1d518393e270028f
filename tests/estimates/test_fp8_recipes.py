"""The costs an fp8-mixed step pays besides its faster GEMMs: Transformer Engine's casts of every fp8 GEMM input.

Sources (rules/estimates/training_time/fp8_casts.py): NVIDIA/TransformerEngine @ d0067d0d —
``transformer_engine/common/gemm/cublaslt_gemm.cu`` L137 "Hopper only supports TN GEMMs for FP8. 'Column-wise data'
is transpose of data" (so each input is also written transposed for the backward GEMM that reduces over its other
dimension); ``pytorch/module/linear.py`` L386-389 and L428-435 (the input quantised rowwise and, for the weight
gradient, columnwise), L900-905 ("dgrad GEMM requires row-wise usage, wgrad GEMM requires column-wise usage"), L479
and L1887-1898 (fp8 weights cached across micro-batches with ``is_first_microbatch``); ``pytorch/csrc/quantizer.cpp``
L632-645 (delayed scaling: one cast kernel) and L1009-1028 (current scaling: amax pass, scale, cast);
``common/recipe/__init__.py`` MXFP8BlockScaling ("each group of 32 consecutive values is scaled together using their
own scaling factor. The type of the scaling factor is E8M0"); OCP Microscaling Formats (MX) v1.0 §5 (k = 32, one
8-bit E8M0 scale).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rules.catalogue import load_catalogue
from rules.errors import InconsistentInput
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.fp8_casts import (
    cast_bytes_per_element,
    cast_kernels,
    layer_casts,
    weight_casts,
    weight_casts_per_step,
)
from rules.estimates.training_time.step_time import StepTimeModel
from rules.estimates.training_time.step_time_figures import (
    Measured,
    achievable_rates,
    efficiencies_from_data,
    hardware_from_catalogue,
)
from rules.estimates.training_time.transformer_work import LayerSlice, layer_gemms
from rules.policy import default_policy

LLAMA_3_8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, mlp="swiglu",
                        norm="rmsnorm", dropout=False, tied_embeddings=False)
TRIAD_BYTES_S = 2.97e12  # H100 SXM STREAM triad (Azure ND H100 v5; catalogue hbm_triad_tbs)
LAUNCH_S = 2.7e-6  # catalogue kernel_launch_us


def test_bytes_per_gemm_input_by_recipe():
    """Read the bf16 tensor (2 B), write the fp8 copy (1 B) and its transpose (1 B): delayed scaling 2 + 1 + 1 = 4 B
    in one kernel (the amax is taken as it casts); current scaling reads the tensor once more for its amax first:
    2 + 2 + 1 + 1 = 6 B in four kernels (zero the amax, reduce it, the scale, the cast); MXFP8 writes each copy with
    one 1-byte E8M0 scale per 32 elements: 2 + 2 × (1 + 1/32) = 4.0625 B. Without a weight gradient (frozen weights)
    no transpose: 2 + 1 = 3 B."""
    assert cast_bytes_per_element("delayed") == 4
    assert cast_bytes_per_element("current") == 6
    assert cast_bytes_per_element("mxfp8") == 4.0625
    assert cast_bytes_per_element("delayed", transposed=False) == 3
    assert (cast_kernels("delayed"), cast_kernels("current"), cast_kernels("mxfp8")) == (1, 4, 1)


def test_a_llama_3_8b_layer_casts_its_gemm_inputs_and_output_gradients():
    """Sequence 8192, micro-batch 1, tensor 1. Forward GEMMs (m, n, k): QKV (8192, 6144, 4096), projection
    (8192, 4096, 4096), MLP up with gate (8192, 28672, 4096), down (8192, 4096, 14336).
    Inputs m·k: 8192 × (4096 + 4096 + 4096 + 14336) = 218,103,808; output gradients m·n: 8192 × (6144 + 4096 + 28672
    + 4096) = 352,321,536; 570,425,344 elements × 4 B = 2,281,701,376 B in 8 kernels (delayed). Full recompute casts
    the inputs again: + 218,103,808 × 4 B. Weights n·k: 6144·4096 + 4096·4096 + 28672·4096 + 4096·14336 =
    218,103,808 × 4 B = 872,415,232 B in 4 kernels."""
    gemms = layer_gemms(LLAMA_3_8B, LayerSlice(8192, 1))
    assert layer_casts(gemms, "delayed", "none") == (2_281_701_376, 8)
    assert layer_casts(gemms, "current", "none") == (570_425_344 * 6, 32)
    assert layer_casts(gemms, "delayed", "full") == (2_281_701_376 + 218_103_808 * 4, 12)
    assert weight_casts(gemms, "delayed") == (872_415_232, 4)
    # TE caches fp8 weights across a step's micro-batches, except when they are sharded and gathered again for each
    assert (weight_casts_per_step("zero1", 8), weight_casts_per_step("zero3", 8)) == (1, 8)


def _model(server: str = "DGX-H100", gpu: str = "H100-SXM5-80GB") -> StepTimeModel:
    catalogue = load_catalogue().document
    return StepTimeModel(LLAMA_3_8B, 8192, hardware_from_catalogue(catalogue, server),
                         efficiencies_from_data(catalogue, default_policy().document, gpu))


LAYOUT = training_layout(64, 8, 0, sharding="zero1", micro_batch=1, global_batch=512, flash_attention=True)


def test_fp8_step_on_h100_exceeds_the_pure_gemm_speed_up_by_the_casts_at_triad_bandwidth():
    """Llama-3-8B on 8 DGX H100, tensor 1, ZeRO-1, 512 sequences of 8192 a step: 8 micro-batches per rank.

    The pure GEMM speed-up is the bf16 step with its GEMM and attention time replaced by the fp8 layout's (the GEMMs
    at the FP8 best matmul, attention and the output layer in 16 bits). On top, per micro-batch and layer the
    activation casts, 2,281,701,376 B and 8 kernels, and once per step (weights cached) the weight casts,
    872,415,232 B and 4 kernels per layer:
    8 × 32 × (2,281,701,376 / 2.97e12 + 8 × 2.7e-6) + 32 × (872,415,232 / 2.97e12 + 4 × 2.7e-6) = 0.2119 s."""
    model = _model()
    bf16, fp8 = model.evaluate(LAYOUT), model.evaluate(replace(LAYOUT, precision="fp8-mixed"))
    pure_gemm_speed_up_s = bf16.step_s - bf16.breakdown.compute_s + fp8.breakdown.compute_s
    casts_s = (8 * 32 * (2_281_701_376 / TRIAD_BYTES_S + 8 * LAUNCH_S)
               + 32 * (872_415_232 / TRIAD_BYTES_S + 4 * LAUNCH_S))
    assert casts_s == pytest.approx(0.2119, abs=5e-5)
    assert bf16.breakdown.dp_comm_exposed_s == 0 == fp8.breakdown.dp_comm_exposed_s
    assert fp8.step_s == pytest.approx(pure_gemm_speed_up_s + casts_s, rel=1e-12)
    print(f"bf16 {bf16.step_s:.3f} s, fp8 GEMMs alone {pure_gemm_speed_up_s:.3f} s, with the casts {fp8.step_s:.3f} s")
    assert fp8.fp8_recipe == "delayed" and bf16.fp8_recipe is None

    # current scaling: 2 B more per element and 3 more kernels per cast
    current = model.evaluate(replace(LAYOUT, precision="fp8-mixed", fp8_recipe="current"))
    more_s = (8 * 32 * (570_425_344 * 2 / TRIAD_BYTES_S + 8 * 3 * LAUNCH_S)
              + 32 * (218_103_808 * 2 / TRIAD_BYTES_S + 4 * 3 * LAUNCH_S))
    assert current.step_s == pytest.approx(fp8.step_s + more_s, rel=1e-12)


def test_sharded_weights_are_cast_for_every_micro_batch():
    """ZeRO-3 gathers the weights for each micro-batch and TE keeps no fp8 cache under FSDP: 8 weight casts a step."""
    model = _model()
    layout = replace(LAYOUT, precision="fp8-mixed")
    cached, sharded = model.evaluate(layout), model.evaluate(replace(layout, sharding="zero3"))
    per_cast_s = 32 * (872_415_232 / TRIAD_BYTES_S + 4 * LAUNCH_S)
    assert sharded.breakdown.memory_bound_s - cached.breakdown.memory_bound_s == pytest.approx(7 * per_cast_s,
                                                                                               rel=1e-9)


def test_the_recipe_does_not_touch_a_bf16_step():
    model = _model()
    assert model.evaluate(replace(LAYOUT, fp8_recipe="current")).step_s == model.evaluate(LAYOUT).step_s


def test_mxfp8_runs_on_blackwell_and_is_refused_on_hopper():
    layout = replace(LAYOUT, precision="fp8-mixed", fp8_recipe="mxfp8")
    with pytest.raises(InconsistentInput, match="fp8_recipe mxfp8 needs MXFP8 Tensor Cores"):
        _model().evaluate(layout)
    b200 = _model("DGX-B200", "B200-SXM-180GB")
    mx, delayed = b200.evaluate(layout), b200.evaluate(replace(layout, fp8_recipe="delayed"))
    # 4.0625 against 4 B per cast element: 1/16 B more on every activation and weight cast, at B200's HBM rate
    hbm_bytes_s = achievable_rates(b200.hardware, b200.efficiencies, Measured(), "fp8-mixed").hbm_bytes_s
    more_s = (8 * 32 * 570_425_344 + 32 * 218_103_808) / 16 / hbm_bytes_s
    assert mx.step_s == pytest.approx(delayed.step_s + more_s, rel=1e-9)
    assert mx.fp8_recipe == "mxfp8"


def test_frozen_weights_need_no_transposed_inputs():
    """An adapter fine-tune computes no weight gradient for the base weights: their inputs and output gradients are
    cast rowwise only (3 B per element), the weights still both ways for the data gradient."""
    catalogue = load_catalogue().document
    adapter = StepTimeModel(LLAMA_3_8B, 8192, hardware_from_catalogue(catalogue, "DGX-H100"),
                            efficiencies_from_data(catalogue, default_policy().document, "H100-SXM5-80GB"),
                            adapter_fraction=0.005)
    layout = replace(LAYOUT, precision="fp8-mixed")
    bf16 = adapter.evaluate(LAYOUT)
    fp8 = adapter.evaluate(layout)
    casts_s = (8 * 32 * (570_425_344 * 3 / TRIAD_BYTES_S + 8 * LAUNCH_S)
               + 32 * (872_415_232 / TRIAD_BYTES_S + 4 * LAUNCH_S))
    assert fp8.breakdown.memory_bound_s == pytest.approx(bf16.breakdown.memory_bound_s + casts_s, rel=1e-12)
