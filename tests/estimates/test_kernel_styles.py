"""Who writes the memory-bound kernels (``workload.training.kernels``): fused, compiled or eager.

The eager counts are read off the reference implementations, operator by operator, each forward operator one kernel
that reads its inputs from HBM and writes its output, each backward formula as PyTorch's autograd runs it
(``tools/autograd/derivatives.yaml``). 16-bit tensors count 2 bytes per element, the explicit fp32 copies 4.

Hugging Face transformers ``src/transformers/models/llama/modeling_llama.py`` @ 5dd4a63548857797727ae73eeb6a6e886ea02a3e
(huggingface/transformers):

    L71  hidden_states = hidden_states.to(torch.float32)
    L72  variance = hidden_states.pow(2).mean(-1, keepdim=True)
    L73  hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
    L74  return self.weight * hidden_states.to(input_dtype)
    L146 x1 = x[..., : x.shape[-1] // 2]
    L147 x2 = x[..., x.shape[-1] // 2 :]
    L148 return torch.cat((-x2, x1), dim=-1)
    L173 q_embed = (q * cos) + (rotate_half(q) * sin)
    L174 k_embed = (k * cos) + (rotate_half(k) * sin)
    L184 self.gate_proj = nn.Linear(...)   L185 self.up_proj = nn.Linear(...)
    L190 down_proj = self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))
    L245-253 q_proj, k_proj, v_proj: three nn.Linear
    L347 hidden_states = residual + hidden_states      L353 (the same after the MLP)

karpathy/nanoGPT ``model.py`` @ 3adf61e154c3fe3fca428ad6bc3818b27a3b8291:

    L27  return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)
    L56  q, k, v  = self.c_attn(x).split(self.n_embd, dim=2)
    L64  y = torch.nn.functional.scaled_dot_product_attention(q, k, v, ..., dropout_p=..., is_causal=True)
    L75  y = self.resid_dropout(self.c_proj(y))
    L89  x = self.gelu(x)            L91  x = self.dropout(x)
    L104 x = x + self.attn(self.ln_1(x))     L105 x = x + self.mlp(self.ln_2(x))

transformers ``src/transformers/loss/loss_utils.py`` @ 0114da07ec0e101b420a923dedeb6032b6ac3a44:

    L55  logits = logits.float()
    L36  loss = nn.functional.cross_entropy(source, target, ignore_index=ignore_index, reduction=reduction)
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from rules.catalogue import load_catalogue
from rules.errors import InconsistentInput
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.memory_bound import Regions, memory_bound_work
from rules.estimates.training_time.step_time import StepTimeModel
from rules.estimates.training_time.step_time_figures import efficiencies_from_data, hardware_from_catalogue
from rules.estimates.training_time.transformer_work import LayerSlice, layer_work, output_layer_work
from rules.policy import default_policy

# Meta-Llama-3-8B config.json: 32 layers, hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocab 128256.
LLAMA_3_8B = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256, mlp="swiglu",
                        norm="rmsnorm", dropout=False, tied_embeddings=False)
# GPT-2 style (nanoGPT): LayerNorm, GELU, dropout; GPT-3 XL's size (Brown et al. 2020, Table 2.1).
GPT_1_3B = ModelShape(layers=24, hidden=2048, heads=16, ffn_hidden=8192, vocab=50304, tied_embeddings=True)
TRIAD_BYTES_S = 2.97e12  # H100 SXM STREAM triad (Azure ND H100 v5; catalogue hbm_triad_tbs)
LAUNCH_S = 2.7e-6  # one asynchronous kernel launch (reframe kernel_latency, A100; catalogue kernel_launch_us)


def _per_element(shape: ModelShape, kernels: str, region: str, flash: bool = True, recompute: str = "none") -> float:
    """Returns one layer's bytes per element of ``region`` alone (every other region empty)."""
    regions = Regions(**{name: 1.0 if name == region else 0.0 for name in Regions._fields})
    return memory_bound_work(shape, kernels, regions, recompute, flash).bytes


def _kernels(shape: ModelShape, kernels: str, flash: bool = True, recompute: str = "none") -> int:
    empty = Regions(*(0.0,) * len(Regions._fields))
    return memory_bound_work(shape, kernels, empty, recompute, flash).kernels


