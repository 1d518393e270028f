"""The queues of the pages: which submissions await the signed-in user, filtered and sorted.

- ``review``: evaluated quotes with a failed or incomplete check that no active waiver covers, for a user who
  may waive (reviewer, admin) and neither submitted nor revised the quote (four eyes);
- ``approval``: evaluated quotes that nothing blocks from approval, for a user who may approve (approver,
  admin), passes the four-eyes rule on them, and has not approved their current revision yet;
- ``blocked``: open quotes that cannot be approved as they stand: changes were requested, or a failed or
  incomplete check has no active waiver;
- ``mine``: the quotes the user submitted, revised, waived a check of or decided on;
- ``all``: every quote the user may see.

A token of scope ``own`` sees only its user's quotes in each (service.accounts.visibility). The queue pages
(service/ui/queue_views.py) show what ``read_queue`` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import case, or_
from sqlmodel import Session, col, select

from service.accounts.actors import Actor
from service.accounts.visibility import own_submissions
from service.app.review import may
from service.approval import store, verdicts, workflow
from service.approval.workflow import State
from service.persistence.db import get_db
from service.persistence.models import ApiToken, Decision, Revision, Submission, Waiver


@dataclass(frozen=True)
class Queue:
    slug: str
    title: str
    description: str
    # The permission a user needs for the queue to hold anything for them (None: everyone).
    permission: str | None = None


QUEUES = {q.slug: q for q in (
    Queue("review", "Awaiting my review", "Evaluated quotes with a failed or incomplete check that no active waiver "
          "covers, which you may waive (you neither submitted nor revised them).", "waive"),
    Queue("approval", "Ready for my approval", "Evaluated quotes that nothing blocks from approval and that you may "
          "approve: you neither submitted, revised nor waived a check of them, and have not approved them yet.",
          "approve"),
    Queue("blocked", "Blocked", "Open quotes that cannot be approved as they stand: changes were requested, or a "
          "failed or incomplete check has no active waiver."),
    Queue("mine", "Mine", "Quotes you submitted, revised, waived a check of or decided on."),
    Queue("all", "All", "Every quote you may see."),
)}
VERDICTS = ("pass", "warn", "incomplete", "fail")
SORTS = {"created": col(Submission.created_at), "updated": col(Submission.updated_at),
         "vendor": col(Submission.vendor), "submitter": col(Submission.submitter), "state": col(Submission.state),
         "verdict": case({"fail": 0, "incomplete": 1, "warn": 2, "pass": 3}, value=col(Submission.verdict), else_=4)}
# The queues decided per submission read each candidate's snapshot: at most this many, in the chosen order.
SCAN_LIMIT = 500


@dataclass(frozen=True)
class Filters:
    state: str | None = None
    verdict: str | None = None
    effective_verdict: str | None = None
    vendor: str | None = None
    submitter: str | None = None
    created_from: date | None = None
    created_to: date | None = None
    sort: str = "created"
    order: str = "desc"
    page: int = 1

    def query(self, **changes: Any) -> dict[str, Any]:
        """Returns these filters as query parameters (with ``changes``), leaving out the defaults."""
        values = {"state": self.state, "verdict": self.verdict, "effective_verdict": self.effective_verdict,
                  "vendor": self.vendor, "submitter": self.submitter,
                  "from": self.created_from.isoformat() if self.created_from else None,
                  "to": self.created_to.isoformat() if self.created_to else None,
                  "sort": self.sort, "order": self.order, "page": self.page, **changes}
        defaults = {"sort": "created", "order": "desc", "page": 1}
        return {k: v for k, v in values.items() if v not in (None, "") and defaults.get(k) != v}


def read_filters(args: Any) -> tuple[Filters, list[str]]:
    """Returns the filters a queue's query string gives, and a sentence for each value that was ignored."""
    problems: list[str] = []

    def choice(name: str, allowed: tuple[str, ...] | list[str], default: str | None = None) -> str | None:
        value = (args.get(name) or "").strip()
        if value and value not in allowed:
            problems.append(f"{name} {value!r} is not one of: {', '.join(allowed)}; ignored")
            return default
        return value or default

    def day(name: str) -> date | None:
        value = (args.get(name) or "").strip()
        try:
            return date.fromisoformat(value) if value else None
        except ValueError:
            problems.append(f"{name} {value!r} is not a date (YYYY-MM-DD); ignored")
            return None

    def text(name: str) -> str | None:
        return (args.get(name) or "").strip()[:200] or None

    page = args.get("page", "1")
    filters = Filters(state=choice("state", list(State)), verdict=choice("verdict", VERDICTS),
                      effective_verdict=choice("effective_verdict", VERDICTS), vendor=text("vendor"),
                      submitter=text("submitter"), created_from=day("from"), created_to=day("to"),
                      sort=choice("sort", tuple(SORTS), "created") or "created",
                      order=choice("order", ("asc", "desc"), "desc") or "desc",
                      page=int(page) if page.isdigit() and 0 < int(page) < 100_000 else 1)
    return filters, problems


