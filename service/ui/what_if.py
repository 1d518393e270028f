"""The what-if page of a submission: its current revision evaluated again with a stated MFU, another node count of
its training node group or another completion window (``rules/advice/what_if.py``), showing the days as a range,
the cost per run and the verdict, a chart of days against MFU, and where time-to-result's verdict flips on each
lever. A GET form: the page is a link (``?mfu_percent=&nodes=&window_days=``) and works without script; with it,
changing a field recomputes the page in place (templates/ui/static/ui.js, ``data-autosubmit``).

Nothing is stored: a what-if is read-only, so any user who may see the submission may ask one.
"""

from __future__ import annotations

import math

from flask import Response, request

from rules.advice.what_if import MFU_RANGE, Levers
from rules.errors import Problem
from service.app.what_if import what_if as what_if_of
from service.errors import InvalidRequest
from service.http import now
from service.ui.blueprint import bp
from service.ui.render import current_visitor, page, signed_in
from service.ui.what_if_chart import days_against_mfu

# The levers' accepted ranges: MFU in percent of the dense peak, whole nodes, the window in days.
MFU_PERCENT_RANGE = (MFU_RANGE[0] * 100, MFU_RANGE[1] * 100)
NODES_RANGE = (1, 100_000)
WINDOW_DAYS_RANGE = (0.1, 3_650.0)


def _number(name: str, bounds: tuple[float, float], whole: bool = False) -> float | None:
    """Returns query parameter ``name`` as a number in ``bounds``, None when empty; InvalidRequest naming it."""
    raw = request.args.get(name, "").strip()
    if not raw:
        return None
    expected = f"{'a whole number' if whole else 'a number'} from {bounds[0]:g} to {bounds[1]:g}"
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not bounds[0] <= value <= bounds[1]:
        raise InvalidRequest(f"{name} must be {expected}; found {raw[:20]!r}", [Problem(f"/{name}", expected)])
    return value


def levers_asked() -> Levers:
    """Returns the levers the query sets (``mfu_percent``, ``nodes``, ``window_days``)."""
    mfu = _number("mfu_percent", MFU_PERCENT_RANGE)
    nodes = _number("nodes", NODES_RANGE, whole=True)
    return Levers(mfu=None if mfu is None else round(mfu / 100, 4), nodes=None if nodes is None else int(nodes),
                  window_days=_number("window_days", WINDOW_DAYS_RANGE))


@bp.get("/ui/submissions/<submission_id>/what-if")
@signed_in
def what_if(submission_id: str) -> Response:
    """The current revision of a submission with its levers moved: days, cost per run, verdict, where it flips."""
    view = what_if_of(current_visitor().actor, submission_id, levers_asked(), now())
    chart = days_against_mfu(view.curve, view.shown["window_days"], view.levers.mfu or view.shown["mfu"])
    return page("what_if.html", view=view, submission=view.submission, levers=view.levers, base=view.base,
                shown=view.shown, submitted=view.submitted, flips=view.flips, chart=chart,
                evaluations=view.evaluations)