def test_eager_llama_layer_counts_follow_modeling_llama_and_autograd():
    """Per element of the residual stream (h): two LlamaRMSNorm (L71-74) and two residual adds (L347, L353).

    RMSNorm forward, 8 kernels: to(float32) 2 + 4, pow(2) 4 + 4, mean 4, + eps and rsqrt (row-sized), the rsqrt mul
    4 + 4, to(input_dtype) 4 + 2, weight mul 2 + 2 = 36 B. Backward (derivatives.yaml mul.Tensor, _to_copy, rsqrt,
    mean.dim, pow.Tensor_Scalar), 16 kernels: weight mul 6 + 2 + 4, to 6, rsqrt mul 8 + 12 + 4, rsqrt 3 row-sized
    kernels, mean 4, pow 8 + 8 + 12, the two gradients of the fp32 copy summed 12, to 6 = 92 B.
    Residual add 2 + 2 + 2 = 6 B; backward, the residual stream's two gradients summed, 6 B.
    """
    assert _per_element(LLAMA_3_8B, "eager", "hidden") == 2 * (36 + 92) + 2 * (6 + 6)  # 280 B
    # q_proj, k_proj, v_proj and gate_proj, up_proj read the same input: 2 + 1 extra data gradients, each summed
    # in by one add (2 + 2 + 2 B) over the GEMM input
    assert _per_element(LLAMA_3_8B, "eager", "gathered") == 3 * 6
    # rotate_half + apply_rotary_pos_emb per element of q and of k: q * cos 4, -x2 2 (half the elements), cat 4,
    # * sin 4, + 6 = 20 B; backward grad * sin 4, grad * cos 4, neg 2, two slice_backward (zeros 2, copy 2) 8,
    # the three gradients of x summed by two adds 12 = 30 B
    assert _per_element(LLAMA_3_8B, "eager", "rotary") == 20 + 30
    # SwiGLU (L190): silu 4 + mul 6 = 10 B; backward the mul's two gradients 6 + 6, silu_backward 6 = 18 B
    assert _per_element(LLAMA_3_8B, "eager", "mlp") == 10 + 18
    # kernels, forward: 7 GEMMs (q, k, v, o, gate, up, down), 2 × 8 RMSNorm, 2 × 5 rotary, 2 SwiGLU, 2 residual adds,
    # FlashAttention; backward: 14 GEMMs, 2 × 16, 2 × 9, 3, 2 residual sums, 3 gradient sums, FlashAttention
    forward, backward = 7 + 16 + 10 + 2 + 2 + 1, 14 + 32 + 18 + 3 + 2 + 3 + 1
    assert _kernels(LLAMA_3_8B, "eager") == forward + backward == 111
    assert _kernels(LLAMA_3_8B, "eager", recompute="full") == 111 + forward  # the forward runs again


def test_fused_layer_is_megatron_transformer_engine_as_before():
    """Two layernorms (2 + 2 B), two bias-dropout-adds (2 + 2 + 2 B), SwiGLU (2 + 2 + 2 B), backward twice each:
    9 kernels forward (4 GEMMs, 5 fused), 13 backward (8 GEMMs, 5), FlashAttention one each way."""
    assert _per_element(LLAMA_3_8B, "fused", "hidden") == 2 * (4 + 8) + 2 * (6 + 12)
    assert _per_element(LLAMA_3_8B, "fused", "mlp") == 6 + 12
    assert _per_element(LLAMA_3_8B, "fused", "rotary") == 0 == _per_element(LLAMA_3_8B, "fused", "gathered")
    assert _kernels(LLAMA_3_8B, "fused") == 9 + 1 + 13 + 1


def test_compiled_fuses_each_chain_between_gemms():
    """Inductor: residual add + the next norm one kernel (read residual and branch, write residual and normed: 8 B,
    backward 16); rotary one kernel (4 B, backward 8); SwiGLU one (6, 12); the chain after the separate projections'
    data-gradient GEMMs reads each of them (2 B per extra one). Kernels: 7 GEMMs + 2 + 1 + 1 + attention forward,
    14 + 2 + 1 + 1 + attention backward."""
    assert _per_element(LLAMA_3_8B, "compiled", "hidden") == 2 * (8 + 16)
    assert _per_element(LLAMA_3_8B, "compiled", "rotary") == 4 + 8
    assert _per_element(LLAMA_3_8B, "compiled", "mlp") == 6 + 12
    assert _per_element(LLAMA_3_8B, "compiled", "gathered") == 3 * 2
    assert _kernels(LLAMA_3_8B, "compiled") == (7 + 2 + 1 + 1 + 1) + (14 + 2 + 1 + 1 + 1)


