"""inference-memory: the weights, a workspace reserve and enough KV cache for concurrent sequences fit a replica."""

from __future__ import annotations

from rules.checks.base import CAPACITY_PLANNING_GUIDE, Check, Context, Facts, Passing, Rule
from rules.checks.facts.serving import serving_memory
from rules.status import Status

_SHAPE = ("{weights_gib_per_gpu:.1f} GiB of {weight_precision} weights per GPU (model {weights_gib:.1f} GiB at "
          "{weight_bytes_per_param:.4g} B/param, tensor parallel {tensor_parallel}) + {reserve_gib:.1f} GiB reserve "
          "against {usable_gib:.1f} GiB usable ({gpu_memory_utilization:.0%} of {capacity_gib:.1f} GiB on "
          "{gpu_model})")


class InferenceMemory(Check):
    id = "inference-memory"
    title = "Estimate inference memory"
    plan_item = "4. Estimate inference memory"
    plan_source = CAPACITY_PLANNING_GUIDE
    thresholds = {"min_concurrent_sequences": "inference.min_concurrent_sequences"}
    headline = ("{max_concurrent_sequences} sequences of {context_tokens:,} tokens per replica; "
                "{weights_gib_per_gpu:.1f} GiB weights, {kv_cache_gib:.1f} GiB KV cache per GPU")
    rules = (
        Rule(Status.FAIL, "weights-do-not-fit", lambda m: m.weights_and_reserve_gib > m.usable_gib,
             "the weights and reserve do not fit, so no sequence can be served: " + _SHAPE
             + " ({weights_and_reserve_gib:.1f} GiB needed); {kv_summary}",
             "Raise tensor parallelism (the weights split over tp GPUs), quantise the weights (fp8, int8, int4), "
             "or quote GPUs with more memory."),
        Rule(Status.FAIL, "context-does-not-fit", lambda m: m.kv_cache_gib < m.kv_cache_gib_per_sequence,
             "not one sequence of {context_tokens:,} tokens fits: " + _SHAPE + " leave {kv_cache_gib:.2f} GiB of "
             "KV cache per GPU and one sequence needs {kv_cache_gib_per_sequence:.2f} GiB; {kv_summary}",
             "Shorten the context, use an fp8 KV cache, raise tensor parallelism, or quote GPUs with more memory."),
        Rule(Status.WARN, "few-sequences", lambda m: m.max_concurrent_sequences < m.min_concurrent_sequences,
             "only {max_concurrent_sequences} sequences of {context_tokens:,} tokens fit per replica (policy "
             "minimum {min_concurrent_sequences}): " + _SHAPE + " leave {kv_cache_gib:.1f} GiB of KV cache per "
             "GPU, {kv_cache_gib_per_sequence:.2f} GiB per sequence; {kv_summary}",
             "So small a batch wastes most of the GPU's throughput: use an fp8 KV cache, raise tensor "
             "parallelism, shorten the context, or quote GPUs with more memory."),
    )
    passing = Passing("sequences-fit", "{max_concurrent_sequences} sequences of {context_tokens:,} tokens fit per "
                      "replica: " + _SHAPE + " leave {kv_cache_gib:.1f} GiB of KV cache per GPU, "
                      "{kv_cache_gib_per_sequence:.2f} GiB per sequence; {kv_summary}")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.serves:
            return ctx.not_applicable("the submission has no inference workload")
        plan = serving_memory(ctx)
        if plan is None:
            return ctx.insufficient("the weights cannot be sized")
        if plan.problem:
            return ctx.insufficient(f"the serving estimate rejects the inputs: {plan.problem}")
        evidence = plan.evidence()
        if plan.replica.concurrency is None:
            # The weights alone already decide a failure; otherwise the KV cache must be sized.
            if evidence["weights_and_reserve_gib"] <= evidence["usable_gib"]:
                return ctx.insufficient("the KV cache cannot be sized without the attention shape and context",
                                        **evidence)
            evidence["kv_summary"] = (f"the KV cache was not sized (missing {', '.join(ctx.missing)}); "
                                      "the weights alone decide")
            ctx.missing.clear()
            return Facts(evidence=evidence)
        evidence["kv_summary"] = (
            f"KV cache {evidence['kv_cache_bytes_per_token']:,} B/token for the whole model, "
            f"{evidence['kv_cache_bytes_per_token_per_gpu']:,} per GPU: 2 (K and V) × {evidence['attention']} × "
            f"{evidence['kv_cache_bytes_per_element']} B ({evidence['kv_cache_precision']}, "
            f"{evidence['kv_cache_precision_note']})")
        return Facts(evidence=evidence)
