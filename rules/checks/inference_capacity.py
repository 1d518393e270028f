"""inference-capacity: the quoted GPUs carry the peak request rate within the latency SLOs."""

from __future__ import annotations

from rules.checks.base import CAPACITY_PLANNING_GUIDE, Check, Context, Facts, Passing, Rule
from rules.checks.facts.cost import serving_cost, serving_cost_note
from rules.checks.facts.serving import serving_memory, serving_not_modelled_reason
from rules.checks.facts.serving_experts import experts_evidence, served_experts
from rules.checks.facts.serving_latency import MODELLED, measured_serving
from rules.errors import InconsistentInput
from rules.estimates.model.hardware import GpuSpec
from rules.estimates.serving import inference, inference_latency
from rules.estimates.serving.inference import Requests, Slo, Traffic
from rules.estimates.serving.inference_latency import Roofline, ServedModel
from rules.status import Basis, Status
from rules.units import s_to_ms

# Settings of the roofline model; the record's message names them because they are assumptions.
EFFICIENCIES = ("prefill_flops_efficiency", "decode_hbm_efficiency", "decode_flops_efficiency")

_DEMAND = ("{rps:g} rps × peak factor {peak_factor:g} = {peak_rps:g} rps, plus {headroom:.0%} headroom, at "
           "{rps_per_replica:.2f} rps per replica of {tensor_parallel} × {gpu_model} (batch {batch}, "
           "TTFT {ttft_ms:.0f} ms ≤ {ttft_slo_ms:g}, TPOT {tpot_ms:.1f} ms ≤ {tpot_slo_ms:g}; {batch_limit})")
# Where the latencies came from, filled into every message as {latency_basis}.
_MODELLED_BASIS = ("; estimated on the roofline with efficiencies from the policy: prefill "
                   "{prefill_flops_efficiency:.0%} of peak FLOP/s, decode {decode_hbm_efficiency:.0%} of HBM bandwidth "
                   "and {decode_flops_efficiency:.0%} of peak FLOP/s (decode floor at batch 1, the weights read once "
                   "at the datasheet bandwidth: {decode_floor_ms_batch1:.1f} ms)")
_MEASURED_BASIS = ("; measured: p95 TTFT and TPOT at batch {measured_batch} ({measured_points_used} of "
                   "{measured_points} points of measurements.serving_latency measure this replica), where the "
                   "roofline with the policy's efficiencies gives TTFT {modelled_ttft_ms:.0f} ms and TPOT "
                   "{modelled_tpot_ms:.1f} ms at that batch")
_MEASURED_NONE_BASIS = ("; measured: {measured_points_used} of {measured_points} points of "
                        "measurements.serving_latency measure this replica, and they decide instead of the roofline")
_BASIS = "{latency_basis}"
_COST = "{serving_cost_note}"


def _load_test(e: dict) -> str:
    if e["latency_from"] == MODELLED:
        return ("The estimate rests on assumed efficiencies: load-test one replica at the planned batch and "
                "prompt/output lengths before buying, or quote a few more GPUs.")
    return ("The plan rests on the measured latencies: quote a few more GPUs, or confirm the measurement at the "
            "planned prompt and output lengths.")


def _under_quoted_remedy(e: dict) -> str:
    advice = ("a load test at the planned batch replaces these estimates" if e["latency_from"] == MODELLED else
              "the measured latencies decide, so only faster replicas or more of them close the gap")
    return (f"Quote at least {e['gpus_needed']} GPUs for serving, or lower the peak factor or headroom only if the "
            f"traffic forecast supports it; {advice}.")


