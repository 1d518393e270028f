"""The decision of a comparison of quotes: which quotes it ranks, in what order, the soonest and the cheapest of them.

A quote is ranked only when its checks at the layout compared pass: no check fails or lacks data
(``insufficient-data``) other than those an active waiver covers. The waivers are the stored submission's, active
when the comparison is asked for, and a waiver covers its check by id: it was written for the check's result at the
submitted layout, and the reviewer who wrote it accepted that check's outcome for the quote. A warning does not stop
a quote. A quote that does not pass is listed apart (``not_ranked``) with the checks that stop it, each with its
one-line message; an evaluation that decided nothing stops its quote too (quotecheck fails closed).

The quotes that pass are ranked as every quote is (:func:`rank_key`): modelled days to result (the simulated
median, then the 90th percentile, where evaluated; the expected days otherwise), then the quote total, then the
submission id, so that equal quotes keep one order. The soonest that passes is the first of them whose days are
known. The cheapest that passes has the lowest cost per run (time-to-result's ``cost_per_run``: the full cost of
owning the quote for the run's expected days, in the quote's currency); on equal cost per run, the sooner (its
rank). Costs in different currencies are not set against each other: with passing quotes priced in more than one
currency, none is named cheapest and ``cheapest_note`` says why.
Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from rules.evaluate import verdict_of
from rules.status import Status

# The statuses that stop a quote unless a waiver covers them.
BLOCKING = (Status.FAIL.value, Status.INSUFFICIENT_DATA.value)
RANKED_BY = ["days_p50", "days_p90", "quote_total"]
CHEAPEST_BY = ["cost_per_run", "rank"]
NOTHING_DECIDED = "no check was decided at the layout compared: an evaluation that decides nothing fails"
# What the soonest and the cheapest are named by.
_SUMMARY = ("name", "vendor", "quote_id", "rank", "days", "days_p50", "days_p90", "currency", "quote_total",
            "cost_per_run", "cost_per_million_tokens")


def decision(checks: list[dict[str, Any]], waived: Collection[str]) -> dict[str, Any]:
    """Returns whether a quote whose evaluation has ``checks`` passes once the checks ``waived`` (ids) are.

    ``verdict_after_waivers``; ``passes``; ``stopped_by``: ``{id, status, message}`` of each failed or
    incomplete check no waiver covers; ``waived_checks``: the ids of those a waiver covers.
    """
    open_checks = [check for check in checks if check["status"] in BLOCKING]
    stopped = [{"id": c["id"], "status": c["status"], "message": c.get("message") or ""}
               for c in open_checks if c["id"] not in waived]
    statuses = [Status.WAIVED.value if c["status"] in BLOCKING and c["id"] in waived else c["status"] for c in checks]
    verdict = verdict_of(statuses)
    if verdict in (Status.FAIL.value, "incomplete") and not stopped:
        stopped = [{"id": None, "status": Status.FAIL.value, "message": NOTHING_DECIDED}]
    return {"verdict_after_waivers": verdict, "passes": not stopped, "stopped_by": stopped,
            "waived_checks": [c["id"] for c in open_checks if c["id"] in waived]}


def _known(value: Any) -> float:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else math.inf


def rank_key(row: dict[str, Any]) -> tuple[float, float, float]:
    """Returns what a row ranks by: days p50 (else expected days), days p90 (else expected days), quote total;
    an unknown figure ranks after every known one."""
    days = _known(row["days"])
    return (_known(row["days_p50"]) if row["days_p50"] is not None else days,
            _known(row["days_p90"]) if row["days_p90"] is not None else days, _known(row["quote_total"]))


def _summary(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if row is None else {name: row.get(name) for name in _SUMMARY}


def _cheapest(ranked: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None]:
    """Returns the ranked row of the lowest cost per run (the sooner on a tie), or None and why none is named."""
    if not ranked:
        return None, "no quote passes its checks"
    priced = [row for row in ranked if row.get("cost_per_run") is not None]
    if not priced:
        return None, "no quote that passes has a cost per run (its evaluation gives none: see its cost note)"
    currencies = sorted({row.get("currency") or "(none stated)" for row in priced})
    if len(currencies) > 1:
        return None, (f"the quotes that pass price their runs in different currencies ({', '.join(currencies)}): "
                      "their costs per run are not set against each other")
    return min(priced, key=lambda row: (row["cost_per_run"], row["rank"])), None


def decide(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns the comparison's decision over quote rows that carry ``passes`` (see :func:`decision`).

    ``passing``: the rows that pass, ranked (``rank`` 1 soonest); ``not_ranked``: the others (``rank`` null), in
    the same order; ``soonest`` and ``cheapest``: who they are and their deciding figures, or null;
    ``cheapest_note``: why no quote is named cheapest (null when one is).
    """
    order = sorted(rows, key=lambda row: (*rank_key(row), row["name"]))
    passing = [{**row, "rank": rank} for rank, row in enumerate((r for r in order if r["passes"]), start=1)]
    not_ranked = [{**row, "rank": None} for row in order if not row["passes"]]
    soonest = passing[0] if passing and math.isfinite(rank_key(passing[0])[0]) else None
    cheapest, note = _cheapest(passing)
    return {"passing": passing, "not_ranked": not_ranked, "soonest": _summary(soonest),
            "cheapest": _summary(cheapest), "cheapest_by": CHEAPEST_BY, "cheapest_note": note}
