"""As built: an approved record's checks beside the same submission re-decided on the acceptance measurements.

After delivery the acceptance tests measure what the record estimated. ``compare`` pairs every check of the
approved record with its as-built result (the engine's decision on the approved submission with the
measurements merged in) and, for each estimator a measurement replaced, puts the estimate and the measured
figure side by side with their ratio measured / estimated. ``calibration`` summarises those ratios across
addenda per estimator: how many, the median, and the worst (furthest from 1). Pure: no I/O, no Flask.

An estimator is named by the evidence figure it produces (``peak-memory total_gib``). Each ``Figure`` says
where its estimate is read (the approved record's evidence, or the as-built evidence where a check reports
the estimate at exactly the measured point) and when the as-built evidence holds a measurement of it: by the
name of a member the check writes only from a measurement (``measured_gpus``, ``measured_node_busbw_gbs``), or
by a named origin the check writes and this module reads from one place (rules.status.FigureFrom,
``storage_write_from: "measured"``), never by the wording of a message.
"""

from __future__ import annotations

import statistics
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rules.advice.compare import merge_patch
from rules.checks import CHECKS
from rules.estimates.communication.interconnect import MEASURED_BOUND
from rules.status import FigureFrom, Status

# Evidence by check id, as a record's checks carry it.
Evidence = Mapping[str, Mapping[str, Any]]

RECORD, AS_BUILT = "record", "as-built"
ABOVE, BELOW = "above", "below"
# What an estimate on the wrong side of its measurement means for the plan, by the side that is optimistic.
OPTIMISTIC_WORDS = {ABOVE: "measured above the estimate", BELOW: "measured below the estimate"}


def _any(_: Any) -> bool:
    return True


def _is(expected: str) -> Callable[[Any], bool]:
    return lambda value: value == expected


def _is_not(unwanted: str) -> Callable[[Any], bool]:
    return lambda value: value != unwanted


def _present(value: Any) -> bool:
    return value is not None


def _absent(value: Any) -> bool:
    return value is None


