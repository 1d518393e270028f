"""The step-time model against the second calibration set: the Megatron-LM README's H100 runs.

Source: NVIDIA/Megatron-LM ``README.md`` @ d98e8a64 ("Training speed and scalability"), its weak-scaling table
(``images/model_table.png``) and its 175B strong-scaling figure (``images/strong_scaling.png``), both added in
f2e5db40 (2024-07-15, Megatron-Core r0.8.0); transcribed with their provenance in docs/step-model-sources.md §1.
GPT models, vocabulary 131,072, sequence 4,096, H100 80GB SXM (DGX H100: 8 GPUs, NVLink 4, 8 × 400 Gb/s NDR
InfiniBand), "fine-grained overlapping with DP (--overlap-grad-reduce, --overlap-param-gather), TP
(--tp-comm-overlap), and PP (enabled by default)". Per GPU throughput in TFLOP/s as Megatron-LM counts it
(``num_floating_point_operations`` at core_r0.8.0: 72·B·s·L·h²·(1 + s/6h + V/12Lh) per step).

What the README leaves unstated is taken as Megatron-Core's documented defaults and the table's own arithmetic,
the same for every run (none is a per-row choice):
- bf16 (every printed MFU is TFLOP/s ÷ the bf16 dense peak, 989.4), FlashAttention (Transformer Engine's fused
  attention), sequence parallelism with tensor parallelism (--tp-comm-overlap requires it), the distributed
  optimizer (ZeRO-1), no activation recompute, micro-batch 1;
- the models are GPT with multi-head attention, f = 4h, untied embeddings and no dropout: 12·L·h² + 2·V·h
  reproduces their names (1.75B, 7.11B, 177.2B, 461.4B);
- the interleaved pipeline schedule ("PP enabled by default" is the overlap of its sends) with two layers per
  virtual stage where a stage's layers are even, else one;
- the strong-scaling runs are the 177B weak-scaling row's layout (TP 8, PP 6, batch 1,152) on 96 … 4,608 GPUs:
  every GPU count the figure shows is 48 × a data-parallel size, and the 2,304-GPU point is that row.
The strong-scaling points were read off the figure's pixels (docs/step-model-sources.md: within +0.9/−0.2 % of the
table where both exist); the 2,304-GPU point is the weak-scaling row's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from rules.catalogue import load_catalogue
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.step_time import step_time
from rules.estimates.training_time.step_time_figures import efficiencies_from_data, hardware_from_catalogue
from rules.policy import default_policy

SEQUENCE = 4096
VOCAB = 131072


@dataclass(frozen=True)
class MegatronRun:
    name: str
    heads: int
    hidden: int
    layers: int
    tensor: int
    pipeline: int
    gpus: int
    global_batch: int
    tflops_per_gpu: float  # as published (Megatron-LM's FLOP count ÷ step time ÷ GPUs)

    @property
    def virtual_stages(self) -> int:
        """Two layers per virtual stage where a stage's layers are even, else one."""
        if self.pipeline == 1:
            return 1
        per_stage = self.layers // self.pipeline
        return per_stage // 2 if per_stage % 2 == 0 else per_stage

    @property
    def measured_step_s(self) -> float:
        s, h, layers = SEQUENCE, self.hidden, self.layers
        flops = 72 * self.global_batch * s * layers * h * h * (1 + s / (6 * h) + VOCAB / (12 * layers * h))
        return flops / (self.tflops_per_gpu * 1e12 * self.gpus)


WEAK_SCALING = (  # model_table.png: heads, hidden, layers, TP, PP, GPUs, global batch, TFLOP/s per GPU
    MegatronRun("1.7B", 16, 2048, 24, 1, 1, 48, 192, 408.8),
    MegatronRun("7.1B", 32, 4096, 30, 2, 1, 96, 192, 465.9),
    MegatronRun("16B", 48, 6144, 32, 4, 1, 192, 192, 489.1),
    MegatronRun("32B", 56, 7168, 48, 8, 1, 384, 192, 459.6),
    MegatronRun("70B", 64, 8192, 84, 8, 2, 768, 384, 419.7),
    MegatronRun("119B", 80, 10240, 92, 8, 4, 1536, 768, 420.5),
    MegatronRun("177B", 96, 12288, 96, 8, 6, 2304, 1152, 432.8),
    MegatronRun("314B", 128, 16384, 96, 8, 8, 3072, 1536, 474.4),
    MegatronRun("462B", 144, 18432, 112, 8, 16, 6144, 3072, 459.9),
)
STRONG_SCALING = tuple(  # strong_scaling.png, read off: GPUs, TFLOP/s per GPU (aggregate ÷ GPUs)
    MegatronRun(f"175B on {gpus}", 96, 12288, 96, 8, 6, gpus, 1152, tflops)
    for gpus, tflops in ((96, 464.5), (144, 463.6), (288, 460.6), (576, 457.7), (1152, 449.4), (3072, 425.7),
                         (4608, 414.7))
)
RUNS = WEAK_SCALING + STRONG_SCALING


