"""The training job's throughput: the stated tokens/s per GPU, else what the stated MFU gives on the quoted GPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.layout import layout
from rules.checks.facts.model import PARAMETERS
from rules.checks.facts.pointers import ARCHITECTURE, THROUGHPUT, TRAINING
from rules.estimates import compute, data_feed


@dataclass(frozen=True)
class Throughput:
    """Training tokens/s of the job, and where the figure came from."""

    tokens_per_s_per_gpu: float
    cluster_tokens_per_s: float
    source: str  # "tokens_per_s_per_gpu" (measured or assumed) or "mfu"
    mfu: float | None = None
    model_flops_per_token: float | None = None
    peak_tflops: float | None = None

    def evidence(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                               "cluster_tokens_per_s": self.cluster_tokens_per_s, "throughput_from": self.source}
        if self.mfu is not None:
            out.update(mfu=self.mfu, model_flops_per_token=self.model_flops_per_token,
                       peak_bf16_tflops=self.peak_tflops)
        return out


def throughput_facts(ctx: Context) -> Throughput | None:
    """Returns the job's tokens/s: the stated tokens/s per GPU, else MFU × peak bf16 FLOP/s ÷ FLOPs per token."""
    return ctx.memo("throughput", _throughput)


def _throughput(ctx: Context) -> Throughput | None:
    plan = layout(ctx)
    if plan is None:
        return None
    per_gpu = ctx.num(f"{THROUGHPUT}/tokens_per_s_per_gpu")
    if per_gpu is not None:
        return Throughput(per_gpu, data_feed.cluster_tokens_per_s(per_gpu, plan.gpus), "tokens_per_s_per_gpu")
    mfu = ctx.num(f"{THROUGHPUT}/mfu")
    if mfu is None:
        # Either member will do (tokens_per_s_per_gpu or mfu): name the object the submission must fill.
        if THROUGHPUT not in ctx.missing:
            ctx.missing.append(THROUGHPUT)
        return None
    parameters = ctx.need(PARAMETERS)
    peak_tflops = ctx.need(f"{plan.group}/gpu/bf16_tflops")
    if parameters is None or peak_tflops is None:
        return None
    # MFU counts model FLOPs; the attention term joins when the shape is known (PaLM App. B).
    span = attention_span(ctx)
    rate = compute.throughput_from_mfu(mfu, peak_tflops, parameters, *span)
    return Throughput(rate.tokens_per_s_per_gpu, data_feed.cluster_tokens_per_s(rate.tokens_per_s_per_gpu, plan.gpus),
                      "mfu", mfu, rate.model_flops_per_token, peak_tflops)


def attention_span(ctx: Context) -> tuple[int, int, int] | tuple[None, None, None]:
    """Returns (layers, sequence length, hidden) for the attention FLOPs, or three Nones when one is missing."""
    layers, hidden = ctx.num(f"{ARCHITECTURE}/layers"), ctx.num(f"{ARCHITECTURE}/hidden")
    sequence_length = ctx.num(f"{TRAINING}/sequence_length")
    if layers and hidden and sequence_length:
        return int(layers), int(sequence_length), int(hidden)
    return None, None, None
