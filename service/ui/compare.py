"""The Compare page: two or more quotes for the same workload side by side (verdict, failed checks, GPUs, days
to result, total price, cost per run) as evaluated, with a chart; and, on request, their ranking at each quote's
best layout (the comparison task of ``POST /api/v1/comparisons {"submissions": [...]}``)."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, redirect, request, url_for
from sqlmodel import col, select

from rules.advice.compare import gpus_quoted
from rules.advice.compare_quotes import check_same_workload, workload_identity
from rules.errors import InvalidSubmission
from service.accounts.visibility import own_submissions
from service.app import compare as comparison
from service.app import tasks
from service.app.responses import LIST_FORMATS
from service.approval import store, verdicts
from service.errors import InvalidRequest
from service.http import now, text_response
from service.persistence.db import get_db
from service.persistence.models import Submission
from service.record.view import display_number
from service.tasks import task_runs
from service.ui.blueprint import bp
from service.ui.compare_chart import quote_chart
from service.ui.render import TASK_REFRESH_S, current_visitor, page, reloading, signed_in

# The picker offers the newest submissions the user may see, grouped by the job they quote for.
PICKER_LIMIT = 200
TIME_TO_RESULT = "time-to-result"


def _job(identity: dict[str, Any]) -> str:
    """Returns a workload identity in words: the model, and the job's size and window."""
    parts = []
    training, serving = identity.get("training"), identity.get("inference")
    if training:
        model = (training.get("model") or {}).get("name", "a model")
        words = [f"training {model}", training.get("objective")]
        if training.get("dataset_tokens"):
            words.append(f"{display_number(training['dataset_tokens'])} tokens")
        if training.get("completion_window_days"):
            words.append(f"{display_number(training['completion_window_days'])}-day window")
        parts.append(", ".join(str(w) for w in words if w))
    if serving:
        model = serving.get("model")
        model = model.get("name") if isinstance(model, dict) else model
        words = [f"serving {model or 'a model'}"]
        if serving.get("rps"):
            words.append(f"{display_number(serving['rps'])} requests/s")
        parts.append(", ".join(words))
    return "; ".join(parts) or "no workload"


def _groups(actor: Any) -> list[dict[str, Any]]:
    """Returns the submissions the picker offers, grouped by workload (newest first within each group)."""
    groups: dict[str, dict[str, Any]] = {}
    with get_db().session() as session:
        rows = session.exec(select(Submission).where(*own_submissions(actor))
                            .order_by(col(Submission.created_at).desc()).limit(PICKER_LIMIT)).all()
        for row in rows:
            identity = workload_identity(store.current_document(session, row.id))
            key = json.dumps(identity, sort_keys=True)
            groups.setdefault(key, {"job": _job(identity), "submissions": []})["submissions"].append(row)
    return [group for group in groups.values()]


def _stored_row(snap: store.Snapshot, document: dict[str, Any], effective: str | None) -> dict[str, Any]:
    """Returns a quote's figures as its current evaluation gives them (time-to-result's evidence)."""
    timing = next((c["evidence"] for c in snap.checks if c["id"] == TIME_TO_RESULT), {})
    submission = snap.submission
    return {"id": submission.id, "label": f"{submission.vendor or '(no vendor)'} {submission.quote_id or ''}".strip(),
            "vendor": submission.vendor, "quote_id": submission.quote_id, "revision": submission.revision,
            "state": submission.state, "verdict": snap.evaluation.verdict, "effective_verdict": effective,
            "failed": [c["id"] for c in snap.checks if c["status"] == "fail"], "gpus": gpus_quoted(document),
            "days": timing.get("days"), "days_p50": timing.get("days_p50"), "days_p90": timing.get("days_p90"),
            "window_days": timing.get("window_days"),
            "currency": timing.get("currency") or (document.get("quote") or {}).get("currency"),
            "quote_total": timing.get("quote_total"), "cost_per_run": timing.get("cost_per_run"),
            "cost_note": timing.get("cost_problem")}


