"""data-feed: storage and host CPUs deliver training input as fast as the GPUs consume it."""

from __future__ import annotations

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.layout import cpu_cores_per_node, layout, training_group
from rules.checks.facts.throughput import throughput_facts
from rules.estimates.communication import data_feed
from rules.estimates.ratios import spare_fraction
from rules.status import Basis, FigureFrom, Status

_FEED = ("{cluster_tokens_per_s:,.0f} tokens/s ({tokens_per_s_per_gpu:,.0f} per GPU from {throughput_from}) × "
         "{bytes_per_token:g} B/token")
_CORES = ("decoding at {tokens_per_s_per_core:,.0f} tokens/s per core needs {decode_cores_per_node} core(s) per node; "
          "the {worker_cores_per_node:g} dataloader workers per node can decode on {decode_capacity_cores_per_node:g} "
          "of the {cores_per_node} cores ({reserved_cores_per_node:g} reserved)")


class DataFeed(Check):
    id = "data-feed"
    title = "Feed the GPUs consistently"
    plan_item = "Feed the GPUs consistently"
    thresholds = {"storage_headroom_fraction": "data_feed.storage_headroom_fraction"}
    headline = ("{required_read_gbs:.3g} of {storage_read_gbs:.1f} GB/s read, {decode_cores_per_node} of "
                "{decode_capacity_cores_per_node:g} decode cores per node")
    rules = (
        Rule(Status.FAIL, "storage-too-slow", lambda m: m.required_read_gbs > m.storage_read_gbs,
             "training reads {required_read_gbs:.2f} GB/s (" + _FEED + ") but the {storage_read_from} storage read "
             "bandwidth is {storage_read_gbs:.2f} GB/s; " + _CORES,
             "Quote storage that reads at least {required_read_gbs:.2f} GB/s plus {storage_headroom_fraction:.0%} "
             "headroom, stage the dataset on local NVMe, or store it pre-tokenised (2-4 B/token)."),
        Rule(Status.FAIL, "cpu-short", lambda m: m.decode_cores_per_node > m.decode_capacity_cores_per_node,
             "storage keeps up ({required_read_gbs:.3g} of {storage_read_gbs:.3g} GB/s), but the CPUs fall short: "
             + _CORES,
             "Run more dataloader workers per GPU if cores are free, quote CPUs with more cores per node, "
             "pre-tokenise or pre-decode the dataset offline, or decode on the GPU (e.g. NVIDIA DALI)."),
        Rule(Status.WARN, "storage-within-headroom", lambda m: m.storage_spare_fraction < m.storage_headroom_fraction,
             "training reads {required_read_gbs:.2f} GB/s (" + _FEED + ") of {storage_read_gbs:.2f} GB/s "
             "{storage_read_from} storage, leaving {storage_spare_fraction:.0%} spare, less than the "
             "{storage_headroom_fraction:.0%} headroom; " + _CORES,
             "Measure accelerator idle time and dataloader queue depth at full scale; add a local NVMe cache or "
             "faster storage if the trace shows starvation (epoch re-reads and shuffles need more than the average)."),
    )
    passing = Passing("fed", "training reads {required_read_gbs:.3g} GB/s (" + _FEED + ") of "
                      "{storage_read_gbs:.2f} GB/s {storage_read_from} storage; " + _CORES)

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        plan = layout(ctx)
        rate = throughput_facts(ctx)
        training = ctx.job.training
        bytes_per_token = ctx.needed(training.data.bytes_per_token)
        measured = ctx.value(ctx.job.measurements.storage.read_gbs)
        storage_read = measured if measured is not None else ctx.needed(ctx.job.cluster.storage.read_gbs)
        workers_per_gpu = ctx.needed(training.dataloader.workers_per_gpu)
        cores = cpu_cores_per_node(ctx, training_group(ctx)) if plan else None
        # Stated, or the policy's cited default (rules/job/defaults.py), which the check's assumptions then list.
        per_core = ctx.needed(training.data.tokens_per_s_per_core)
        if None in (plan, rate, bytes_per_token, storage_read, workers_per_gpu, cores, per_core):
            return ctx.insufficient("the input feed cannot be sized")
        required = data_feed.required_read_gbs(rate.cluster_tokens_per_s, bytes_per_token)
        decode = data_feed.decode_cores_needed(rate.cluster_tokens_per_s, per_core, plan.nodes)
        budget = data_feed.decode_capacity_cores(
            cores, plan.gpus_on_node, int(workers_per_gpu),
            reserved_cores=ctx.setting("data_feed.reserved_cores_per_node"))
        evidence = {
            **rate.evidence(),
            "bytes_per_token": bytes_per_token,
            "required_read_gbs": required,
            "storage_read_gbs": storage_read,
            "storage_read_from": FigureFrom.MEASURED if measured is not None else FigureFrom.QUOTED,
            "storage_spare_fraction": spare_fraction(required, storage_read),
            "tokens_per_s_per_core": per_core,
            "decode_cores_cluster": decode.cluster_cores,
            "decode_cores_per_node": decode.cores_per_node,
            "cores_per_node": cores,
            "worker_cores_per_node": budget.worker_processes,
            "reserved_cores_per_node": ctx.setting("data_feed.reserved_cores_per_node"),
            "decode_capacity_cores_per_node": budget.capacity_cores,
            "oversubscribed_cores_per_node": budget.oversubscribed_cores,
            "nodes": plan.nodes,
        }
        return Facts(evidence=evidence, basis=Basis.MEASURED if measured is not None else Basis.ESTIMATED)

