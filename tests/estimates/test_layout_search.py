"""The layout search: what it enumerates, what it keeps, which layout it ranks first, and how fast."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from rules.catalogue import load_catalogue
from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.comm_buffers import CommunicationSettings
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.step_memory import MemorySettings, TrainingBatch, TrainingJob
from rules.estimates.model.shapes import ModelShape
from rules.estimates.search.layout_search import SearchMemory, SearchSpace, search_layouts
from rules.estimates.training_time.step_time import StepTimeModel
from rules.estimates.training_time.step_time_figures import efficiencies_from_data, hardware_from_catalogue
from rules.estimates.training_time.transformer_work import matrix_parameters
from rules.policy import default_policy

# GPT-3 XL shape (Brown et al. 2020, Table 2.1: 24 layers, d_model 2048, 16 heads; tied embeddings), sequence 2048.
GPT_1_3B = ModelShape(layers=24, hidden=2048, heads=16, ffn_hidden=8192, vocab=51200, tied_embeddings=True)
# Llama-3-70B shape (Meta's config.json: 80 layers, hidden 8192, 64 heads, 8 KV heads, ffn 28672, vocab 128256).
LLAMA_70B = ModelShape(layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, vocab=128256, mlp="swiglu",
                       norm="rmsnorm", dropout=False, tied_embeddings=False)
SEQUENCE = {GPT_1_3B: 2048, LLAMA_70B: 4096}


def _model(server: str, gpu: str, shape: ModelShape) -> StepTimeModel:
    catalogue, policy = load_catalogue().document, default_policy().document
    return StepTimeModel(shape, SEQUENCE.get(shape, 4096), hardware_from_catalogue(catalogue, server),
                         efficiencies_from_data(catalogue, policy, gpu))


def _memory(gpu: str | float, shape: ModelShape, gpus_per_node: int = 8, **settings) -> SearchMemory:
    """Returns what the peak-memory check sizes ``shape`` with under the default policy, on a catalogued ``gpu`` (or
    on a GPU of that many GiB); ``settings`` replace MemorySettings fields."""
    policy = default_policy()
    memory_gib = load_catalogue().document["gpus"][gpu]["memory_gib"] if isinstance(gpu, str) else gpu
    parameters = matrix_parameters(shape)
    job = TrainingJob(TrainedModel(parameters, parameters, "bf16-mixed", "adamw"), shape,
                      TrainingBatch(SEQUENCE.get(shape, 4096), 1, None), ActivationSaving(), 1, "none")
    chosen = MemorySettings(convention=policy.value("conventions.model_state_bytes"),
                            cuda_context_gib=policy.value("memory.cuda_context_gib"),
                            fragmentation_fraction=policy.value("memory.allocator_fragmentation_fraction"),
                            headroom_fraction=policy.value("memory.headroom_fraction"),
                            gathered_layers=policy.value("memory.gathered_layers"),
                            activation_convention=policy.value("conventions.activations"),
                            communication=CommunicationSettings(policy.value("memory.nccl_channels")))
    return SearchMemory(job, memory_gib, gpus_per_node, replace(chosen, **settings))


def test_finds_pure_data_parallel_zero1_for_a_small_model_on_one_dgx_a100():
    """Hand check, GPT-3 XL (1.3B) on one DGX A100, 32 sequences of 2048 per step, no FlashAttention.

    Every layout fits 80 GB (1.3B × 16 B of model state is 21 GB even unsharded), so the ranking is the
    step-time model's alone, and each departure from pure data parallelism only adds time:
    - tensor parallelism adds 4 all-reduces (or their reduce-scatter/all-gather halves) per layer and
      micro-batch and removes no FLOPs; pipeline parallelism adds the (p − 1)/(v·m) bubble and the sends;
    - selective recompute re-runs the attention core, full recompute the whole forward (4/3 of the GEMMs);
    - DDP runs AdamW over all 1.3B parameters on every GPU (8× the ZeRO-1 optimizer step), and the
      gradient all-reduce (2.7 GB over NVLink at 240 GB/s busbw: 20 ms) hides behind half of the last
      micro-batch (80 ms), as do ZeRO-1's reduce-scatter + all-gather of the same volume;
    - ZeRO-2 and ZeRO-3 hide their larger per-micro-batch traffic too and tie with ZeRO-1: ties go to the
      simplest layout;
    - a larger micro-batch gives every GEMM more rows, which the sweep runs faster: 4 sequences (all a rank
      has) beat 1.
    So the best is t = p = 1, d = 8, micro-batch 4, no recompute, ZeRO-1, bf16 (the A100 has no FP8). At micro-batch
    1 (searched alone below, so that every GEMM shape is a point of the sweep) its compute
    is each GEMM at its shape's rate in the OpenXLA sweep (sm_90, the profile the A100 follows), as a share of the
    sweep's best (804.7 TFLOP/s), times the A100's best matmul (MAMF 271.2) and the fitted in-step share; every
    n or k above the sweep's 4,096 takes the 4,096 entry, the head dimension 128 the 256 one, and m rows above
    4,096 the batched entries b · 4,096 (b = m / 4,096 up to 4, geometric between b = 1, 2, 4).
    """
    model = _model("DGX-A100", "A100-SXM4-80GB", GPT_1_3B)
    result = search_layouts(model, gpus=8, global_batch=32, memory=_memory("A100-SXM4-80GB", GPT_1_3B),
                            space=SearchSpace(flash_attention=False))
    best = result.best.layout
    assert (best.tensor, best.pipeline, best.virtual_stages, best.context, best.data_parallel) == (1, 1, 1, 1, 8)
    assert (best.micro_batch, best.recompute, best.sharding, best.precision) == (4, "none", "zero1", "bf16-mixed")
    assert result.fitting == result.searched
    assert all(r.step.step_s >= result.best.step.step_s for r in result.top)
    result = search_layouts(model, gpus=8, global_batch=32, memory=_memory("A100-SXM4-80GB", GPT_1_3B),
                            space=SearchSpace(flash_attention=False, micro_batch=(1,)))
    best = result.best.layout
    assert (best.tensor, best.data_parallel, best.micro_batch, best.sharding) == (1, 8, 1, "zero1")
    step_time = load_catalogue().document["step_time"]
    sweep = {tuple(row[:4]): row[4] for row in step_time["gemm_sweeps"]["sm_90"]["bf16_tflops"]}
    best_rate = 271.2e12 * step_time["gemm_fraction_in_step"]["ampere"] / max(sweep.values())

    def seconds(m: int, n: int, k: int, at: tuple[int, int, int], b: int = 1) -> float:
        return 2 * m * n * k / (best_rate * sweep[(b, *at)])

    # m = 6144 rows lie log2(1.5) of the way from b = 1 to b = 2 (the weight gradient of QKV)
    w = math.log2(1.5)
    qkv_weight = 2 * 6144 * 2048 * 2048 / (best_rate * sweep[(1, 4096, 2048, 2048)] ** (1 - w)
                                           * sweep[(2, 4096, 2048, 2048)] ** w)

    # (m, n, k) of QKV, projection, MLP up, MLP down: forward, data gradient (m, k, n), weight gradient (n, k, m)
    gemms = [(2048, 6144, 2048), (2048, 2048, 2048), (2048, 8192, 2048), (2048, 2048, 8192)]
    layer = sum(seconds(m, n, k, (m, min(n, 4096), min(k, 4096))) + seconds(m, k, n, (m, min(k, 4096), min(n, 4096)))
                for m, n, k in gemms)
    layer += qkv_weight + seconds(2048, 2048, 2048, (2048, 2048, 2048))  # QKV and projection weight gradients
    layer += seconds(8192, 2048, 2048, (4096, 2048, 2048), b=2) + seconds(2048, 8192, 2048, (2048, 4096, 2048))
    # attention core: per head (16) the scores (2048 × 2048 × 128) and context (2048 × 128 × 2048) GEMMs, 3 passes
    layer += 3 * 16 * (seconds(2048, 2048, 128, (2048, 2048, 256)) + seconds(2048, 128, 2048, (2048, 256, 2048)))
    logits = (seconds(2048, 51200, 2048, (2048, 4096, 2048)) + seconds(2048, 2048, 51200, (2048, 2048, 4096))
              + seconds(51200, 2048, 2048, (4096, 2048, 2048), b=4))
    micro_batches = 32 // 8
    assert result.best.step.breakdown.compute_s == pytest.approx(micro_batches * (24 * layer + logits))
    assert result.best.step.breakdown.dp_comm_exposed_s == 0
    assert all(r.step.step_s >= result.best.step.step_s for r in result.top)


def test_counts_a_small_space_by_hand():
    """Tensor and pipeline in (1, 2), virtual stages (1, 2, 4): (1,1) and (2,1) allow v = 1 only; (1,2) and
    (2,2) allow v = 1, 2, 4 (24 layers split into 8 chunks, m = 8 or 16 micro-batches divisible by p = 2):
    8 layouts; none of them fits a budget of zero."""
    model = _model("DGX-A100", "A100-SXM4-80GB", GPT_1_3B)
    space = SearchSpace(tensor=(1, 2), pipeline=(1, 2), context=(1,), micro_batch=(1,), recompute=("none",),
                        sharding=("zero1",))
    assert search_layouts(model, 8, 32, _memory("A100-SXM4-80GB", GPT_1_3B), space).searched == 8
    empty = search_layouts(model, 8, 32, _memory(0.0, GPT_1_3B), space)
    assert (empty.searched, empty.fitting, empty.best, empty.top) == (8, 0, None, ())


def test_memory_decides_when_the_model_does_not_fit_unsharded():
    """Llama-3-70B on 16 × DGX H100: 70.6B × 16 B of state cannot sit on 128 GPUs without tensor, pipeline
    or ZeRO sharding (DDP would need 1.1 TB per GPU), so no fitting layout is plain DDP at t = p = 1."""
    model = _model("DGX-H100", "H100-SXM5-80GB", LLAMA_70B)
    memory = _memory("H100-SXM5-80GB", LLAMA_70B)
    result = search_layouts(model, gpus=128, global_batch=256, memory=memory, top_n=50)
    assert 0 < result.fitting < result.searched
    assert all(not (r.layout.sharding == "ddp" and r.layout.tensor * r.layout.pipeline == 1) for r in result.top)
    usable = memory.gpu_memory_gib * 2**30 * (1 - memory.settings.headroom_fraction)
    assert all(r.memory_bytes <= usable for r in result.top)
    assert {r.layout.precision for r in result.top} <= {"bf16-mixed", "fp8-mixed"}


def test_fp8_only_where_the_gpu_has_it():
    a100 = search_layouts(_model("DGX-A100", "A100-SXM4-80GB", GPT_1_3B), 8, 32, _memory("A100-SXM4-80GB", GPT_1_3B),
                          top_n=500)
    h100 = search_layouts(_model("DGX-H100", "H100-SXM5-80GB", GPT_1_3B), 8, 32, _memory("H100-SXM5-80GB", GPT_1_3B))
    assert {r.layout.precision for r in a100.top} == {"bf16-mixed"}
    assert h100.best.layout.precision == "fp8-mixed"
    assert h100.searched == 2 * a100.searched


def test_tensor_parallel_stays_inside_the_nvlink_domain():
    """A DGX's NVLink domain is its 8 GPUs; an NVL72 rack's is 72, so t = 16 appears only there."""
    shape = replace(LLAMA_70B, kv_heads=None)
    space = SearchSpace(pipeline=(1,), context=(1,), micro_batch=(1,), recompute=("full",), sharding=("zero1",),
                        precisions=("bf16-mixed",))
    dgx = search_layouts(_model("DGX-B200", "B200-SXM-180GB", shape), 144, 144, _memory(math.inf, shape), space,
                         top_n=100)
    nvl = search_layouts(_model("GB200-NVL72", "B200-GB200-186GB", shape), 144, 144,
                         _memory(math.inf, shape, gpus_per_node=72), space, top_n=100)
    assert max(r.layout.tensor for r in dgx.top) == 8
    assert max(r.layout.tensor for r in nvl.top) == 16


def test_a_1024_gpu_70b_search_looks_at_over_5000_layouts_and_ranks_them():
    """The bench's case (its speed is measured by `make bench`, not asserted here)."""
    model = _model("DGX-H100", "H100-SXM5-80GB", LLAMA_70B)
    result = search_layouts(model, gpus=1024, global_batch=1024, memory=_memory("H100-SXM5-80GB", LLAMA_70B))
    assert result.searched >= 5000 and 0 < result.fitting < result.searched
    steps = [r.step.step_s for r in result.top]
    assert steps == sorted(steps) and result.best.step.step_s == steps[0]