def _modelled_s(run: MegatronRun, **changes: float) -> float:
    catalogue = load_catalogue().document
    hardware = hardware_from_catalogue(catalogue, "DGX-H100")
    efficiencies = replace(efficiencies_from_data(catalogue, default_policy().document, "H100-SXM5-80GB"), **changes)
    shape = ModelShape(layers=run.layers, hidden=run.hidden, heads=run.heads, ffn_hidden=4 * run.hidden, vocab=VOCAB,
                       dropout=False, tied_embeddings=False)
    layout = training_layout(run.gpus, 8, 0, tensor=run.tensor, pipeline=run.pipeline,
                             virtual_stages=run.virtual_stages, sharding="zero1", micro_batch=1,
                             global_batch=run.global_batch, recompute="none", sequence_parallel=run.tensor > 1,
                             flash_attention=True, precision="bf16-mixed", tensor_comm_overlap=run.tensor > 1)
    return step_time(shape, SEQUENCE, layout, hardware, efficiencies).step_s


def _errors(**changes: float) -> dict[str, float]:
    return {run.name: _modelled_s(run, **changes) / run.measured_step_s - 1 for run in RUNS}


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_step_time_within_10_percent_of_megatron_h100(run: MegatronRun):
    modelled = _modelled_s(run)
    print(f"{run.name}: modelled {modelled:.3f} s, published {run.measured_step_s:.3f} s "
          f"({run.tflops_per_gpu} TFLOP/s per GPU), error {modelled / run.measured_step_s - 1:+.1%}")
    assert modelled == pytest.approx(run.measured_step_s, rel=0.10)


def test_megatron_h100_mean_error_within_5_percent():
    errors = _errors()
    mean = sum(abs(e) for e in errors.values()) / len(errors)
    print("Megatron-LM H100:", ", ".join(f"{name} {error:+.1%}" for name, error in errors.items()))
    print(f"mean absolute error {mean:.1%}")
    assert mean <= 0.05


def test_catalogue_hopper_gemm_fraction_is_the_megatron_fit():
    """gemm_fraction_in_step.hopper is the value (to 0.01) that minimises the worst error over these 16 runs, the
    mean breaking ties."""
    def errors(fraction: float) -> tuple[float, float]:
        found = [abs(e) for e in _errors(gemm_fraction_in_step=fraction).values()]
        return max(found), sum(found) / len(found)

    best = min((0.55 + i / 100 for i in range(31)), key=errors)  # 0.55 … 0.85
    stored = load_catalogue().document["step_time"]["gemm_fraction_in_step"]["hopper"]
    assert stored == pytest.approx(best, abs=0.001)


def test_strong_scaling_loses_throughput_as_the_batch_spreads():
    """Same job, 96 → 4,608 GPUs: the published throughput per GPU falls 10.7 %; the model's falls too (fewer
    micro-batches per replica leave more of the pipeline bubble and of the data-parallel collectives exposed)."""
    first, last = STRONG_SCALING[0], STRONG_SCALING[-1]
    modelled_tflops = {run.gpus: run.tflops_per_gpu * run.measured_step_s / _modelled_s(run)
                       for run in (first, last)}
    assert modelled_tflops[last.gpus] < modelled_tflops[first.gpus]


def test_catalogue_hopper_residual_band_holds_every_megatron_error():
    """step_time.residual_band.hopper is these runs' lowest and highest error, rounded outward to 0.001; the step model
    gives its rate as that band: rate × (1 + low) to rate × (1 + high)."""
    errors = _errors().values()
    low, high = load_catalogue().document["step_time"]["residual_band"]["hopper"]
    assert low <= min(errors) < low + 0.001
    assert high - 0.001 < max(errors) <= high
    run = WEAK_SCALING[0]
    catalogue = load_catalogue().document
    hardware = hardware_from_catalogue(catalogue, "DGX-H100")
    efficiencies = efficiencies_from_data(catalogue, default_policy().document, "H100-SXM5-80GB")
    shape = ModelShape(layers=run.layers, hidden=run.hidden, heads=run.heads, ffn_hidden=4 * run.hidden, vocab=VOCAB,
                       dropout=False, tied_embeddings=False)
    layout = training_layout(run.gpus, 8, 0, micro_batch=1, global_batch=run.global_batch, sharding="zero1",
                             flash_attention=True)
    step = step_time(shape, SEQUENCE, layout, hardware, efficiencies)
    assert step.tokens_per_s_per_gpu_range == pytest.approx((step.tokens_per_s_per_gpu * (1 + low),
                                                             step.tokens_per_s_per_gpu * (1 + high)))