def _chosen() -> list[str]:
    ids = list(dict.fromkeys(value.strip() for value in request.values.getlist("ids") if value.strip()))
    if len(ids) > PICKER_LIMIT:
        raise InvalidRequest(f"pick at most {PICKER_LIMIT} submissions to compare")
    return ids


@bp.get("/ui/compare")
@signed_in
def compare() -> Response:
    """Pick quotes for one workload; with two or more picked (``ids``), see them side by side."""
    actor = current_visitor().actor
    ids = _chosen()
    rows: list[dict[str, Any]] = []
    problem = None
    if len(ids) == 1:
        problem = {"detail": "Pick at least two quotes to compare.", "problems": []}
    elif ids:
        today = now().date()
        with get_db().session() as session:
            quotes = comparison.stored_quotes(session, actor, ids)
            try:
                check_same_workload(quotes)
            except InvalidSubmission as error:
                problem = {"detail": str(error), "problems": [p.as_dict() for p in error.problems]}
            if problem is None:
                after = verdicts.effective_verdicts(session, ids, today)
                for submission_id, document in quotes:
                    snap = store.load(session, submission_id)
                    rows.append(_stored_row(snap, document, after.get(submission_id, snap.evaluation.verdict)))
    return page("compare.html", status=422 if problem and ids else 200, groups=_groups(actor), chosen=set(ids),
                ids=ids, rows=rows, problem=problem, chart=quote_chart(rows) if rows else None)


@bp.post("/ui/compare/rankings")
@signed_in
def rank() -> Response:
    """Rank the picked quotes at each one's best layout, in a background task; then its page."""
    ids = _chosen()
    if len(ids) < 2:
        raise InvalidRequest("pick at least two quotes to rank")
    task_id = comparison.compare_stored(current_visitor().actor, ids, now())
    return redirect(url_for("ui.ranking", task_id=task_id, ids=ids), 303)


def _labelled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**row, "label": f"{row.get('vendor') or '(no vendor)'} {row.get('quote_id') or ''}".strip()}
            for row in rows]


@bp.get("/ui/compare/rankings/<task_id>")
@signed_in
def ranking(task_id: str) -> Response:
    """The ranking of quotes at their best layouts: running (the page reloads itself), done, or failed.

    Done: the quotes that pass (after waivers) ranked, the soonest and the cheapest of them named, and the quotes
    that do not pass listed apart with the checks that stop them; a link to the CSV.
    """
    task = tasks.load_view(task_id, current_visitor().actor)
    if not comparison.is_quote_comparison(task):
        raise InvalidRequest(f"task {task_id} is a {task['kind']}, not a ranking of quotes")
    result = task.get("result") or {}
    decided = "passing" in result
    passing = _labelled(result.get("passing", []) if decided else result.get("quotes", []))
    not_ranked = _labelled(result.get("not_ranked", []))
    running = task["state"] not in task_runs.FINISHED
    response = page("ranking.html", task=task, rows=passing, not_ranked=not_ranked, decided=decided,
                    soonest=result.get("soonest"), cheapest=result.get("cheapest"),
                    cheapest_note=result.get("cheapest_note"), ids=request.args.getlist("ids"),
                    chart=quote_chart(passing) if passing else None, running=running, refresh_s=TASK_REFRESH_S)
    return reloading(response) if running else response


@bp.get("/ui/compare/rankings/<task_id>.csv")
@signed_in
def ranking_csv(task_id: str) -> Response:
    """The ranking as CSV: one row per quote, the ranked ones first (the API's ``GET /api/v1/tasks/{id}?format=csv``
    bytes)."""
    task = tasks.load_view(task_id, current_visitor().actor)
    return text_response(comparison.comparison_table(task), LIST_FORMATS["csv"],
                         {"Content-Disposition": f'attachment; filename="quote-comparison-{task["id"]}.csv"'})
