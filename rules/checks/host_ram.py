"""host-ram: a node's host RAM holds the input pipeline, pinned buffers, offloaded state and checkpoint staging."""

from __future__ import annotations

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.layout import layout, training_group
from rules.checks.facts.memory import host_model_state
from rules.checks.facts.reliability import checkpoint_size_facts
from rules.estimates.memory import host_memory
from rules.status import Status
from rules.units import bytes_to_gib

_NEED = ("{required_gib:,.0f} GiB per node (dataloader workers {dataloader_workers_gib:,.0f} = {gpus_on_node} GPUs × "
         "{workers_per_gpu:g} workers × {worker_rss_gib:g} GiB, pinned buffers {pinned_buffers_gib:,.0f}, model state "
         "on the host {offload_gib:,.0f} ({offload_basis}), checkpoint staging {checkpoint_staging_gib:,.0f}, "
         "OS {os_reserve_gib:g})")
_RATIO = ("{host_to_gpu_memory_ratio:.2f}× the node's {gpu_memory_per_node_gib:,.0f} GiB of GPU memory")


class HostRam(Check):
    id = "host-ram"
    title = "Give host RAM room for preprocessing"
    plan_item = "Give host RAM room for preprocessing"
    thresholds = {"margin_fraction": "host_ram.margin_fraction",
                  "gpu_memory_ratio_rule_of_thumb": "host_ram.gpu_memory_ratio_rule_of_thumb"}
    headline = "{required_gib:,.0f} of {host_memory_gib:,.0f} GiB host RAM per node"
    rules = (
        Rule(Status.FAIL, "exceeds-host-ram", lambda m: m.required_gib > m.host_memory_gib,
             "the node needs " + _NEED + ", more than its {host_memory_gib:,.0f} GiB of host RAM",
             "Quote more host RAM per node (at least {required_gib:,.0f} GiB plus {margin_fraction:.0%} margin), or "
             "cut dataloader workers per GPU, pinned buffers or CPU offload (shard over more GPUs instead)."),
        Rule(Status.WARN, "little-margin", lambda m: m.spare_fraction < m.margin_fraction,
             "the node needs " + _NEED + " of its {host_memory_gib:,.0f} GiB, leaving {spare_fraction:.0%} spare, "
             "less than the {margin_fraction:.0%} margin kept for process restarts and page cache",
             "Measure resident and pinned memory at the intended worker count; quote more RAM or run fewer "
             "workers so that a restarted worker or the page cache does not trigger the OOM killer."),
        Rule(Status.WARN, "below-rule-of-thumb",
             lambda m: m.host_to_gpu_memory_ratio < m.gpu_memory_ratio_rule_of_thumb,
             "the node needs " + _NEED + " of its {host_memory_gib:,.0f} GiB ({spare_fraction:.0%} spare), but host "
             "RAM is " + _RATIO + ", below the {gpu_memory_ratio_rule_of_thumb:g}× rule of thumb; it is only a rule "
             "of thumb (NVIDIA's DGX H200 ships 2 TB for 1.13 TB of GPU memory, 1.8×), so this is a warning",
             "No change is needed if the sizing above holds: confirm it by measuring resident and pinned memory at "
             "the intended worker count, and quote more RAM if the pipeline caches samples in memory."),
    )
    passing = Passing("room-to-spare", "the node needs " + _NEED + " of its {host_memory_gib:,.0f} GiB "
                      "({spare_fraction:.0%} spare); host RAM is " + _RATIO)

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        plan = layout(ctx)
        group = training_group(ctx)
        host_gib = ctx.needed(group.host_memory_gib) if group else None
        gpu_gib = ctx.needed(group.gpu.memory_gib) if group else None
        dataloader = ctx.job.training.dataloader
        workers_per_gpu = ctx.needed(dataloader.workers_per_gpu)
        worker_rss_gib = ctx.needed(dataloader.worker_rss_gib)
        pinned_gib = ctx.needed(dataloader.pinned_gib_per_gpu)
        held = host_model_state(ctx)
        size = checkpoint_size_facts(ctx)
        if None in (plan, host_gib, gpu_gib, workers_per_gpu, worker_rss_gib, pinned_gib, held, size):
            return ctx.insufficient("host RAM cannot be sized")
        os_reserve_gib = ctx.setting("host_ram.os_reserve_gib")
        node = host_memory.training_node_host_ram(
            plan, host_gib, gpu_gib, host_memory.Dataloader(int(workers_per_gpu), worker_rss_gib, pinned_gib),
            os_reserve_gib, held.total_bytes, size.total_bytes)
        need = node.need
        evidence = {
            "required_gib": need.total_gib,
            "host_memory_gib": host_gib,
            "spare_fraction": node.spare_fraction,
            "dataloader_workers_gib": bytes_to_gib(need.dataloader_workers_bytes),
            "pinned_buffers_gib": bytes_to_gib(need.pinned_buffers_bytes),
            "offload_gib": bytes_to_gib(need.offload_bytes),
            "offload_state_gib": bytes_to_gib(held.state_bytes),
            "offload_buffers_gib": bytes_to_gib(held.buffer_bytes),
            "offload_basis": held.basis,
            "additional_buffer_factor": ctx.setting("memory.deepspeed.additional_buffer_factor"),
            "checkpoint_staging_gib": bytes_to_gib(need.checkpoint_staging_bytes),
            "os_reserve_gib": os_reserve_gib,
            "gpus_on_node": plan.gpus_on_node,
            "workers_per_gpu": workers_per_gpu,
            "worker_rss_gib": worker_rss_gib,
            "pinned_gib_per_gpu": pinned_gib,
            "offload": ctx.value(ctx.job.training.parallelism.offload),
            "gpu_memory_per_node_gib": node.gpu_memory_per_node_gib,
            "host_to_gpu_memory_ratio": node.host_to_gpu_memory_ratio,
        }
        return Facts(evidence=evidence)
