"""What-if: a submission evaluated again with its levers moved (a stated MFU, another node count of the training
node group, another completion window), and the value of each lever at which time-to-result stops failing.

Each point is a full evaluation of the changed submission (rules/evaluate.py), so the days, the cost per run and
the verdict are the ones a revision with those values would get. A node count is changed as the remedies change
it (rules/advice/remedy_quote.py): the group's count, the job's GPUs where they were the group's, its racks and the
server line item, so the quote keeps adding up. A stated MFU replaces any stated throughput (``throughput.mfu``
divided by the quoted GPU's dense peak, as the schema defines it).

Where the verdict flips is found by bisection on each lever with the others held: time-to-result's fail is
monotone in each (more MFU, more nodes or a longer window never make the run later against its window), so the
bisection brackets the least value that does not fail to within the lever's resolution. Pure: no I/O.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from rules.advice.remedy_changes import Situation, apply_edits, situation
from rules.advice.remedy_quote import node_count_change
from rules.catalogue import Catalogue
from rules.evaluate import evaluate
from rules.policy import Policy

TIME_TO_RESULT = "time-to-result"
FAIL, INSUFFICIENT_DATA = "fail", "insufficient-data"
PROBE_MFU = 0.4  # the MFU stated to see whether time-to-result lacks more than the throughput
# time-to-result's rules a lever moves across: the run misses its window (less MFU, fewer nodes, a shorter window),
# and a stated MFU that implies more than the GPU's dense peak (rules/checks/time_to_result.py).
MISSES_WINDOW, BEYOND_PEAK = "misses-window", "throughput-beyond-peak"
# The levers' ranges and resolutions: MFU as a fraction of the dense peak, nodes whole, the window in days.
MFU_RANGE, MFU_RESOLUTION = (0.01, 0.95), 0.001
WINDOW_RESOLUTION_DAYS = 0.01
MAX_NODES_FACTOR = 16  # the node search looks up to this multiple of the quoted or needed nodes
# MFU points the chart of days against MFU is drawn at.
CHART_MFUS = (0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.60, 0.65, 0.70)


@dataclass(frozen=True)
class Levers:
    """The values a what-if sets; None keeps the submission's own."""

    mfu: float | None = None
    nodes: int | None = None
    window_days: float | None = None


@dataclass(frozen=True)
class Flip:
    """Where time-to-result stops failing as one lever moves, the others held."""

    lever: str  # "mfu", "nodes" or "window_days"
    value: float | None  # the least value that does not fail; None when no value in range passes
    always: bool  # True when it does not fail anywhere in range (value is the range's low end)
    text: str


def apply_levers(s: Situation, levers: Levers) -> dict[str, Any]:
    """Returns the submission of ``s`` with the levers set; its document is not changed."""
    document = s.document
    changed = copy.deepcopy(document)
    if levers.nodes is not None:
        index = s.training_group()
        change = node_count_change(s, index, levers.nodes) if index is not None else None
        if change is not None:
            changed = apply_edits(changed, change.edits)
    training = changed.get("workload", {}).get("training")
    if training is not None:
        if levers.mfu is not None:
            training["throughput"] = {"mfu": levers.mfu}
        if levers.window_days is not None:
            training["completion_window_days"] = levers.window_days
    return changed


def outcome(record: dict[str, Any]) -> dict[str, Any]:
    """Returns what a what-if shows of an evaluation: verdict, time-to-result's status and days, the cost per run."""
    check = next((c for c in record["checks"] if c["id"] == TIME_TO_RESULT), {})
    e = check.get("evidence", {})
    peak = e.get("modelled_mfu_peak_tflops")
    rate = e.get("tokens_per_s_per_gpu")
    return {"verdict": record["verdict"], "status": check.get("status"), "rule": check.get("rule"),
            "message": check.get("message"), "days": e.get("days"), "days_p50": e.get("days_p50"),
            "days_p90": e.get("days_p90"), "window_days": e.get("window_days"), "gpus": e.get("gpus"),
            "gpus_needed": e.get("gpus_needed"), "tokens_per_s_per_gpu": rate,
            "throughput_from": e.get("throughput_from"), "mfu": e.get("mfu", e.get("modelled_mfu")),
            "mfu_peak_tflops": peak, "quote_total": e.get("quote_total"), "cost_per_run": e.get("cost_per_run"),
            "cost_per_million_tokens": e.get("cost_per_million_tokens"),
            "currency": e.get("cost_currency") or e.get("currency") or None, "cost_problem": e.get("cost_problem"),
            "failing": [c["id"] for c in record["checks"] if c["status"] == FAIL]}