class InferenceCapacity(Check):
    id = "inference-capacity"
    title = "Plan for peak traffic"
    plan_item = "7. Plan for peak traffic"
    plan_source = CAPACITY_PLANNING_GUIDE
    thresholds = {"min_measured_to_floor_ratio": "inference.min_measured_to_floor_ratio",
                  "min_slo_batch": "inference.min_slo_batch",
                  "warn_spare_fraction": "inference.warn_spare_fraction"}
    headline = ("{gpus_needed} of {gpus_quoted} GPUs needed; TTFT {ttft_ms:.0f} ms, TPOT {tpot_ms:.1f} ms "
                "at batch {batch}")
    rules = (
        Rule(Status.FAIL, "latency-beyond-floor", lambda m: m.measured_to_floor_ratio < m.min_measured_to_floor_ratio,
             "a measured latency is faster than the quoted GPUs can physically serve this model: "
             "{latency_floor_finding}, {measured_to_floor_ratio:.0%} of that floor (the floor counts every byte and "
             "FLOP at 100 % of the datasheet; the check fails below {min_measured_to_floor_ratio:.0%} of it), so the "
             "measurement does not describe the served model on these GPUs",
             "Check the benchmark behind {latency_floor_figure} at batch {latency_floor_batch}: the model, its "
             "precision and tensor parallelism and the GPU model must be those submitted, figures p95 in ms per "
             "request (TPOT excluding the first token), measured without speculative decoding or prefix-cache "
             "hits (both beat a floor of one token per step and a full prefill); then submit the corrected points."),
        Rule(Status.FAIL, "slo-unreachable", lambda m: m.batch < m.min_slo_batch,
             "no batch of at least {min_slo_batch} meets TTFT ≤ {ttft_slo_ms:g} ms and TPOT ≤ {tpot_slo_ms:g} ms on "
             "a replica of {tensor_parallel} × {gpu_model}: {batch_limit}" + _BASIS,
             "Quote faster GPUs (more HBM bandwidth for TPOT, more FLOP/s for TTFT), raise tensor parallelism, "
             "quantise the weights, or renegotiate the SLOs."),
        Rule(Status.FAIL, "under-quoted", lambda m: m.gpus_needed > m.gpus_quoted,
             "{gpus_needed} GPUs needed ({replicas_needed} replicas × tp {tensor_parallel}) but node group "
             "{group_name} has {gpus_quoted}, {shortfall_gpus} short: " + _DEMAND + _BASIS,
             _under_quoted_remedy),
        Rule(Status.WARN, "thin-margin", lambda m: m.spare_fraction < m.warn_spare_fraction,
             "{gpus_needed} of the {gpus_quoted} quoted GPUs are needed, leaving {spare_fraction:.0%} beyond the "
             "plan (policy warns below {warn_spare_fraction:.0%}): " + _DEMAND + _BASIS + _COST,
             _load_test),
    )
    passing = Passing("carries-peak", "{gpus_needed} of the {gpus_quoted} quoted GPUs carry the peak "
                      "({replicas_needed} replicas × tp {tensor_parallel}): " + _DEMAND + _BASIS + _COST)

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.serves:
            return ctx.not_applicable("the submission has no inference workload")
        unmodelled = serving_not_modelled_reason(ctx)
        if unmodelled is not None:
            return ctx.insufficient(unmodelled)
        serving = ctx.job.serving
        memory = serving_memory(ctx)
        group = memory.group if memory else None
        hbm_tbs = ctx.needed(group.gpu.hbm_tbs) if group else None
        bf16_tflops = ctx.needed(group.gpu.bf16_tflops) if group else None
        prompt_tokens = ctx.needed(serving.prompt_tokens)
        output_tokens = ctx.needed(serving.output_tokens)
        rps = ctx.needed(serving.rps)
        peak_factor = ctx.needed(serving.peak_factor)
        headroom = ctx.value(serving.headroom)
        if headroom is None:
            headroom = ctx.setting("inference.default_headroom")
        ttft_slo_ms = ctx.needed(serving.slo.ttft_ms_p95)
        tpot_slo_ms = ctx.needed(serving.slo.tpot_ms_p95)
        if memory is None or group is None or ctx.missing:
            return ctx.insufficient("the serving plan needs the model, the hardware, the traffic and the SLOs")
        if memory.problem:
            return ctx.insufficient(f"the serving estimate rejects the inputs: {memory.problem}")
        replica = memory.replica
        if replica.kv is None or memory.context_tokens is None:
            return ctx.insufficient("the KV cache cannot be sized without the attention shape and context")
        try:
            experts = served_experts(ctx, memory)
        except InconsistentInput as error:  # an expert split the replica cannot serve
            return ctx.insufficient(f"the serving estimate rejects the inputs: {error}")
        if ctx.missing:
            return ctx.insufficient("a mixture of experts' serving needs its full architecture")
        efficiencies = {name: ctx.setting(f"inference.{name}") for name in EFFICIENCIES}
        served = ServedModel(replica.parameters, replica.weight_bytes, replica.kv.per_gpu_bytes,
                             replica.tensor_parallel, experts)
        roofline = Roofline(hbm_efficiency=efficiencies["decode_hbm_efficiency"],
                            flops_efficiency=efficiencies["decode_flops_efficiency"],
                            prefill_flops_efficiency=efficiencies["prefill_flops_efficiency"])
        requests = Requests(int(prompt_tokens), int(output_tokens), memory.context_tokens)
        traffic, slo = Traffic(rps, peak_factor, headroom), Slo(ttft_slo_ms, tpot_slo_ms)
        try:
            gpu = GpuSpec(memory.hardware.gpu.model, capacity_bytes=memory.hardware.gpu.capacity_bytes, hbm_tbs=hbm_tbs,
                          bf16_tflops=bf16_tflops)
            plan = inference.serving_plan(served, gpu, memory.engine, requests, traffic, slo, roofline)
            floor_s = inference_latency.decode_floor_s(served, gpu)
            measured = measured_serving(ctx, memory, served, gpu, roofline, requests, traffic, slo)
        except InconsistentInput as error:  # out-of-range inputs the schema cannot rule out (e.g. overflowing sizes)
            return ctx.insufficient(f"the serving estimate rejects the inputs: {error}")
        gpus_quoted = memory.hardware.gpus
        group_name = ctx.value(group.name)
        if group_name is None:
            group_name = group.pointer
        batch_limit = plan.reason
        if plan.concurrency.max_sequences == 0:
            batch_limit = (f"not one sequence of {memory.context_tokens:,} tokens fits a replica's memory "
                           f"(see inference-memory)")
        evidence = {
            "gpu_model": memory.hardware.gpu.model, "group_name": group_name,
            "hbm_tbs": hbm_tbs, "bf16_tflops": bf16_tflops, "tensor_parallel": replica.tensor_parallel,
            "prompt_tokens": int(prompt_tokens), "output_tokens": int(output_tokens),
            "context_tokens": memory.context_tokens, "rps": rps, "peak_factor": peak_factor, "headroom": headroom,
            "ttft_slo_ms": ttft_slo_ms, "tpot_slo_ms": tpot_slo_ms,
            "max_concurrent_sequences": plan.concurrency.max_sequences,
            "max_num_seqs": memory.engine.max_num_seqs,
            "batch": plan.batch, "batch_limit": batch_limit, "gpus_quoted": gpus_quoted,
            "decode_floor_ms_batch1": s_to_ms(floor_s), **efficiencies, "latency_from": MODELLED,
            **serving_cost(ctx, group.pointer),
        }
        evidence["serving_cost_note"] = serving_cost_note(evidence)
        if experts is not None:
            evidence.update(experts_evidence(experts, memory, plan.batch or 1))
        if plan.points:
            evidence.update(ttft_ms_batch1=plan.points[0].ttft_ms, tpot_ms_batch1=plan.points[0].tpot_ms)
        if measured is not None and measured.decides:
            evidence.update(measured.capacity_evidence(gpus_quoted))
            basis = _MEASURED_BASIS if "measured_batch" in evidence else _MEASURED_NONE_BASIS
        else:
            basis = _MODELLED_BASIS
            if plan.feasible and plan.replicas is not None and plan.gpus_needed is not None:
                chosen = plan.chosen_point
                margin = inference.quoted_capacity(plan.gpus_needed, gpus_quoted)
                evidence.update(
                    ttft_ms=plan.ttft_ms, tpot_ms=plan.tpot_ms, memory_bound=chosen.memory_bound,
                    rps_per_replica=plan.rps_per_replica, peak_rps=plan.replicas.peak_rps,
                    peak_replicas=plan.replicas.peak_replicas, spare_replicas=plan.replicas.spare_replicas,
                    replicas_needed=plan.replicas_needed, gpus_needed=plan.gpus_needed,
                    shortfall_gpus=margin.shortfall_gpus, spare_fraction=margin.spare_fraction)
        if measured is None:
            # Without measured points the floor rule has nothing to judge.
            evidence["latency_basis"] = basis.format(**evidence)
            return Facts(evidence=evidence, unjudged=frozenset({"measured_to_floor_ratio"}))
        evidence.update(measured.floor_evidence())
        if not measured.decides:
            evidence["measured_points_unused"] = measured.unused_note(replica.tensor_parallel, int(prompt_tokens))
            basis = _MODELLED_BASIS + "; {measured_points_unused}"
        evidence["latency_basis"] = basis.format(**evidence)
        return Facts(evidence=evidence, basis=Basis.MEASURED if measured.decides else Basis.ESTIMATED)
