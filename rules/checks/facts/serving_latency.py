"""Facts about measured serving latency: the points of ``measurements.serving_latency`` against their floors and SLOs.

Reads the measured points of the job (p95 TTFT and TPOT of the served model on the quoted GPUs at a
concurrency, as ``vllm bench serve`` or TensorRT-LLM's benchmarks report them), applies the documented defaults
that lie in the workload (its prompt length and tensor parallelism; the point's prompt as the context each
sequence holds while it decodes is declared in rules/job/spec.py), and calls
rules/estimates/serving/inference_measured.py for the floors and the capacity they give. Nothing is computed or
decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rules.checks.base import Context
from rules.checks.facts.serving import ServingMemory
from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving import inference, inference_latency, inference_measured, inference_memory
from rules.estimates.serving.inference import ModelledLatency, Requests, Slo, Traffic
from rules.estimates.serving.inference_latency import Roofline, ServedModel
from rules.estimates.serving.inference_measured import FloorComparison, MeasuredCapacity, MeasuredPoint
from rules.job.measured import ServingLatencyRun
from rules.units import bytes_to_gb, s_to_ms

# Where the plan's latencies came from (evidence ``latency_from``).
MEASURED, MODELLED = "measured", "modelled"


@dataclass(frozen=True)
class MeasuredServing:
    """The measured points, each against its floors, and the capacity those measuring the planned replica give."""

    comparisons: tuple[FloorComparison, ...]  # every measured point, in submission order
    furthest: FloorComparison  # the point whose TTFT or TPOT lies lowest against its floor
    representative: tuple[MeasuredPoint, ...]  # those at the replica's tensor parallelism and prompt length
    capacity: MeasuredCapacity | None  # None when no point measures the planned replica
    modelled: ModelledLatency | None  # the roofline at the deciding measured batch (None when none decides)
    gpu_model: str
    hbm_tbs: float
    peak_tflops: float  # one GPU's fastest dense rate for the weights (the prefill floor's roof)
    weight_precision: str
    pointers: tuple[str, ...]  # the JSON Pointer of every measured point, in submission order

    @property
    def decides(self) -> bool:
        """Returns whether the measurements, not the roofline, size the plan."""
        return self.capacity is not None

    def floor_evidence(self) -> dict[str, Any]:
        """Returns the figures of the point furthest below (or nearest to) its floor, and the sentence that names it."""
        worst = self.furthest
        return {"measured_points": len(self.comparisons), "measured_to_floor_ratio": worst.to_floor,
                "latency_floor_figure": worst.figure, "latency_floor_ms": worst.floor_ms,
                "latency_floor_measured_ms": worst.measured_ms, "latency_floor_batch": worst.point.batch,
                "latency_floor_point": worst.point.index, "latency_floor_finding": self._finding(worst),
                "floor_peak_tflops": self.peak_tflops}

    def _finding(self, c: FloorComparison) -> str:
        point = c.point
        where = (f"measured p95 {c.figure} {c.measured_ms:.3g} ms at batch {point.batch} (tp {point.tensor_parallel}, "
                 f"{point.prompt_tokens:,}-token prompts; {self.pointers[point.index]}) is "
                 f"{'below' if c.below_floor else 'above'} the {c.floor_ms:.3g} ms")
        shard = f"each GPU's {bytes_to_gb(c.decode.weight_bytes_per_gpu):.1f} GB weight shard"
        if c.figure == "TPOT":
            return (f"{where} that the {self.gpu_model}'s {self.hbm_tbs:g} TB/s needs just to read {shard} and the "
                    f"batch's {bytes_to_gb(c.decode.kv_bytes_per_gpu):.2f} GB of KV cache ({point.batch} × "
                    f"{point.context_tokens:,} tokens × {point.model.kv_bytes_per_token_per_gpu:,.0f} B) once per "
                    "decode step")
        if c.prefill.compute_bound:
            return (f"{where} that one prompt's 2 × {point.model.flops_parameters:,.0f} parameters × "
                    f"{point.prompt_tokens:,} tokens of FLOPs take at {point.tensor_parallel} × "
                    f"{self.peak_tflops:g} TFLOP/s, the {self.gpu_model}'s fastest dense rate for "
                    f"{self.weight_precision} weights")
        return (f"{where} that the {self.gpu_model}'s {self.hbm_tbs:g} TB/s needs to read {shard} once, as the "
                "prompt's forward pass must")

    def capacity_evidence(self, gpus_quoted: int) -> dict[str, Any]:
        """Returns the plan's figures from the measured points (only when they decide), with the roofline's beside."""
        capacity = self.capacity
        if capacity is None:
            return {}
        evidence: dict[str, Any] = {"latency_from": MEASURED, "measured_points_used": len(self.representative),
                                    "batch": capacity.batch, "batch_limit": capacity.reason}
        point, modelled = capacity.point, self.modelled
        if point is None or modelled is None or capacity.replicas is None or capacity.gpus_needed is None:
            return evidence
        margin = inference.quoted_capacity(capacity.gpus_needed, gpus_quoted)
        evidence.update(
            measured_batch=point.batch, measured_ttft_ms=point.ttft_ms, measured_tpot_ms=point.tpot_ms,
            modelled_ttft_ms=s_to_ms(modelled.ttft_s), modelled_tpot_ms=s_to_ms(modelled.tpot_s),
            ttft_ms=point.ttft_ms, tpot_ms=point.tpot_ms, memory_bound=modelled.memory_bound,
            rps_per_replica=capacity.rps_per_replica, peak_rps=capacity.replicas.peak_rps,
            peak_replicas=capacity.replicas.peak_replicas, spare_replicas=capacity.replicas.spare_replicas,
            replicas_needed=capacity.replicas_needed, gpus_needed=capacity.gpus_needed,
            shortfall_gpus=margin.shortfall_gpus, spare_fraction=margin.spare_fraction)
        return evidence

    def unused_note(self, tensor_parallel: int, prompt_tokens: int) -> str:
        """Returns why no measured point sizes the plan ('' when one does)."""
        if self.decides:
            return ""
        shapes = ", ".join(f"batch {c.point.batch} at tp {c.point.tensor_parallel} with "
                           f"{c.point.prompt_tokens:,}-token prompts" for c in self.comparisons)
        return (f"no measured point is at the replica's tp {tensor_parallel} with prompts of at least "
                f"{prompt_tokens:,} tokens ({shapes}), so the roofline sizes the plan")


def measured_serving(ctx: Context, memory: ServingMemory, served: ServedModel, gpu: GpuSpec, roofline: Roofline,
                     requests: Requests, traffic: Traffic, slo: Slo) -> MeasuredServing | None:
    """Returns the measured points against their floors and the capacity they give; None when none was measured.

    ``served`` is the planned replica (its KV bytes per token per GPU at the workload's tensor parallelism); a point
    at another tensor parallelism is judged against its own replica's floors.
    """
    runs = ctx.job.measurements.serving_latency
    if not runs:
        return None
    peak_tflops = inference_latency.floor_peak_tflops(gpu.bf16_tflops, memory.weight_precision)
    points = tuple(_point(ctx, memory, served, run, index, requests.prompt_tokens) for index, run in enumerate(runs))
    comparisons = tuple(inference_measured.floor_comparison(p, gpu, peak_tflops) for p in points)
    furthest = inference_measured.furthest_below_floor(comparisons)
    if furthest is None:  # pragma: no cover - there is at least one point
        return None
    representative = inference_measured.representative_points(points, served.tensor_parallel,
                                                                requests.prompt_tokens)
    capacity = modelled = None
    if representative:
        capacity = inference_measured.measured_capacity(representative, requests.output_tokens, traffic, slo)
        if capacity.point is not None:
            modelled = inference.modelled_latency(served, gpu, requests, roofline, capacity.point.batch)
    return MeasuredServing(comparisons=comparisons, furthest=furthest, representative=representative,
                           capacity=capacity, modelled=modelled, gpu_model=memory.hardware.gpu.model,
                           hbm_tbs=gpu.hbm_tbs, peak_tflops=peak_tflops, weight_precision=memory.weight_precision,
                           pointers=tuple(run.pointer for run in runs))


def _point(ctx: Context, memory: ServingMemory, served: ServedModel, run: ServingLatencyRun, index: int,
           prompt_default: int) -> MeasuredPoint:
    prompt_tokens = ctx.value(run.prompt_tokens)
    prompt_tokens = int(prompt_tokens if prompt_tokens is not None else prompt_default)
    tensor_parallel = ctx.value(run.tensor_parallel)
    tensor_parallel = int(tensor_parallel if tensor_parallel is not None else served.tensor_parallel)
    model, attention = served, memory.attention
    if tensor_parallel != served.tensor_parallel:
        kv_per_gpu = served.kv_bytes_per_token_per_gpu
        if attention is not None:  # always known here: the check sized the KV cache before
            kv_per_gpu = inference_memory.kv_cache_bytes_per_token(
                attention.layers, attention.kv_heads, attention.head_dim, memory.kv_precision,
                tensor_parallel).per_gpu_bytes
        model = ServedModel(served.parameters, served.weight_bytes, kv_per_gpu, tensor_parallel, served.experts)
    batch, ttft_ms, tpot_ms = ctx.value(run.batch), ctx.value(run.ttft_ms), ctx.value(run.tpot_ms)
    context_tokens = ctx.value(run.context_tokens)  # default: the point's prompt, when it states one
    return MeasuredPoint(batch=int(batch), ttft_ms=ttft_ms, tpot_ms=tpot_ms, prompt_tokens=prompt_tokens,
                         context_tokens=int(context_tokens if context_tokens is not None else prompt_tokens),
                         model=model, index=index)