def test_eager_gpt_layer_counts_follow_nanogpt():
    """F.layer_norm (L27) one kernel 2 + 2 B, backward one for the input (2 + 2 + 2) and one for weight and bias
    (2 + 2): 10 B; residual adds (L104-105) 6 B and 6 back; dropout (L75, L91) 2 + 2 + a 1-byte mask, backward
    2 + 1 + 2; GELU (L89) 4 B, gelu_backward 6 B; c_attn is one GEMM (L56), dropout inside SDPA (L64)."""
    assert _per_element(GPT_1_3B, "eager", "hidden") == 2 * (4 + 10) + 2 * (6 + 6) + 2 * (5 + 5)
    assert _per_element(GPT_1_3B, "eager", "mlp") == 4 + 6
    assert _per_element(GPT_1_3B, "eager", "rotary") == 0 == _per_element(GPT_1_3B, "eager", "gathered")
    assert _kernels(GPT_1_3B, "eager") == (4 + 2 + 2 + 2 + 1 + 1) + (8 + 4 + 2 + 2 + 1 + 1)


def test_eager_attention_without_flash_follows_the_manual_attention():
    """nanoGPT L67-72 per score: * scale 4 (back 4), masked_fill 4 (back 4), softmax 4 (back: grad, output, write 6),
    attn_dropout 5 (5); the output's transpose(1, 2).contiguous() 4 B per query element. Selective recompute runs
    these again (forward only)."""
    assert _per_element(GPT_1_3B, "eager", "scores", flash=False) == 8 + 8 + 10 + 10
    assert _per_element(GPT_1_3B, "eager", "query", flash=False) == 4
    assert _per_element(GPT_1_3B, "eager", "scores", flash=False, recompute="selective") == 36 + (4 + 4 + 4 + 5)
    # modeling_llama.py eager_attention_forward L216-227 for Llama-3-8B's 4 query heads per KV head: repeat_kv writes
    # k and v at the query width (2 B each, back 2) from the key/value width (2, back 2); scale 4 (4), mask add 4,
    # fp32 softmax 2 + 4 (back 4 + 4 + 2), to(bf16) 4 + 2 (back 2 + 4), the output copy 4
    assert _per_element(LLAMA_3_8B, "eager", "scores", flash=False) == 8 + 4 + 16 + 12
    assert _per_element(LLAMA_3_8B, "eager", "query", flash=False) == 2 * (2 + 2) + 4
    assert _per_element(LLAMA_3_8B, "eager", "key_value", flash=False) == 2 * (2 + 2)


def test_loss_bytes_per_logit_by_kernels():
    """fused: Megatron's fp32 cross entropy, 3 passes forward and 2 backward of 4 B; eager: L55 float() 2 + 4,
    log_softmax 4 + 4, nll_loss_backward's zeros 4, log_softmax backward 4 + 4 + 4, the cast back 4 + 2; compiled:
    the 16-bit logits read twice forward, once backward with their gradient written."""
    part = LayerSlice(8192, 1)
    logits = 8192 * 128256
    for kernels, per_logit in (("fused", 20), ("eager", 6 + 8 + 4 + 12 + 6), ("compiled", 4 + 4)):
        work = output_layer_work(LLAMA_3_8B, replace(part, kernels=kernels))
        assert work.memory_bytes == logits * per_logit


def _model() -> StepTimeModel:
    catalogue = load_catalogue().document
    return StepTimeModel(LLAMA_3_8B, 8192, hardware_from_catalogue(catalogue, "DGX-H100"),
                         efficiencies_from_data(catalogue, default_policy().document, "H100-SXM5-80GB"))