class WhatIf:
    """One submission's what-ifs: evaluations of it with levers set, memoised by lever values."""

    def __init__(self, document: dict[str, Any], policy: Policy, catalogue: Catalogue, now: datetime) -> None:
        self.document, self.policy, self.catalogue, self.now = document, policy, catalogue, now
        self.record = self._evaluate(document)
        # the submission as submitted, read once for the node lever (its job parsed, its checks as evaluated)
        self.situation = situation(document, self.record, policy, catalogue)
        self._seen: dict[Levers, dict[str, Any]] = {Levers(): outcome(self.record)}
        self.evaluations = 1

    def _evaluate(self, document: dict[str, Any]) -> dict[str, Any]:
        return evaluate(document, self.policy, catalogue=self.catalogue, now=self.now)

    def at(self, levers: Levers) -> dict[str, Any]:
        """Returns the outcome of the submission with ``levers`` set."""
        if levers not in self._seen:
            changed = apply_levers(self.situation, levers)
            self._seen[levers] = outcome(self._evaluate(changed))
            self.evaluations += 1
        return self._seen[levers]

    def misses(self, levers: Levers) -> bool:
        """Whether time-to-result fails because the run misses its window."""
        return self.at(levers)["rule"] == MISSES_WINDOW

    def beyond_peak(self, levers: Levers) -> bool:
        """Whether time-to-result fails because the stated MFU implies more than the GPU's dense peak."""
        return self.at(levers)["rule"] == BEYOND_PEAK

    def flips(self, levers: Levers) -> list[Flip]:
        """Returns, for each lever, where time-to-result stops failing with the other levers as ``levers`` has them."""
        current = self.at(levers)
        # A stated MFU supplies the throughput; anything else time-to-result lacks, no lever supplies.
        probe = self.at(replace(levers, mfu=levers.mfu if levers.mfu is not None else PROBE_MFU))
        if probe["status"] == INSUFFICIENT_DATA:
            return [Flip("none", None, False, "time-to-result cannot be decided whatever the levers: "
                                              f"{probe['message']}")]
        flips = [self._mfu_flip(levers)]
        nodes = self._nodes_flip(levers, current)
        if nodes is not None:
            flips.append(nodes)
        if current.get("days") is not None:
            flips.append(self._window_flip(levers, current))
        return flips

    def _mfu_flip(self, levers: Levers) -> Flip:
        low, high = MFU_RANGE
        value, always = _least_passing(lambda x: self.misses(replace(levers, mfu=round(x, 4))), low, high,
                                       MFU_RESOLUTION)
        ceiling, _ = _least_passing(lambda x: not self.beyond_peak(replace(levers, mfu=round(x, 4))), low, high,
                                    MFU_RESOLUTION)
        if value is None:
            text = f"time-to-result fails at every MFU up to {high:.0%}"
        elif always:
            text = f"time-to-result does not miss the window at any MFU from {low:.0%}"
        else:
            text = f"time-to-result fails below MFU {value:.1%} (the run misses its window)"
        if ceiling is not None:
            text += (f"{' and' if value is not None and not always else ';'} fails from MFU {ceiling:.1%} "
                     "(more than the GPU's dense peak once recomputation is counted)")
        return Flip("mfu", value, always, text)

    def training_nodes(self) -> tuple[int, int] | None:
        """Returns the node count and GPUs per node of the training node group as submitted, or None."""
        s = self.situation
        group = s.training_group()
        if group is None:
            return None
        return int(s.group(group).count.value), int(s.group(group).gpu.count.value or 1)

    def _nodes_flip(self, levers: Levers, current: dict[str, Any]) -> Flip | None:
        quoted = self.training_nodes()
        if quoted is None:
            return None
        nodes_now, per_node = quoted
        needed = -(-int(current.get("gpus_needed") or per_node) // per_node)
        high = MAX_NODES_FACTOR * max(nodes_now, levers.nodes or 1, needed)
        found = _least_passing(lambda n: self.misses(replace(levers, nodes=int(n))), 1, high, 1, whole=True)
        return _flip("nodes", found, never=f"time-to-result fails on every node count up to {high:,}",
                     anywhere="time-to-result does not miss the window on any node count",
                     below=lambda v: f"time-to-result fails below {int(v):,} nodes")

    def _window_flip(self, levers: Levers, current: dict[str, Any]) -> Flip:
        high = max(current.get("days_p90") or 0.0, current.get("days") or 0.0) * 4 + 1
        found = _least_passing(lambda w: self.misses(replace(levers, window_days=round(w, 2))),
                               WINDOW_RESOLUTION_DAYS, high, WINDOW_RESOLUTION_DAYS)
        return _flip("window_days", found, never=f"time-to-result fails with any window up to {high:,.0f} days",
                     anywhere="time-to-result does not miss the window with any window",
                     below=lambda v: f"time-to-result fails with a window shorter than {math.ceil(v * 10) / 10:,.1f} "
                                     "days")

    def curve(self, levers: Levers) -> list[dict[str, Any]]:
        """Returns the days (expected, p50, p90) and status at each of CHART_MFUS, the other levers held."""
        return [{"mfu": mfu, **self.at(replace(levers, mfu=mfu))} for mfu in CHART_MFUS]


def _flip(lever: str, found: tuple[float | None, bool], *, never: str, anywhere: str,
          below: Callable[[float], str]) -> Flip:
    """Returns the Flip of ``lever`` from what _least_passing found, worded by the case."""
    value, always = found
    return Flip(lever, value, always, never if value is None else anywhere if always else below(value))


def _least_passing(fails: Callable[[float], bool], low: float, high: float, resolution: float, *,
                   whole: bool = False) -> tuple[float | None, bool]:
    """Returns (the least value in [low, high] at which ``fails`` is False, whether it is ``low``), to within
    ``resolution``; (None, False) when it fails at ``high``. ``fails`` must be monotone (True below, False above)."""
    if fails(high):
        return None, False
    if not fails(low):
        return low, True
    while high - low > resolution:
        middle = (low + high) // 2 if whole else (low + high) / 2
        if middle in (low, high):
            break
        if fails(middle):
            low = middle
        else:
            high = middle
    return high, False
