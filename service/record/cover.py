"""The record PDF's first page: the summary a procurement officer takes in at a glance.

Both verdicts, one line per check (its status as a word and its deciding figure), the three headline figures
(days to result against the completion window, peak memory per GPU against capacity, the worst rack's draw
against its limit), the waived checks with the start of their justifications, and who decided when. Each text
is cut to a line or two here (``glimpse``); the pages after the cover show it as the record bounds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from service.record.free_text import glimpse, text_width_em
from service.record.listing import display_number

# Widths in em of the font size they are set in (templates/record.css, the summary's tables at 8 pt): a text
# cut to its width stays on one line, so the summary of 14 checks with 14 waivers still fits one page.
# The third column of the summary's tables: 180 mm less the first two (37 and 30 mm) and the padding of all
# three (2.4 mm each) is 105.8 mm, 37.5 em at 8 pt; less a margin for the estimate.
FIGURE_EM = 36.5
NAME_EM = 12.0  # who waived or decided
LINE_EM = 56.0  # a decision's line: 180 mm is 60 em at 8.5 pt
NAME_CHARS = 60  # the vendor and the quote id, on the identity line
COVER_DECISIONS = 3  # the latest decisions; the details list every one
RECORDED = ("pass", "warn", "fail")  # the statuses of a check that decided on its figures


def _n(value: Any) -> str:
    return display_number(value)


def _time_to_result(e: Mapping[str, Any]) -> str:
    without = f" ({_n(e['compute_days'])} without failures)" if e.get("compute_days") is not None else ""
    return f"{_n(e['days'])} days expected{without} of the {_n(e['window_days'])}-day window"


def _serving_latency(e: Mapping[str, Any]) -> str:
    return (f"TTFT {_n(e['ttft_ms'])} ms of {_n(e['ttft_slo_ms'])} ms, TPOT {_n(e['tpot_ms'])} ms of "
            f"{_n(e['tpot_slo_ms'])} ms (p95 SLO); {_n(e.get('gpus_needed'))} of {_n(e.get('gpus_quoted'))} GPUs "
            "needed")


def _peak_memory(e: Mapping[str, Any]) -> str:
    return (f"{_n(e['total_gib'])} GiB needed of {_n(e['usable_gib'])} GiB usable "
            f"({_n(e['capacity_gib'])} GiB capacity)")


def _serving_memory(e: Mapping[str, Any]) -> str:
    return (f"{_n(e['weights_gib_per_gpu'])} GiB weights + {_n(e['kv_cache_gib'])} GiB KV cache per GPU of "
            f"{_n(e['usable_gib'])} GiB usable ({_n(e['capacity_gib'])} GiB capacity)")


def _rack_power(e: Mapping[str, Any]) -> str:
    return (f"{_n(e['worst_draw_kw'])} kW of {_n(e['worst_limit_kw'])} kW ({e.get('worst_binding') or 'limit'}) "
            f"in rack {e.get('worst_rack')}; site {_n(e.get('site_kw'))} kW")


# (label, [(check id, evidence it needs, its text)], in order of preference: the training figure, else the
# serving equivalent).
Figure = tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], str]]
HEADLINES: tuple[tuple[str, tuple[Figure, ...]], ...] = (
    ("Days to result", (("Days to result", ("days", "window_days"), _time_to_result),
                        ("Serving latency", ("ttft_ms", "ttft_slo_ms", "tpot_ms", "tpot_slo_ms"),
                         _serving_latency))),
    ("Peak memory per GPU", (("Peak memory per GPU", ("total_gib", "usable_gib", "capacity_gib"), _peak_memory),
                             ("Serving memory", ("weights_gib_per_gpu", "kv_cache_gib", "usable_gib",
                                                         "capacity_gib"), _serving_memory))),
    ("Worst rack power", (("Worst rack power", ("worst_draw_kw", "worst_limit_kw"), _rack_power),)),
)
HEADLINE_CHECKS = {"Days to result": "time-to-result", "Serving latency": "inference-capacity",
                   "Peak memory per GPU": "peak-memory", "Serving memory": "inference-memory",
                   "Worst rack power": "rack-power"}


def _status(check: Mapping[str, Any]) -> dict[str, Any]:
    return {"status": check["status"], "original_status": check.get("original_status")}


def headline_figures(checks: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Returns the three headline figures: label, text, the deciding check's id and status.

    Each is the training figure when its check decided on figures, else the serving equivalent, else
    "not applicable" (no workload it applies to) or the check's message (what it lacks).
    """
    by_id = {check["id"]: check for check in checks}
    rows = []
    for default_label, choices in HEADLINES:
        row = None
        for label, needs, text in choices:
            check = by_id.get(HEADLINE_CHECKS[label])
            evidence = (check or {}).get("evidence") or {}
            status = (check or {}).get("original_status") or (check or {}).get("status")
            if check is not None and status in RECORDED and all(evidence.get(n) is not None for n in needs):
                row = {"label": label, "text": one_line(text(evidence), FIGURE_EM), "check_id": check["id"],
                       **_status(check)}
                break
        if row is None:
            check = by_id.get(HEADLINE_CHECKS[default_label]) or {"id": HEADLINE_CHECKS[default_label],
                                                                  "status": "not-applicable", "message": ""}
            text = ("not applicable: " + check["message"] if check["status"] == "not-applicable"
                    else check["message"])
            row = {"label": default_label, "text": one_line(text, FIGURE_EM), "check_id": check["id"],
                   **_status(check)}
        rows.append(row)
    return rows


