"""Changes to the quote that a failing or warning check's evidence proposes: what the vendor should quote instead.

Each function reads one Situation (rules/advice/remedy_changes.py) and returns the changes it proposes, none when
its checks pass: racks and PDUs sized from rack-power's draw and limits, the node count time-to-result or
inference-capacity says is needed, a catalogued GPU or server with more memory, storage write and read
bandwidth, compute NICs, and host RAM. Sizes come from rules/estimates/search/remedy_sizing.py, which inverts the
estimators the checks judge by. More nodes are priced at the node group's unit price; the quote prices
nothing else a change adds (racks, PDUs, storage, NICs, RAM, another model), so those changes say what is
unpriced instead of guessing a price. More nodes also go on the quote's line for their server, where one line
names it and agrees with the node groups, so that the changed quote still adds up.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from rules.advice.remedy_changes import QUOTE, Change, Situation
from rules.checks.facts.schedule import server_lines_of
from rules.estimates.power_cost.power import pdus_required
from rules.estimates.search import remedy_sizing as sizing
from rules.estimates.search.remedy_sizing import RackLoad
from rules.job.cluster import Rack
from rules.job.fields import member_pointer
from rules.job.given import Given
from rules.job.inputs import GPU_FIELDS, SERVER_FIELDS
from rules.status import FigureFrom

_RACKS_UNPRICED = "racks and PDUs are not priced in the quote"
_PDU_STEP_KW, _RATE_STEP_GBS, _RAM_STEP_GIB = 0.1, 0.1, 1.0
# The memory rules a GPU with more memory answers, and the evidence naming what one GPU needs (None: unsized).
_MEMORY_RULES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "peak-memory": (("exceeds-usable-memory",), "total_gib"),
    "sharding": (("nothing-fits",), "leanest_total_gib"),
    "inference-memory": (("weights-do-not-fit", "context-does-not-fit"), None)}


def _single_group_racks(s: Situation, group: str) -> list[int]:
    """Returns the indexes of the rack kinds that hold nodes of ``group``, when each holds that group alone."""
    placed = [_placed(s, rack) for rack in s.job.cluster.racks]
    holding = [i for i, groups in enumerate(placed) if group in groups]
    return holding if all(len(placed[i]) == 1 for i in holding) else []


def _placed(s: Situation, rack: Rack) -> dict[str, int]:
    """Returns the nodes of each group that one rack of kind ``rack`` holds (its ``node_groups``, resolved).

    Read as submitted (the patches carry the submission's own form) at the member the job's Rack.node_groups
    declares.
    """
    return s.get(member_pointer(rack, "node_groups"), {})


def _racks_placing(s: Situation, index: int, group: str, kinds: tuple[tuple[int, int], ...],
                   pdus: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Returns the quote's racks with kind ``index`` replaced by ``kinds`` ((racks, nodes of ``group`` each))."""
    racks = copy.deepcopy(s.submitted(member_pointer(s.job.cluster, "racks")))
    template = racks[index]
    built = []
    for number, (count, per_rack) in enumerate(kinds):
        rack = {**copy.deepcopy(template), "count": count, "node_groups": {group: per_rack}}
        if number:
            rack["name"] = f"{template['name'][:57]} (rest)"
        if pdus is not None:
            rack["pdus"] = pdus
        built.append(rack)
    return racks[:index] + built + racks[index + 1:]


def _rack_plans(s: Situation, index: int, group: str, nodes: int, load: RackLoad) -> list[Change]:
    """Returns the fewest racks like rack kind ``index`` that hold ``nodes`` nodes of ``group`` within their limits:
    with their PDUs as quoted, and (when the facility allows more per rack) fewer racks with larger PDUs."""
    rack = s.job.cluster.racks[index]
    name = rack.name.value
    warn = s.threshold("rack-power", "warn_fraction")
    derating = s.threshold("rack-power", "continuous_load_fraction")
    node_kw = load.node_kw
    facility = sizing.facility_limit_kw(load)
    most = min(nodes, sizing.nodes_per_rack_within(facility, node_kw, warn) if facility else nodes)
    with_pdus = min(most, sizing.nodes_per_rack_within(load.pdu_derated_kw, node_kw, warn))
    plans: list[Change] = []
    if with_pdus >= 1 and (with_pdus, nodes) != (load.nodes_per_rack, rack.count.value * load.nodes_per_rack):
        kinds = sizing.rack_split(nodes, with_pdus)
        plans.append(Change(
            f"racks:{name}:{nodes}/{with_pdus}", QUOTE,
            f"place the {nodes} {group} nodes {with_pdus} to a rack in {sizing.racks_needed(nodes, with_pdus)} racks "
            f"like {name} ({sizing.rack_draw_kw(with_pdus, node_kw):.1f} kW each of its "
            f"{load.pdu_derated_kw:.1f} kW PDU limit)",
            ((member_pointer(s.job.cluster, "racks"), _racks_placing(s, index, group, kinds)),), ("rack-power",), None,
            _RACKS_UNPRICED))
    if most > with_pdus and most >= 1:
        pdus = sum(int(p.count.value) for p in rack.pdus)
        redundancy = rack.redundancy.or_("N")
        rating = sizing.round_up(sizing.pdu_rating_kw(sizing.rack_draw_kw(most, node_kw), pdus, redundancy, derating,
                                                      warn), _PDU_STEP_KW)
        kinds = sizing.rack_split(nodes, most)
        plans.append(Change(
            f"racks:{name}:{nodes}/{most}:pdu={rating:g}", QUOTE,
            f"place the {nodes} {group} nodes {most} to a rack in {sizing.racks_needed(nodes, most)} racks like "
            f"{name} ({sizing.rack_draw_kw(most, node_kw):.1f} kW each), with {pdus} PDUs of {rating:g} kW "
            f"each per rack ({redundancy}, derated to {derating:.0%} for continuous load)",
            ((member_pointer(s.job.cluster, "racks"), _racks_placing(s, index, group, kinds,
                                                                 [{"count": pdus, "rating_kw": rating}])),),
            ("rack-power",), None, _RACKS_UNPRICED))
    return plans


def rack_changes(s: Situation) -> list[Change]:
    """Returns racks and PDUs for each kind of rack drawing more than the policy's warn share of its binding limit,
    PDUs for a rack short of its redundancy mode, and racks that place every quoted node."""
    if not s.open("rack-power"):
        return []
    rule = s.checks["rack-power"]["rule"]
    racks = s.job.cluster.racks
    changes: list[Change] = []
    if rule == "redundancy-unmet":
        for rack in racks:
            pdus = rack.pdus
            required = pdus_required(rack.redundancy.or_("N"))
            if pdus and sum(int(p.count.value) for p in pdus) < required:
                rating = max(p.rating_kw.value for p in pdus)
                changes.append(Change(f"pdus:{rack.name.value}:{required}", QUOTE,
                                      f"{required} PDUs of {rating:g} kW in {rack.name.value}, as "
                                      f"{rack.redundancy.value} needs",
                                      ((member_pointer(rack, "pdus"), [{"count": required, "rating_kw": rating}]),),
                                      ("rack-power",), None, _RACKS_UNPRICED))
        return changes
    rows = {row["name"]: row for row in s.evidence("rack-power").get("racks", [])}
    warn = s.threshold("rack-power", "warn_fraction")
    for index, rack in enumerate(racks):
        groups = _placed(s, rack)
        row = rows.get(rack.name.value)
        if row is None or len(groups) != 1 or (rule != "nodes-not-placed" and row["utilisation"] <= warn):
            continue
        (group, per_rack), = groups.items()
        nodes = int(rack.count.value) * int(per_rack)
        if rule == "nodes-not-placed":
            group_index = s.group_of(group)
            holders = _single_group_racks(s, group)
            if group_index is None or holders != [index]:
                continue
            nodes = int(s.group(group_index).count.value)
        load = RackLoad(int(per_rack), row["draw_kw"], row["budget_kw"], row["cooling_kw"], row["pdu_derated_kw"])
        changes += _rack_plans(s, index, group, nodes, load)
    return changes


def _node_change(s: Situation, index: int, nodes: int, reason: str, targets: tuple[str, ...]) -> list[Change]:
    """Returns the change to ``nodes`` nodes in group ``index``: its count, the job's GPUs, its racks, its price."""
    group = s.group(index)
    name = group.name.value
    current, per_node = int(group.count.value), int(group.gpu.count.value or 0)
    if nodes < 1 or nodes == current or per_node < 1:
        return []
    edits: list[tuple[str, Any]] = [(group.count.pointer, nodes)]
    # The GPUs as submitted: a count stated with its provenance is left as it is.
    gpus = s.job.training.gpus
    if index == s.training_group() and s.submitted(gpus.pointer) == sizing.gpus_on(current, per_node):
        edits.append((gpus.pointer, sizing.gpus_on(nodes, per_node)))
    holders = _single_group_racks(s, name)
    if len(holders) == 1:
        per_rack = int(_placed(s, s.job.cluster.racks[holders[0]])[name])
        kinds = sizing.rack_split(nodes, min(per_rack, nodes))
        edits.append((member_pointer(s.job.cluster, "racks"), _racks_placing(s, holders[0], name, kinds)))
    edits += _server_line_edits(s, index, nodes - current)
    price = group.unit_price.value
    text = (f"quote {nodes} nodes of {name} instead of {current} ({sizing.gpus_on(nodes, per_node):,} GPUs): "
            f"{reason}")
    if price is None:
        return [Change(f"nodes:{name}={nodes}", QUOTE, text, tuple(edits), targets, None,
                       f"node group {name} has no unit price")]
    return [Change(f"nodes:{name}={nodes}", QUOTE, text + f", at its unit price of {price:,.0f}",
                   tuple(edits), targets, sizing.price_change(nodes - current, price))]


def node_count_change(s: Situation, index: int, nodes: int) -> Change | None:
    """Returns the change to ``nodes`` nodes in group ``index`` (what-if's node lever), or None when there is none
    (the count it has, or below one)."""
    changes = _node_change(s, index, nodes, "what if", ("time-to-result",))
    return changes[0] if changes else None


def _server_line_edits(s: Situation, index: int, added: int) -> list[tuple[str, Any]]:
    """Returns the edit that keeps the quote adding up when ``added`` nodes join group ``index``: the one line item
    that names its server model gets them too, when its quantity agrees with the node groups of that model today
    (time-to-result's quote-arithmetic); a quote that prices its servers otherwise is left as it is."""
    model = s.group(index).server_model.value
    server = next((found for found in server_lines_of(s.job.cluster, _read) if found.server_model == model), None)
    if server is None or len(server.line_indices) != 1 or server.counts_differ:
        return []
    line = s.job.cluster.line_items[server.line_indices[0]]
    return [(line.quantity.pointer, server.line_quantity + added)]


def _read(given: Given[Any]) -> Any:
    return given.value


def _node_counts(s: Situation, index: int, nodes: int) -> list[int]:
    """Returns ``nodes``, and the fewest nodes above it on which the global batch splits into whole micro-batch
    rounds when it does not split on ``nodes`` (gradient-accumulation would fail there)."""
    split = s.evidence("gradient-accumulation")
    per_node = s.group(index).gpu.count.value
    gpus = s.evidence("time-to-result").get("gpus")
    if not (split.get("data_parallel") and per_node and gpus):
        return [nodes]
    whole = sizing.nodes_dividing_batch(nodes, int(per_node), int(gpus), int(split["data_parallel"]),
                                        int(split["global_batch"]), int(split["micro_batch"]))
    return [nodes] if whole in (None, nodes) else [nodes, whole]


def _whole_batch_node_counts(s: Situation, index: int) -> list[Change]:
    """Returns the nearest node counts below and above the quoted one on which the global batch splits whole."""
    split = s.evidence("gradient-accumulation")
    per_node, current = s.group(index).gpu.count.value, s.group(index).count.value
    gpus = s.job.training.gpus.value or s.evidence("time-to-result").get("gpus")
    if not (per_node and current and gpus and split.get("data_parallel")):
        return []
    args = (int(per_node), int(gpus), int(split["data_parallel"]), int(split["global_batch"]),
            int(split["micro_batch"]))
    reason = (f"global batch {split['global_batch']} splits into whole rounds of micro-batch {split['micro_batch']} "
              "there")
    counts = [sizing.nodes_dividing_batch_below(int(current) - 1, *args) if current > 1 else None,
              sizing.nodes_dividing_batch(int(current) + 1, *args)]
    return [change for nodes in counts if nodes for change in _node_change(s, index, nodes, reason,
                                                                           ("gradient-accumulation",))]


def node_count_changes(s: Situation) -> list[Change]:
    """Returns the node count time-to-result needs for its window (or no more than it needs), and the serving
    node count inference-capacity needs with the policy's spare share."""
    changes: list[Change] = []
    timing = s.evidence("time-to-result")
    index = s.training_group()
    if index is not None and s.open("time-to-result", "misses-window", "oversized") and timing.get("nodes_needed"):
        reason = f"the {timing['window_days']:g}-day window needs {timing['gpus_needed']:,} GPUs"
        for nodes in _node_counts(s, index, int(timing["nodes_needed"])):
            changes += _node_change(s, index, nodes, reason, ("time-to-result",))
    if index is not None and s.open("time-to-result", "little-slack"):
        current = int(s.group(index).count.value)
        target = s.threshold("time-to-result", "warn_fraction_of_window")
        reason = f"the run takes {timing['window_fraction']:.0%} of its window; at most {target:.0%} leaves slack"
        for nodes in _node_counts(s, index, sizing.nodes_for_window(current, timing["window_fraction"], target)):
            changes += _node_change(s, index, nodes, reason, ("time-to-result",))
    if index is not None and s.open("gradient-accumulation", "not-a-whole-number"):
        changes += _whole_batch_node_counts(s, index)
    serving = s.evidence("inference-capacity")
    index = s.group_of(serving.get("group_name")) if serving.get("group_name") else s.serving_group()
    if index is not None and s.open("inference-capacity", "under-quoted", "thin-margin"):
        spare = s.threshold("inference-capacity", "warn_spare_fraction")
        per_node = int(s.group(index).gpu.count.value or 0)
        if per_node and serving.get("gpus_needed"):
            gpus = sizing.capacity_with_spare(serving["gpus_needed"], spare)
            changes += _node_change(s, index, sizing.nodes_for_gpus(gpus, per_node),
                                    f"serving needs {serving['gpus_needed']:,} GPUs and {spare:.0%} spare",
                                    ("inference-capacity",))
    return changes


def model_changes(s: Situation) -> list[Change]:
    """Returns each catalogued server (same GPUs per node) or GPU (same form factor) whose memory per GPU holds
    at least what one GPU needs (the peak, or the leanest sharding's peak, as estimated), when memory is what
    fails; the changed group's price is unknown, so it is left out."""
    changes: list[Change] = []
    for check_id, (rules, need) in _MEMORY_RULES.items():
        if not s.open(check_id, *rules):
            continue
        index = s.serving_group() if check_id.startswith("inference") else s.training_group()
        if index is None or any(c.key.startswith(f"model:{index}:") for c in changes):
            continue
        changes += _models_for(s, index, check_id, s.evidence(check_id).get(need, 0) if need else 0)
    return changes


def _models_for(s: Situation, index: int, check_id: str, need_gib: float) -> list[Change]:
    group = s.group(index)
    gpu = group.gpu
    # The members the submission states (a catalogue fill is not one): what another model's fills replace.
    raw = s.submitted(group.pointer)
    memory, per_node = max(gpu.memory_gib.value or 0, need_gib), gpu.count.value
    unpriced = "the other model's price is not in the quote"
    changes = []
    if group.server_model.value:
        for model in s.catalogue.server_models():
            server = s.catalogue.server(model) or {}
            spec = s.catalogue.gpu(server.get("gpu_model")) or {}
            if server.get("nvlink_domain_gpus") or server.get("gpu_count") != per_node or \
                    (spec.get("memory_gib") or 0) <= memory:
                continue
            removed = [name for name in ("gpu", "cpu", "nics", "pcie_topology", "unit_price", *SERVER_FIELDS)
                       if name in raw]
            edits = ((group.server_model.pointer, model), *((member_pointer(group, name), None) for name in removed))
            changes.append(Change(f"model:{index}:{model}", QUOTE,
                                  f"quote {model} ({per_node} × {server['gpu_model']}, {spec['memory_gib']:g} GiB "
                                  f"each) instead of {group.server_model.value} for {group.name.value}", edits,
                                  (check_id,), None, unpriced))
    elif gpu.model.value:
        form = (s.catalogue.gpu(gpu.model.value) or {}).get("form_factor")
        for model in s.catalogue.gpu_models():
            spec = s.catalogue.gpu(model) or {}
            if spec.get("form_factor") != form or (spec.get("memory_gib") or 0) <= memory:
                continue
            stated = [name for name in GPU_FIELDS if name in (raw.get("gpu") or {})]
            edits = ((gpu.model.pointer, model), *((member_pointer(gpu, name), None) for name in stated),
                     (group.unit_price.pointer, None))
            changes.append(Change(f"model:{index}:{model}", QUOTE,
                                  f"quote {model} ({spec['memory_gib']:g} GiB) instead of {gpu.model.value} in "
                                  f"{group.name.value}", edits, (check_id,), None, unpriced))
    return changes


def storage_changes(s: Situation) -> list[Change]:
    """Returns the quoted storage write bandwidth that saves a checkpoint in time, and the read bandwidth that
    feeds training with the policy's headroom, where the quoted (not a measured) figure is what falls short."""
    changes = []
    saved = s.evidence("checkpoint-bandwidth")
    if s.open("checkpoint-bandwidth", "save-too-slow") and saved.get("save_bound_by") == "storage" and \
            saved.get("storage_write_from") == FigureFrom.QUOTED:
        write = sizing.round_up(sizing.write_gbs_for_save(saved["checkpoint_gb"], saved["max_save_s"],
                                                          saved["write_efficiency"]), _RATE_STEP_GBS)
        changes.append(Change(f"storage:write={write:g}", QUOTE,
                              f"storage that writes {write:g} GB/s instead of {saved['storage_write_gbs']:g}: a "
                              f"{saved['checkpoint_gb']:,.0f} GB checkpoint in {saved['max_save_s']:g} s",
                              ((s.job.cluster.storage.write_gbs.pointer, write),),
                              ("checkpoint-bandwidth", "restart-behavior"), None,
                              "storage bandwidth is not priced in the quote"))
    feed = s.evidence("data-feed")
    if s.open("data-feed", "storage-too-slow", "storage-within-headroom") and \
            feed.get("storage_read_from") == FigureFrom.QUOTED:
        headroom = s.threshold("data-feed", "storage_headroom_fraction")
        read = sizing.round_up(sizing.capacity_with_spare(feed["required_read_gbs"], headroom), _RATE_STEP_GBS)
        changes.append(Change(f"storage:read={read:g}", QUOTE,
                              f"storage that reads {read:g} GB/s instead of {feed['storage_read_gbs']:g}: training "
                              f"reads {feed['required_read_gbs']:.2f} GB/s, plus {headroom:.0%} headroom",
                              ((s.job.cluster.storage.read_gbs.pointer, read),), ("data-feed",), None,
                              "storage bandwidth is not priced in the quote"))
    return changes


def nic_change(s: Situation) -> list[Change]:
    """Returns compute NICs that give each GPU the policy's NICs and Gb/s, when the compute network falls short."""
    index = s.training_group()
    if index is None or not s.open("gpu-nic-topology", "too-little-compute-network"):
        return []
    evidence = s.evidence("gpu-nic-topology")
    # The NICs as resolved (catalogue fills included): the other purposes' lines are kept as they are there.
    nics = s.get(member_pointer(s.group(index), "nics")) or []
    compute = [nic for nic in nics if nic.get("purpose") == "compute"]
    count, gbps = sizing.compute_nics(evidence["gpus_per_node"], s.threshold("gpu-nic-topology",
                                                                             "min_compute_nics_per_gpu"),
                                      s.threshold("gpu-nic-topology", "min_compute_gbps_per_gpu"),
                                      max((nic["gbps"] for nic in compute), default=None))
    nic = {**({"model": compute[0]["model"]} if compute and compute[0].get("model") else {}), "count": count,
           "gbps": gbps, "purpose": "compute"}
    listed = [n for n in nics if n.get("purpose") != "compute"] + [nic]
    return [Change(f"nics:{index}={count}x{gbps:g}", QUOTE,
                   f"{count} compute NICs of {gbps:g} Gb/s per node instead of "
                   f"{evidence['compute_nics_per_node']:g} ({evidence['compute_gbps_per_node']:,.0f} Gb/s)",
                   ((member_pointer(s.group(index), "nics"), listed),), ("gpu-nic-topology", "interconnect-scaling"),
                   None, "NICs are not priced in the quote")]


def host_ram_change(s: Situation) -> list[Change]:
    """Returns the host RAM per node that holds what host-ram sized with its margin (and, for the rule-of-thumb
    warning, the policy's multiple of the node's GPU memory)."""
    index = s.training_group()
    if index is None or not s.open("host-ram"):
        return []
    evidence = s.evidence("host-ram")
    ratio = s.threshold("host-ram", "gpu_memory_ratio_rule_of_thumb") if \
        s.checks["host-ram"]["rule"] == "below-rule-of-thumb" else None
    need = sizing.host_ram_gib(evidence["required_gib"], s.threshold("host-ram", "margin_fraction"),
                               evidence["gpu_memory_per_node_gib"], ratio)
    ram = sizing.round_up(need, _RAM_STEP_GIB)
    if ram <= evidence["host_memory_gib"]:
        return []
    return [Change(f"host_ram:{index}={ram:g}", QUOTE,
                   f"at least {ram:,.0f} GiB of host RAM per node instead of {evidence['host_memory_gib']:,.0f}",
                   ((s.group(index).host_memory_gib.pointer, int(ram)),), ("host-ram",), None,
                   "host RAM is not priced in the quote")]


QUOTE_CHANGES: tuple[Callable[[Situation], list[Change]], ...] = (
    rack_changes, node_count_changes, model_changes, storage_changes, nic_change, host_ram_change)