@dataclass
class Item:
    """A row of a queue: the submission, its verdict after waivers, and why it is in the queue where that says more."""

    submission: Submission
    effective_verdict: str | None
    reason: str = ""


def _mine(actor: Actor) -> Any:
    tokens = select(ApiToken.id).where(ApiToken.user_id == actor.user_id)
    return or_(col(Submission.id).in_(select(Revision.submission_id).where(col(Revision.author_token_id).in_(tokens))),
               col(Submission.id).in_(select(Waiver.submission_id).where(col(Waiver.author_token_id).in_(tokens))),
               col(Submission.id).in_(select(Decision.submission_id)
                                      .where(col(Decision.actor_token_id).in_(tokens))))


def _conditions(actor: Actor, queue: Queue, filters: Filters) -> list[Any]:
    conditions = own_submissions(actor)
    if queue.slug in ("review", "approval"):
        conditions.append(col(Submission.state) == State.EVALUATED)
    elif queue.slug == "blocked":
        conditions.append(col(Submission.state).in_([State.EVALUATED, State.CHANGES_REQUESTED]))
    elif queue.slug == "mine":
        conditions.append(_mine(actor))
    if filters.state:
        conditions.append(col(Submission.state) == filters.state)
    if filters.verdict:
        conditions.append(col(Submission.verdict) == filters.verdict)
    for name, column in (("vendor", Submission.vendor), ("submitter", Submission.submitter)):
        value = getattr(filters, name)
        if value:
            conditions.append(col(column).icontains(value, autoescape=True))
    if filters.created_from:
        conditions.append(col(Submission.created_at) >= datetime.combine(filters.created_from, time(), UTC))
    if filters.created_to:
        conditions.append(col(Submission.created_at) < datetime.combine(filters.created_to + timedelta(days=1),
                                                                        time(), UTC))
    return conditions


def _reason(queue: Queue, snap: store.Snapshot, actor: Actor, today: date) -> str | None:
    """Returns why the submission is in ``queue`` for ``actor`` (a short phrase), or None when it is not."""
    active = set(snap.active_waivers(today))
    open_checks = [c["id"] for c in snap.checks if c["status"] in workflow.NEEDS_WAIVER and c["id"] not in active]
    if queue.slug == "review":
        if not open_checks or actor.user_id in snap.author_users():
            return None
        return "to waive or send back: " + ", ".join(open_checks)
    if queue.slug == "approval":
        if workflow.approval_blockers(snap.checks, active):
            return None
        if workflow.check_four_eyes(actor.user_id or -1, actor.name, snap.author_users(), snap.waiver_users()):
            return None
        if actor.user_id in snap.approver_users():
            return None
        approvers = snap.approvers()
        return f"approved by {', '.join(approvers)} so far" if approvers else "nothing blocks approval"
    if queue.slug == "blocked":
        if snap.submission.state == State.CHANGES_REQUESTED:
            return "changes requested: awaiting a revised quote"
        blockers = workflow.approval_blockers(snap.checks, active)
        if not blockers:
            return None
        return "no active waiver: " + ", ".join(open_checks) if open_checks else blockers[0].message
    return ""


@dataclass
class QueuePage:
    items: list[Item]
    total: int
    page: int
    pages: int
    truncated: bool
    note: str = ""


def queue_page(session: Session, actor: Actor, queue: Queue, filters: Filters, today: date,
               per_page: int) -> QueuePage:
    """Returns the page of ``queue`` that ``filters`` select for ``actor``, in their order."""
    if queue.permission and not may(actor, queue.permission):
        return QueuePage([], 0, 1, 1, False, f"This queue is for users who may {queue.permission}; your role "
                                             f"({actor.role}) may not, so it holds nothing for you.")
    sort = SORTS[filters.sort]
    order = [sort.desc() if filters.order == "desc" else sort.asc(), col(Submission.created_at).desc(),
             col(Submission.id)]
    rows = session.exec(select(Submission).where(*_conditions(actor, queue, filters)).order_by(*order)
                        .limit(SCAN_LIMIT + 1)).all()
    truncated = len(rows) > SCAN_LIMIT
    rows = rows[:SCAN_LIMIT]
    after_waivers = verdicts.effective_verdicts(session, [row.id for row in rows], today)
    items = []
    for row in rows:
        effective = after_waivers.get(row.id, row.verdict)
        if filters.effective_verdict and effective != filters.effective_verdict:
            continue
        reason = _reason(queue, store.load(session, row.id), actor, today) if queue.slug in (
            "review", "approval", "blocked") else ""
        if reason is not None:
            items.append(Item(row, effective, reason))
    pages = max(1, -(-len(items) // per_page))
    page = min(filters.page, pages)
    return QueuePage(items[(page - 1) * per_page:page * per_page], len(items), page, pages, truncated)


def read_queue(actor: Actor, queue: Queue, filters: Filters, today: date, per_page: int) -> QueuePage:
    """Returns the page of ``queue`` that ``filters`` select for ``actor`` (``queue_page``) from the database."""
    with get_db().session() as session:
        return queue_page(session, actor, queue, filters, today, per_page)