def cover_checks(checks: list[Mapping[str, Any]], figures: Mapping[str, str]) -> list[dict[str, Any]]:
    """Returns one line per check: its id, status (and the status it had when waived) and deciding figure."""
    return [{"id": check["id"], **_status(check), "figure": one_line(figures[check["id"]], FIGURE_EM)}
            for check in checks]


def cover_waivers(waivers: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Returns each waiver as the cover shows it: check, status it had, the start of its justification, by, at."""
    rows = []
    for waiver in waivers:
        actor = one_line(str(waiver.get("actor") or ""), NAME_EM)
        rows.append({"check_id": waiver.get("check_id"), "status": waiver.get("status"), "actor": actor,
                     "justification": one_line(str(waiver.get("justification") or ""),
                                               FIGURE_EM - text_width_em(f" — {actor}"))})
    return rows


def cover_decisions(decisions: list[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Returns the latest decisions as the cover shows them (action, by, role, at, comment start) and how many
    earlier ones the details list besides."""
    rows = []
    for decision in decisions[-COVER_DECISIONS:]:
        actor = one_line(str(decision.get("actor") or ""), NAME_EM)
        line = f"{decided(str(decision.get('action')))} by {actor} ({decision.get('role')}) on {decision.get('at')}: “”"
        rows.append({"action": decision.get("action"), "actor": actor, "role": decision.get("role"),
                     "at": decision.get("at"),
                     "comment": one_line(str(decision.get("comment") or ""), LINE_EM - text_width_em(line))})
    return rows, len(decisions) - len(rows)


def one_line(text: str, width_em: float) -> str:
    """Returns the start of ``text`` that is at most ``width_em`` wide (``glimpse``: cut at a word, an ellipsis)."""
    shown = glimpse(text, len(text) + 1)
    if text_width_em(shown) <= width_em:
        return shown
    low, high = 1, len(shown)
    while low < high:  # the most characters whose glimpse fits
        middle = (low + high + 1) // 2
        if text_width_em(glimpse(shown, middle)) <= width_em:
            low = middle
        else:
            high = middle - 1
    return glimpse(shown, low)


DECIDED = {"approve": "approved", "reject": "rejected", "request-changes": "changes requested"}


def decided(action: str) -> str:
    """Returns a decision's action as the cover's sentence says it ("approved by …")."""
    return DECIDED.get(action, str(action))


# The lead: what the buyer asks first, at the top of page 1 and of the quote page. Each figure is read from the
# evidence of the check that computed it (time-to-result prices the run; inference-capacity sizes a serving-only
# quote); a figure the evidence lacks is said, never left blank.
NOT_PRICED = "not priced"
NOT_APPLICABLE = "not applicable"
NOT_DETERMINED = "not determined"  # the check applies but lacked what it needs
LEAD_EM = 44.0  # the value column: 180 mm less the 40 mm label column and padding is 46 em at 8.5 pt; less a margin
EVERY_CHECK_PASSES = "every check passes"


def _money(currency: Any, amount: Any) -> str:
    return f"{currency or ''} {_n(amount)}".strip()


def _priced(evidence: Mapping[str, Any], amount: str, currency: str, unpriced: str) -> str:
    """Returns an amount with its currency, else ``unpriced`` (why the evidence holds none)."""
    if evidence.get(amount) is None:
        return unpriced
    return _money(evidence.get(currency), evidence[amount])


def days_range(evidence: Mapping[str, Any]) -> tuple[Any, Any, str] | None:
    """Returns the days range of a run and what it is: the fast and slow ends of the modelled rate's band
    (``days_range``) where the run is at the modelled rate, else the 50th to 99th percentile of the seeded
    simulated runs (``days_p50``, ``days_p99``); None where the evidence holds neither."""
    if evidence.get("days_range"):
        fast, slow = evidence["days_range"]
        return fast, slow, "modelled band"
    if evidence.get("days_p50") is not None and evidence.get("days_p99") is not None:
        return evidence["days_p50"], evidence["days_p99"], "p50 to p99 simulated"
    return None


def _days(training: Mapping[str, Any], why: str) -> tuple[str, str]:
    """Returns the days expected against the window, and their range, as the lead says them."""
    e = training.get("evidence") or {}
    if e.get("days") is None or e.get("window_days") is None:
        word = NOT_APPLICABLE if training["status"] == "not-applicable" else NOT_DETERMINED
        said = f"{word}: {why}" if why else word
        return said, said
    band = days_range(e)
    spread = f"{_n(band[0])} to {_n(band[1])} days ({band[2]})" if band else NOT_APPLICABLE
    return f"{_n(e['days'])} days expected against the {_n(e['window_days'])}-day window", spread


def gpus_needed_text(needed: Any, quoted: Any, reason: Any = None) -> str:
    """Returns "N GPUs needed of M quoted", or why no count is needed, with the quoted count."""
    if needed is None:
        return f"GPUs needed not determined{': ' + str(reason) if reason else ''}; {_n(quoted)} quoted"
    return f"{_n(needed)} GPUs needed of {_n(quoted)} quoted"


def _finding(checks: list[Mapping[str, Any]], figures: Mapping[str, str]) -> dict[str, Any]:
    for status in ("fail", "warn"):
        for check in checks:
            if (check.get("original_status") or check["status"]) == status:
                waived = " (waived)" if check.get("original_status") else ""
                text = f"{status.upper()}{waived} {check['id']}: {figures.get(check['id']) or check.get('message')}"
                return {"status": status, "check_id": check["id"], "text": one_line(text, LEAD_EM)}
    return {"status": "pass", "check_id": None, "text": EVERY_CHECK_PASSES}


def lead(verdict: str, checks: list[Mapping[str, Any]], figures: Mapping[str, str]) -> dict[str, Any]:
    """Returns the lead block: the verdict and, as (label, text) rows, the quote total, cost per run, cost per
    million tokens, days expected and their range against the window, GPUs needed against quoted, and the finding
    that matters most (the first failing check's deciding figure, else the first warning's, else that every check
    passes). ``figures`` holds each check's deciding figure by id.

    A serving-only quote takes its GPUs and its cost per million tokens from inference-capacity; a figure neither
    check gives is "not priced" (with the check's reason) or "not applicable" (with why).
    """
    by_id = {check["id"]: check for check in checks}
    training = by_id.get("time-to-result") or {"status": "not-applicable", "message": "no time-to-result check"}
    serving = by_id.get("inference-capacity") or {}
    t, s = training.get("evidence") or {}, serving.get("evidence") or {}
    trains = training["status"] != "not-applicable"
    why = str(training.get("message") or "")
    if not trains:
        unpriced = f"{NOT_APPLICABLE}: {why}" if why else NOT_APPLICABLE
    else:
        unpriced = f"{NOT_PRICED}: {t['cost_problem']}" if t.get("cost_problem") else NOT_PRICED
    days, spread = _days(training, why)
    if t.get("cost_per_million_tokens") is None and s.get("cost_per_million_tokens_served") is not None:
        per_million = _money(s.get("cost_currency"), s["cost_per_million_tokens_served"]) + " (output tokens served)"
    else:
        per_million = _priced(t, "cost_per_million_tokens", "cost_currency", unpriced)
    if t.get("gpus") is not None:
        gpus = gpus_needed_text(t.get("gpus_needed"), t["gpus"], t.get("gpus_needed_reason"))
    elif s.get("gpus_quoted") is not None:
        gpus = gpus_needed_text(s.get("gpus_needed"), s["gpus_quoted"]) + " (serving)"
    else:
        word = NOT_DETERMINED if trains else NOT_APPLICABLE
        gpus = f"{word}: {why}" if why else word
    finding = _finding(checks, figures)
    rows = [("Quote total", _priced(t, "quote_total", "currency", unpriced)),
            ("Cost per run", _priced(t, "cost_per_run", "cost_currency", unpriced)),
            ("Cost per million tokens", per_million),
            ("Days to result", days),
            ("Days range", spread),
            ("GPUs", gpus),
            ("Top finding", finding["text"])]
    return {"verdict": verdict, "rows": [{"label": label, "text": one_line(text, LEAD_EM)} for label, text in rows],
            "finding": finding}