def test_memory_follows_the_policy_activation_convention():
    """One layout (t = p = 1, micro-batch 1, no recompute, ZeRO-1) under both activation conventions: the
    model state is the same, so the bytes differ by Megatron-LM's count (compute_activation_memory_without_sp,
    t = 1) less the physical one, for GPT-3 XL at s = 2048 (GeLU, dropout, no FlashAttention)."""
    model = _model("DGX-A100", "A100-SXM4-80GB", GPT_1_3B)
    space = SearchSpace(tensor=(1,), pipeline=(1,), context=(1,), micro_batch=(1,), recompute=("none",),
                        sharding=("zero1",), flash_attention=False)
    # Without fragmentation the totals differ by the activations alone.
    physical = search_layouts(model, 8, 32, _memory("A100-SXM4-80GB", GPT_1_3B, fragmentation_fraction=0.0),
                              space).best
    megatron = search_layouts(model, 8, 32, _memory("A100-SXM4-80GB", GPT_1_3B, fragmentation_fraction=0.0,
                                                    activation_convention="megatron"), space).best

    s, h, a, f, v, layers = 2048, 2048, 16, 8192, 51200, 24
    sbh = s * h
    # Korthikanti Table 2, no parallelism: sbh(34 + 5as/h) per layer; token ids 8sb and embedding mask sbh;
    # output layer 4sbh + 4sbV (§4.3).
    physical_bytes = sbh * (34 + 5 * a * s / h) * layers + 8 * s + sbh + 4 * sbh + 4 * s * v
    # Megatron: (sbh(10 + 24) × L + 8sb + sbh + 2(sbV + sbh)) × 1.05.
    megatron_bytes = (sbh * 34 * layers + 8 * s + sbh + 2 * (s * v + sbh)) * 1.05
    assert f == 4 * h
    assert megatron.memory_bytes - physical.memory_bytes == pytest.approx(megatron_bytes - physical_bytes, rel=1e-9)
