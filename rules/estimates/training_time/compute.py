"""Training compute: FLOPs, time to train, MFU and the GPU count a schedule needs.

Conventions (all selectable through parameters, none read from configuration):

* FLOPs are counted as in Kaplan et al. 2020 and EleutherAI's "Transformer Math 101": a forward pass
  costs 2 FLOPs per parameter per token, the backward pass twice that, so training costs 6·N·D.
* ``parameters`` (N) is the parameter count whose matrix multiplies run once per token, embeddings
  and output layer included (Narayanan et al. 2021 eq. 3 counts the logit layer as 6·h·V per token,
  which is 6·N for the output-embedding parameters).
* The optional attention term is the part that grows with sequence length and is not in N: the
  ``Q·Kᵀ`` logits and the attention-weighted sum of ``V``, 4·s·h FLOPs per token per layer forward
  (Chinchilla, Hoffmann et al. 2022, Appendix F; Narayanan et al. 2021 eq. 3; PaLM, Chowdhery et al.
  2022, Appendix B: 6·N + 12·L·H·Q·T per token). It counts the full s×s score matrix, as those
  sources do, not the causal half that FlashAttention-style kernels actually compute.
* "Hardware" FLOPs include recomputation; "model" FLOPs (``recompute="none"``) are what MFU is
  measured against (PaLM, Appendix B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rules.estimates._args import require_choice, require_fraction, require_positive, require_positive_int
from rules.units import TFLOPS

RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")
SECONDS_PER_DAY = 86_400.0

# Forward-pass equivalents per token for the parameter (dense) FLOPs: forward 1 + backward 2,
# plus one more forward when every layer is recomputed.
_DENSE_PASSES = {"none": 3, "selective": 3, "full": 4}
# Selective recomputation (Korthikanti et al. 2022, arXiv 2205.05198, "selective activation
# recomputation") recomputes only the attention core (logits, softmax, dropout, weighted sum), so only
# the attention term gets the extra forward pass.
_ATTENTION_PASSES = {"none": 3, "selective": 4, "full": 4}
# Forward attention FLOPs per token per layer, in units of s·h: 2·s·h for Q·Kᵀ + 2·s·h for scores·V.
_ATTENTION_FORWARD_FLOPS_PER_SH = 4


def attention_flops_per_token(
    layers: int, sequence_length: int, hidden: int, recompute: str = "none"
) -> float:
    """Return the sequence-length-dependent attention FLOPs per token for one training step.

    Source: Narayanan et al. 2021 (arXiv 2104.04473) eq. 3, whose 96·B·s·l·h²·s/(6h) = 16·B·s²·l·h term
    is 4·l·s·h per token per forward pass over four passes (full recompute); Chinchilla (Hoffmann et al.
    2022, arXiv 2203.15556) Appendix F (logits 2·s·h, reduction 2·s·h per layer forward, backward 2×
    forward); PaLM (arXiv 2204.02311) Appendix B: 12·L·H·Q·T per token for forward + backward.
    So 12·L·s·h without recompute, 16·L·s·h with selective or full recompute (one more forward of the
    attention core). ``hidden`` is heads × head dimension.
    """
    require_positive_int("layers", layers)
    require_positive_int("sequence_length", sequence_length)
    require_positive_int("hidden", hidden)
    require_choice("recompute", recompute, RECOMPUTE_MODES)
    passes = _ATTENTION_PASSES[recompute]
    return float(passes * _ATTENTION_FORWARD_FLOPS_PER_SH * layers * sequence_length * hidden)


def training_flops_per_token(
    parameters: float,
    recompute: str = "none",
    layers: int | None = None,
    sequence_length: int | None = None,
    hidden: int | None = None,
) -> float:
    """Return the training FLOPs per token: 6·N (8·N with full recompute) plus the attention term.

    Source: EleutherAI "Transformer Math 101" (forward 2·N·D, backward 4·N·D; full activation
    recomputation adds a forward: 8·N·D); Kaplan et al. 2020 (arXiv 2001.08361) §2.1 C ≈ 6·N·D;
    Narayanan et al. 2021 (arXiv 2104.04473) eq. 3 for the recompute factor 4/3. The attention term
    (see :func:`attention_flops_per_token`) is added only when ``layers``, ``sequence_length`` and
    ``hidden`` are all given.
    """
    require_positive("parameters", parameters)
    require_choice("recompute", recompute, RECOMPUTE_MODES)
    shape = (layers, sequence_length, hidden)
    if any(v is not None for v in shape) and any(v is None for v in shape):
        raise ValueError("layers, sequence_length and hidden must be given together (or none of them)")
    flops = 2.0 * _DENSE_PASSES[recompute] * parameters
    if layers is not None and sequence_length is not None and hidden is not None:
        flops += attention_flops_per_token(layers, sequence_length, hidden, recompute)
    return flops


def rate_under_recompute(rate: float, parameters: float, measured_with: str, planned: str,
                         layers: int | None = None, sequence_length: int | None = None,
                         hidden: int | None = None) -> float:
    """Return a training rate in tokens (tokens/s per GPU, or an MFU, which counts model FLOPs per token) measured with
    ``measured_with`` recompute, as it becomes with ``planned``: the GPUs keep their hardware FLOP rate and each token
    costs :func:`training_flops_per_token` of ``planned`` instead, so the rate scales by the ratio of the two (4/3 more
    work per token from none to full recompute without the attention term).

    Source: Narayanan et al. 2021 (arXiv 2104.04473) eq. 3, the recomputed forward pass in the FLOPs per iteration;
    Korthikanti et al. 2022 (arXiv 2205.05198) Appendix A and Table 5, where the hardware FLOPs utilisation is what
    stays with the kernels and the model FLOPs utilisation falls by the recomputed share.
    """
    require_positive("rate", rate)
    shape = (layers, sequence_length, hidden)
    return (rate * training_flops_per_token(parameters, measured_with, *shape)
            / training_flops_per_token(parameters, planned, *shape))


def training_flops(
    parameters: float,
    tokens: float,
    recompute: str = "none",
    layers: int | None = None,
    sequence_length: int | None = None,
    hidden: int | None = None,
) -> float:
    """Return the total training FLOPs: 6·N·D, 8·N·D with full recompute, plus the attention term.

    Source: EleutherAI "Transformer Math 101"; Kaplan et al. 2020 (arXiv 2001.08361) §2.1;
    Narayanan et al. 2021 (arXiv 2104.04473) eq. 3 (8·T·P with full recompute). ``recompute`` is
    ``"none"``, ``"selective"`` or ``"full"``; the per-token count is
    :func:`training_flops_per_token`.
    """
    require_positive("tokens", tokens)
    return tokens * training_flops_per_token(parameters, recompute, layers, sequence_length, hidden)


def training_time_s(total_flops: float, gpus: int, achieved_flops_per_gpu: float) -> float:
    """Return the failure-free training time in seconds: total FLOPs / (GPUs × achieved FLOP/s per GPU).

    Source: Narayanan et al. 2021 (arXiv 2104.04473) §5.1, end-to-end time ≈ 8·T·P / (n·X), where X is
    the achieved (measured or assumed, not peak) throughput per GPU at this GPU count.
    """
    require_positive("total_flops", total_flops)
    require_positive_int("gpus", gpus)
    require_positive("achieved_flops_per_gpu", achieved_flops_per_gpu)
    return total_flops / (gpus * achieved_flops_per_gpu)


def training_days(total_flops: float, gpus: int, achieved_flops_per_gpu: float) -> float:
    """Return the failure-free training time in days (86,400 s): total FLOPs / (n·X).

    Source: Narayanan et al. 2021 (arXiv 2104.04473) §5.1: GPT-3 175B on 300B tokens, 1024 A100 at
    140 TFLOP/s → about 34 days; 1T parameters on 450B tokens, 3072 A100 at 163 TFLOP/s → about 84 days.
    """
    return training_time_s(total_flops, gpus, achieved_flops_per_gpu) / SECONDS_PER_DAY


def tokens_time_s(tokens: float, tokens_per_s_per_gpu: float, gpus: int, scaling_efficiency: float = 1.0) -> float:
    """Return the seconds ``gpus`` GPUs need for ``tokens``: tokens / (tokens/s per GPU × GPUs × efficiency).

    Source: step 3 of the capacity-planning guide
    ("GPU Capacity Planning for AI Training & Serving"): training time = tokens /
    (tokens/s per GPU × GPUs); ``scaling_efficiency`` (0, 1] discounts a per-GPU rate that excludes the
    communication of a larger job (see ``rules.estimates.training_time.scaling.scaling_efficiency``); it exceeds 1
    when a rate
    measured on more GPUs is carried to fewer (``rules.estimates.training_time.scaling.extrapolated_efficiency``).
    Used for
    one optimizer step (its tokens) as well as for a whole run (dataset tokens × epochs).
    """
    require_positive("tokens", tokens)
    require_positive("tokens_per_s_per_gpu", tokens_per_s_per_gpu)
    require_positive_int("gpus", gpus)
    require_positive("scaling_efficiency", scaling_efficiency)
    return tokens / (tokens_per_s_per_gpu * gpus * scaling_efficiency)


def tokens_per_s_from_mfu(
    mfu: float, peak_flops_per_gpu: float, flops_per_token: float, gpus: int = 1
) -> float:
    """Return the training tokens/s that ``gpus`` GPUs reach at model-FLOPs utilisation ``mfu``.

    Source: PaLM (Chowdhery et al. 2022, arXiv 2204.02311) Appendix B: MFU = observed tokens/s ×
    model FLOPs per token / peak FLOP/s. Pass model FLOPs (``training_flops_per_token`` with
    ``recompute="none"``); hardware FLOPs (with recompute) would make this hardware-FLOPs utilisation.
    """
    require_fraction("mfu", mfu)
    require_positive("peak_flops_per_gpu", peak_flops_per_gpu)
    require_positive("flops_per_token", flops_per_token)
    require_positive_int("gpus", gpus)
    return mfu * peak_flops_per_gpu * gpus / flops_per_token


@dataclass(frozen=True)
class MfuThroughput:
    """The training rate a model-FLOPs utilisation gives one GPU, and the model FLOPs per token behind it."""

    tokens_per_s_per_gpu: float
    model_flops_per_token: float


def throughput_from_mfu(mfu: float, peak_tflops: float, parameters: float, layers: int | None = None,
                        sequence_length: int | None = None, hidden: int | None = None) -> MfuThroughput:
    """Returns the tokens/s per GPU at model-FLOPs utilisation ``mfu`` of a ``peak_tflops`` GPU.

    Source: PaLM (Chowdhery et al. 2022, arXiv 2204.02311) Appendix B: MFU counts model FLOPs, 6·N per token
    without recompute, plus the attention term 12·L·s·h when the shape is known
    (:func:`training_flops_per_token`); tokens/s = MFU × peak FLOP/s ÷ model FLOPs per token
    (:func:`tokens_per_s_from_mfu`).
    """
    require_positive("peak_tflops", peak_tflops)
    flops = training_flops_per_token(parameters, "none", layers, sequence_length, hidden)
    return MfuThroughput(tokens_per_s_from_mfu(mfu, peak_tflops * TFLOPS, flops), flops)


def run_flops(parameters: float, tokens: float, recompute: str, layers: int | None = None,
              sequence_length: int | None = None, hidden: int | None = None) -> tuple[float, float]:
    """Returns a run's model FLOPs (recompute not counted, as MFU counts them) and hardware FLOPs (with it).

    Source: PaLM (arXiv 2204.02311) Appendix B distinguishes the two; both from :func:`training_flops`.
    """
    return (training_flops(parameters, tokens, "none", layers, sequence_length, hidden),
            training_flops(parameters, tokens, recompute, layers, sequence_length, hidden))


def mfu_from_tokens_per_s(
    tokens_per_s: float, peak_flops_per_gpu: float, flops_per_token: float, gpus: int = 1
) -> float:
    """Return the model-FLOPs utilisation of ``tokens_per_s`` measured over ``gpus`` GPUs.

    Source: PaLM (Chowdhery et al. 2022, arXiv 2204.02311) Appendix B. A result above 1 means the
    inputs are inconsistent (wrong peak, FLOPs per token or GPU count); it is returned, not clipped,
    so that a check can report it.
    """
    require_positive("tokens_per_s", tokens_per_s)
    require_positive("peak_flops_per_gpu", peak_flops_per_gpu)
    require_positive("flops_per_token", flops_per_token)
    require_positive_int("gpus", gpus)
    return tokens_per_s * flops_per_token / (peak_flops_per_gpu * gpus)


def _ceil_count(value: float) -> int:
    # Absorb floating-point noise so that an exact fit (e.g. 7.999999999) does not round up to 9.
    return max(1, math.ceil(round(value, 9)))


def throughput_min_gpus(
    window_s: float,
    *,
    total_flops: float | None = None,
    achieved_flops_per_gpu: float | None = None,
    tokens: float | None = None,
    tokens_per_s_per_gpu: float | None = None,
    scaling_efficiency: float = 1.0,
    goodput: float = 1.0,
) -> int:
    """Return the fewest GPUs that finish the work inside ``window_s``: ⌈work / (window·rate·eff·goodput)⌉.

    Give the work either as ``total_flops`` with ``achieved_flops_per_gpu`` (FLOP/s) or as ``tokens``
    with ``tokens_per_s_per_gpu``, not both. ``scaling_efficiency`` (0, 1] discounts a per-GPU rate
    measured at a smaller scale (use 1 when the rate was measured at the target scale; above 1 carries a rate
    measured on more GPUs to fewer, ``rules.estimates.training_time.scaling.extrapolated_efficiency``);
    ``goodput`` (0, 1] is the fraction of wall time doing useful work after checkpoints, failures and
    restarts (see ``rules.estimates.reliability.failures.job_goodput``).
    Source: step 3 of the capacity-planning guide
    ("GPU Capacity Planning for AI Training & Serving"): training time =
    tokens / (tokens/s per GPU × GPUs); Narayanan et al. 2021 (arXiv 2104.04473) §5.1 for the FLOPs form.
    """
    require_positive("window_s", window_s)
    require_positive("scaling_efficiency", scaling_efficiency)
    require_fraction("goodput", goodput)
    flops_form = total_flops is not None or achieved_flops_per_gpu is not None
    tokens_form = tokens is not None or tokens_per_s_per_gpu is not None
    if flops_form == tokens_form:
        raise ValueError(
            "give either total_flops with achieved_flops_per_gpu, or tokens with tokens_per_s_per_gpu"
        )
    if flops_form:
        if total_flops is None or achieved_flops_per_gpu is None:
            raise ValueError("total_flops and achieved_flops_per_gpu must be given together")
        require_positive("total_flops", total_flops)
        require_positive("achieved_flops_per_gpu", achieved_flops_per_gpu)
        work, rate = total_flops, achieved_flops_per_gpu
    else:
        if tokens is None or tokens_per_s_per_gpu is None:
            raise ValueError("tokens and tokens_per_s_per_gpu must be given together")
        require_positive("tokens", tokens)
        require_positive("tokens_per_s_per_gpu", tokens_per_s_per_gpu)
        work, rate = tokens, tokens_per_s_per_gpu
    return _ceil_count(work / (window_s * rate * scaling_efficiency * goodput))


def gpus_needed(memory_min_gpus: int, throughput_min_gpus: int, multiple_of: int = 1) -> int:
    """Return the GPU count a training job needs: max(memory need, throughput need), rounded up.

    Source: step 3 of the capacity-planning guide
    ("GPU Capacity Planning for AI Training & Serving"): "The number of GPUs
    needed for training = max(memory requirement per GPU, throughput target)". ``multiple_of`` rounds
    the result up to a whole number of nodes or of model-parallel groups (tensor × pipeline).
    """
    require_positive_int("memory_min_gpus", memory_min_gpus)
    require_positive_int("throughput_min_gpus", throughput_min_gpus)
    require_positive_int("multiple_of", multiple_of)
    need = max(memory_min_gpus, throughput_min_gpus)
    return -(-need // multiple_of) * multiple_of


def hardware_tflops_per_gpu(tokens_per_s_per_gpu: float, hardware_flops_per_token: float) -> float:
    """Return the hardware TFLOP/s per GPU a training rate implies: tokens/s × hardware FLOPs per token ÷ 10^12.

    Source: Narayanan et al. 2021 (arXiv 2104.04473) §5.1 and eq. 3 report "achieved teraFLOP/s per GPU"
    counting the recomputed forward (8·N·D per token with full recompute plus attention), as Megatron-LM
    logs it; PaLM (arXiv 2204.02311) App. B calls the same count hardware FLOPs. A figure above the GPU's
    dense peak for the precision is a rate the hardware cannot reach.
    """
    require_positive("tokens_per_s_per_gpu", tokens_per_s_per_gpu)
    require_positive("hardware_flops_per_token", hardware_flops_per_token)
    return tokens_per_s_per_gpu * hardware_flops_per_token / TFLOPS


def tokens_per_s_from_hardware_tflops(hardware_tflops: float, hardware_flops_per_token: float) -> float:
    """Return tokens/s per GPU from a reported hardware TFLOP/s per GPU (recompute counted, as Megatron-LM logs it).

    Source: Narayanan et al. 2021 (arXiv 2104.04473) eq. 3 inverted: tokens/s = achieved FLOP/s ÷ FLOPs per
    token, with the FLOPs per token of :func:`training_flops_per_token` for the run's recompute mode.
    """
    require_positive("hardware_tflops", hardware_tflops)
    require_positive("hardware_flops_per_token", hardware_flops_per_token)
    return hardware_tflops * TFLOPS / hardware_flops_per_token


def adapter_fraction(parameters: float, trainable_parameters: float) -> float | None:
    """Returns trainable ÷ all parameters of an adapter fine-tune, whose base weights are frozen (LoRA, Hu et al. 2021,
    arXiv 2106.09685 §4.1), for the step-time model (``StepTimeModel(adapter_fraction=…)``); None when every
    parameter trains (a submission's trainable_parameters defaults to all of them)."""
    require_positive("parameters", parameters)
    require_positive("trainable_parameters", trainable_parameters)
    return trainable_parameters / parameters if trainable_parameters < parameters else None