@dataclass(frozen=True)
class Reading:
    """Where a figure is read: a check's evidence member, taken only when the ``marker`` member passes ``accepts``."""

    check_id: str
    key: str
    marker: str | None = None
    accepts: Callable[[Any], bool] = _any

    def read(self, evidence: Evidence) -> float | None:
        """Returns the figure as a positive number, or None where the evidence lacks it or is of another kind."""
        found = evidence.get(self.check_id) or {}
        if self.marker is not None and not self.accepts(found.get(self.marker)):
            return None
        value = found.get(self.key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            return None
        return float(value)


@dataclass(frozen=True)
class Figure:
    """An estimator named by its evidence figure: where its estimate and its measurement are read."""

    check_id: str
    name: str
    unit: str
    measurement: str  # the member of measurements that measures it (JSON Pointer into the submission)
    optimistic_when: str  # ABOVE: a measurement above the estimate means the plan assumed too little
    estimate: Reading
    estimate_from: str  # RECORD: the approved record's evidence; AS_BUILT: the as-built evidence
    measured: Reading  # always read from the as-built evidence
    # Other members that measure it: the raw tool output that replaces the retyped figure (rules/artifacts.py)
    also: tuple[str, ...] = ()

    @property
    def estimator(self) -> str:
        return f"{self.check_id} {self.name}"


PEAK_MEMORY, SCALING, CHECKPOINT, DATA_FEED = "peak-memory", "interconnect-scaling", "checkpoint-bandwidth", "data-feed"
RACK_POWER, RESTART, TIME_TO_RESULT, SERVING = "rack-power", "restart-behavior", "time-to-result", "inference-capacity"
# interconnect-scaling writes measured_gpus only when measured scaling points decide it, and
# measured_node_busbw_gbs only when a single-node nccl-tests run gives the intra-node busbw.
SCALING_MEASURED, NODE_BUSBW_MEASURED = "measured_gpus", "measured_node_busbw_gbs"

FIGURES: tuple[Figure, ...] = (
    # The estimate at the micro-batch the measurement ran (peak-memory reports both when a run matches).
    Figure(PEAK_MEMORY, "total_gib", "GiB", "/measurements/peak_memory", ABOVE,
           Reading(PEAK_MEMORY, "estimated_total_gib"), AS_BUILT, Reading(PEAK_MEMORY, "measured_total_gib")),
    Figure(SCALING, "efficiency", "fraction", "/measurements/scaling", BELOW,
           Reading(SCALING, "efficiency", SCALING_MEASURED, _absent), RECORD,
           Reading(SCALING, "efficiency", SCALING_MEASURED, _present), ("/measurements/scaling_csv",)),
    Figure(SCALING, "node_busbw_gbs", "GB/s", "/measurements/nccl_tests", BELOW,
           Reading(SCALING, "node_busbw_gbs", NODE_BUSBW_MEASURED, _absent), RECORD,
           Reading(SCALING, "node_busbw_gbs", NODE_BUSBW_MEASURED, _present)),
    Figure(SCALING, "cluster_busbw_gbs", "GB/s", "/measurements/nccl_tests", BELOW,
           Reading(SCALING, "cluster_busbw_gbs", "busbw_bound_by", _is_not(MEASURED_BOUND)), RECORD,
           Reading(SCALING, "cluster_busbw_gbs", "busbw_bound_by", _is(MEASURED_BOUND))),
    Figure(CHECKPOINT, "write_gbs", "GB/s", "/measurements/storage/write_gbs", BELOW,
           Reading(CHECKPOINT, "write_gbs", "storage_write_from", _is(FigureFrom.QUOTED)), RECORD,
           Reading(CHECKPOINT, "write_gbs", "storage_write_from", _is(FigureFrom.MEASURED)), ("/measurements/fio",)),
    Figure(DATA_FEED, "storage_read_gbs", "GB/s", "/measurements/storage/read_gbs", BELOW,
           Reading(DATA_FEED, "storage_read_gbs", "storage_read_from", _is(FigureFrom.QUOTED)), RECORD,
           Reading(DATA_FEED, "storage_read_gbs", "storage_read_from", _is(FigureFrom.MEASURED))),
    Figure(RACK_POWER, "site_kw", "kW", "/measurements/power", ABOVE,
           Reading(RACK_POWER, "site_kw", "draw_basis", _is(FigureFrom.NAMEPLATE_MAXIMUM)), RECORD,
           Reading(RACK_POWER, "site_kw", "draw_basis", _is(FigureFrom.MEASURED_SUSTAINED_DRAW)),
           ("/measurements/power_csv",)),
    Figure(RESTART, "restart_min", "min", "/measurements/restore_test", ABOVE,
           Reading(RESTART, "restart_min", "restart_from", _is_not(FigureFrom.RESTORE_TEST)), RECORD,
           Reading(RESTART, "restart_min", "restart_from", _is(FigureFrom.RESTORE_TEST))),
    # The per-GPU rate the schedule assumed, against the rate measured at the smallest scaling point, where
    # data-parallel communication costs least (the scaling efficiency is its own figure above).
    Figure(TIME_TO_RESULT, "tokens_per_s_per_gpu", "tokens/s", "/measurements/scaling", BELOW,
           Reading(TIME_TO_RESULT, "tokens_per_s_per_gpu"), RECORD,
           Reading(SCALING, "tokens_per_s_per_gpu_at_base", SCALING_MEASURED, _present),
           ("/measurements/scaling_csv",)),
    # The roofline at the measured batch (inference-capacity reports both where measured latencies decide).
    Figure(SERVING, "ttft_ms", "ms", "/measurements/serving_latency", ABOVE,
           Reading(SERVING, "modelled_ttft_ms"), AS_BUILT, Reading(SERVING, "measured_ttft_ms")),
    Figure(SERVING, "tpot_ms", "ms", "/measurements/serving_latency", ABOVE,
           Reading(SERVING, "modelled_tpot_ms"), AS_BUILT, Reading(SERVING, "measured_tpot_ms")),
)
ESTIMATORS = {figure.estimator: figure for figure in FIGURES}


def merged_submission(document: dict[str, Any], measurements: dict[str, Any]) -> dict[str, Any]:
    """Returns the submission with ``measurements`` merged into its own (RFC 7396): each member given replaces
    the submitted one (an object such as ``storage`` merges member by member, an array is replaced whole)."""
    return merge_patch(document, {"measurements": measurements})


def ratio(estimated: float, measured: float) -> float:
    """Returns measured / estimated: above 1 when the measurement exceeds the estimate."""
    return measured / estimated


def is_optimistic(figure: Figure, estimated: float, measured: float) -> bool:
    """Returns True when the measurement lies on the side of the estimate that the plan could not afford."""
    return measured > estimated if figure.optimistic_when == ABOVE else measured < estimated


def _evidence(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["id"]: check.get("evidence") or {} for check in record.get("checks") or []}


def _sources(evidence: Evidence, check_id: str, measurements: tuple[str, ...]) -> list[str]:
    """Returns the inputs under ``measurements`` that the as-built check read (where the measured figure came from)."""
    inputs = (evidence.get(check_id) or {}).get("inputs") or []
    return [pointer for pointer in inputs
            if any(pointer == member or pointer.startswith(member + "/") for member in measurements)]


def estimates(record: dict[str, Any], as_built: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns, for each estimator that both evaluations give a figure of, the estimate beside the measurement."""
    original, measured_evidence = _evidence(record), _evidence(as_built)
    pairs = []
    for figure in FIGURES:
        estimated = figure.estimate.read(original if figure.estimate_from == RECORD else measured_evidence)
        measured = figure.measured.read(measured_evidence)
        if estimated is None or measured is None:
            continue
        pairs.append({"estimator": figure.estimator, "check_id": figure.check_id, "figure": figure.name,
                      "unit": figure.unit, "estimated": estimated, "measured": measured,
                      "ratio": ratio(estimated, measured), "estimate_from": figure.estimate_from,
                      "optimistic": is_optimistic(figure, estimated, measured),
                      "optimistic_when": OPTIMISTIC_WORDS[figure.optimistic_when],
                      "measured_from": _sources(measured_evidence, figure.measured.check_id,
                                                (figure.measurement, *figure.also))
                      or [figure.measurement]})
    return pairs


_HEADLINES = {check.id: check.headline for check in CHECKS}


def deciding_figures(check: dict[str, Any]) -> dict[str, Any]:
    """Returns the evidence figures the check's headline names (its deciding figures), those the evidence holds."""
    template = _HEADLINES.get(check.get("id", ""), "")
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    evidence = check.get("evidence") or {}
    return {name: evidence[name] for name in dict.fromkeys(names) if name in evidence}


def _side(check: dict[str, Any]) -> dict[str, Any]:
    return {"status": check["status"], "basis": check["basis"], "rule": check["rule"],
            "figures": deciding_figures(check)}


def compare_checks(record: dict[str, Any], as_built: dict[str, Any]) -> list[dict[str, Any]]:
    """Returns each check of the approved record beside its as-built result, in the record's order.

    ``original.status`` is the record's (``waived`` for a waived check) and ``original.evaluated_status`` the
    engine's; ``changed`` compares the engine's decisions (waivers bind to the estimated result, not to this one).
    """
    decided = {check["id"]: check for check in as_built["checks"]}
    rows = []
    for check in record["checks"]:
        after = decided.get(check["id"])
        if after is None:  # a check the engine no longer has: the record's result stands alone
            continue
        evaluated = check.get("original_status", check["status"])
        before = {**_side(check), "evaluated_status": evaluated}
        rows.append({"id": check["id"], "title": check["title"], "original": before,
                     "as_built": {**_side(after), "message": after["message"], "evidence": after["evidence"]},
                     "changed": after["status"] != evaluated, "measured": after["basis"] == "measured"})
    return rows


def compare(record: dict[str, Any], as_built: dict[str, Any]) -> dict[str, Any]:
    """Returns the as-built comparison of an approved record: checks side by side, estimates against measurements."""
    checks = compare_checks(record, as_built)
    statuses = [row["as_built"]["status"] for row in checks]
    return {
        "verdict": as_built["verdict"],
        "summary": {s.value: statuses.count(s.value) for s in Status if s is not Status.WAIVED},
        "changes": [{"check_id": row["id"], "from": row["original"]["evaluated_status"],
                     "to": row["as_built"]["status"]} for row in checks if row["changed"]],
        "measured_checks": [row["id"] for row in checks if row["measured"]],
        "checks": checks,
        "estimates": estimates(record, as_built),
    }


def _worst(ratios: list[float]) -> float:
    """Returns the ratio furthest from 1 on a logarithmic reading (0.5 and 2.0 are equally far)."""
    return max(ratios, key=lambda r: max(r, 1 / r))


def calibration(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Returns per estimator (every one of FIGURES, in order) its count, median and worst ratio measured/estimated.

    ``points`` are the stored pairs (``estimator``, ``ratio``, ``optimistic``); an estimator without any has
    count 0 and null figures. Worst is furthest from 1 by ratio or its inverse, so an estimate half the
    measurement and one twice it weigh alike.
    """
    by_estimator: dict[str, list[Mapping[str, Any]]] = {name: [] for name in ESTIMATORS}
    for point in points:
        by_estimator.setdefault(point["estimator"], []).append(point)
    rows = []
    for name, found in by_estimator.items():
        figure = ESTIMATORS.get(name)
        ratios = [float(p["ratio"]) for p in found]
        rows.append({"estimator": name, "check_id": figure.check_id if figure else name.partition(" ")[0],
                     "figure": figure.name if figure else name.partition(" ")[2],
                     "unit": figure.unit if figure else None,
                     "optimistic_when": OPTIMISTIC_WORDS[figure.optimistic_when] if figure else None,
                     "count": len(ratios),
                     "median_ratio": statistics.median(ratios) if ratios else None,
                     "worst_ratio": _worst(ratios) if ratios else None,
                     "optimistic_count": sum(1 for p in found if p.get("optimistic"))})
    return rows
