"""The queue pages: awaiting my review, ready for my approval, blocked, mine and all, with filters and sorting."""

from __future__ import annotations

from flask import Response, current_app, request

from service.app.queues import QUEUES, SCAN_LIMIT, SORTS, VERDICTS, read_filters, read_queue
from service.errors import NotFound
from service.http import now
from service.ui.blueprint import bp
from service.ui.present import STATE_WORDS
from service.ui.render import current_visitor, page, signed_in

COLUMNS = (("created", "Submitted"), ("vendor", "Vendor"), ("submitter", "Submitter"), ("state", "State"),
           ("verdict", "Verdict"), ("updated", "Updated"))


@bp.get("/ui/queue/<slug>")
@signed_in
def queue(slug: str) -> Response:
    """A queue of submissions for the signed-in user, filtered and sorted by the query string."""
    chosen = QUEUES.get(slug)
    if chosen is None:
        raise NotFound(f"there is no queue {slug!r}; the queues are: {', '.join(QUEUES)}")
    actor = current_visitor().actor
    filters, problems = read_filters(request.args)
    result = read_queue(actor, chosen, filters, now().date(), current_app.config["DEFAULT_PAGE_SIZE"])
    return page("queue.html", queue=chosen, result=result, filters=filters, problems=problems, states=STATE_WORDS,
                verdicts=VERDICTS, columns=COLUMNS, sorts=SORTS, scan_limit=SCAN_LIMIT)