def test_eager_llama_3_8b_on_h100_is_slower_than_fused_by_its_extra_bytes_and_launches():
    """Llama-3-8B, sequence 8192, micro-batch 1, tensor 1 on an H100 (triad 2.97 TB/s, 2.7 µs a launch).

    Regions: h = 8192 × 4096 = 33,554,432 elements (the residual stream and the GEMM input), q + k = 8192 × (4096 +
    1024) = 41,943,040, the MLP 8192 × 14336 = 117,440,512, the logits 8192 × 128,256 = 1,050,673,152.
    Eager layer: 280 × 33,554,432 + 18 × 33,554,432 + 50 × 41,943,040 + 28 × 117,440,512 = 15,384,707,072 B;
    fused: 60 × 33,554,432 + 18 × 117,440,512 = 4,127,195,136 B; 111 − 24 = 87 more kernels. The loss moves
    (36 − 20) × 1,050,673,152 = 16,810,770,432 B more. Per micro-batch of 32 layers and the loss:
    32 × (11,257,511,936 / 2.97e12 + 87 × 2.7e-6) + 16,810,770,432 / 2.97e12 = 0.1345 s more, the same GEMMs.
    """
    model = _model()
    fused = model.stage(LayerSlice(8192, 1, flash_attention=True), "none", "bf16-mixed", 1, 1)
    eager = model.stage(LayerSlice(8192, 1, flash_attention=True, kernels="eager"), "none", "bf16-mixed", 1, 1)
    extra_s = 32 * (11_257_511_936 / TRIAD_BYTES_S + 87 * LAUNCH_S) + 16_810_770_432 / TRIAD_BYTES_S
    assert extra_s == pytest.approx(0.1345, abs=5e-5)
    assert eager.compute_s == fused.compute_s
    assert eager.total_s == pytest.approx(fused.total_s + extra_s, rel=1e-12)
    work = {k: layer_work(LLAMA_3_8B, LayerSlice(8192, 1, flash_attention=True, kernels=k), "none")
            for k in ("fused", "eager")}
    assert work["eager"].memory_bytes == 15_384_707_072 and work["fused"].memory_bytes == 4_127_195_136
    ratio = eager.total_s / fused.total_s
    print(f"eager ÷ fused per micro-batch: {eager.total_s:.4f} s ÷ {fused.total_s:.4f} s = {ratio:.3f}")
    assert ratio == pytest.approx(1 + extra_s / fused.total_s, rel=1e-12)

    # On 8 DGX H100 (64 GPUs) with ZeRO-1 and 512 sequences a step, the 8 micro-batches each pay it; nothing else moves
    layout = training_layout(64, 8, 0, sharding="zero1", micro_batch=1, global_batch=512, flash_attention=True)
    fused_step, eager_step = model.evaluate(layout), model.evaluate(replace(layout, kernels="eager"))
    assert fused_step.breakdown.dp_comm_exposed_s == 0 == eager_step.breakdown.dp_comm_exposed_s
    assert eager_step.step_s == pytest.approx(fused_step.step_s + 8 * extra_s, rel=1e-12)
    assert eager_step.kernels == "eager" and fused_step.kernels == "fused"


def test_compiled_llama_3_8b_differs_from_fused_by_its_chains():
    """Compiled against fused, the same Llama-3-8B layer: the residual stream (48 − 60) × 33,554,432 = −402,653,184 B,
    the GEMM inputs' extra data gradients 6 × 33,554,432 = +201,326,592 B, rotary 12 × 41,943,040 = +503,316,480 B:
    +301,989,888 B and 31 − 24 = 7 more kernels a layer; the loss (8 − 20) × 1,050,673,152 = −12,608,077,824 B."""
    model = _model()
    fused = model.stage(LayerSlice(8192, 1, flash_attention=True), "none", "bf16-mixed", 1, 1)
    compiled = model.stage(LayerSlice(8192, 1, flash_attention=True, kernels="compiled"), "none", "bf16-mixed", 1, 1)
    extra_s = 32 * (301_989_888 / TRIAD_BYTES_S + 7 * LAUNCH_S) - 12_608_077_824 / TRIAD_BYTES_S
    assert compiled.total_s == pytest.approx(fused.total_s + extra_s, rel=1e-12)


def test_unknown_kernels_are_refused():
    layout = training_layout(8, 8, 0, micro_batch=1, global_batch=8, kernels="jit")
    with pytest.raises(InconsistentInput, match="kernels"):
        _model().evaluate(layout)
