"""Comparisons in a background task: one submission under several variants, or stored quotes at their best layouts."""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, Response, current_app

from rules.errors import Problem
from service.accounts.auth import authorize, current_actor, require
from service.api_schemas.comparisons import COMPARISON_REQUEST, COMPARISON_REQUEST_DOCUMENTED, VARIANT_NAME_PATTERN
from service.app import compare
from service.app.responses import accepted
from service.errors import InvalidRequest
from service.http import now
from service.inputs import Body, accepts
from service.openapi import operation

bp = Blueprint("comparisons", __name__, url_prefix="/api/v1/comparisons")

_NAME = re.compile(VARIANT_NAME_PATTERN.removeprefix("^").removesuffix("$"))


def _check_comparison(body: dict[str, Any]) -> None:
    """Raises InvalidRequest for a body of both forms, more than MAX_COMPARISON_VARIANTS variants or quotes, or a
    variant name of control characters."""
    limit = current_app.config["MAX_COMPARISON_VARIANTS"]
    if "submissions" in body:
        if "submission" in body:
            raise InvalidRequest("the comparison gives both stored submissions and a submission with variants",
                                 [Problem("/submissions", "give either submissions (stored quotes) or submission "
                                                          "with variants, not both")])
        if len(body["submissions"]) > limit:
            raise InvalidRequest(f"the comparison has {len(body['submissions'])} submissions; the limit is {limit}",
                                 [Problem("/submissions", f"at most {limit} submissions (MAX_COMPARISON_VARIANTS)")])
        return
    if len(body["variants"]) > limit:
        raise InvalidRequest(f"the comparison has {len(body['variants'])} variants; the limit is {limit}",
                             [Problem("/variants", f"at most {limit} variants (MAX_COMPARISON_VARIANTS)")])
    # Python's "$" also matches before a final newline, which the schema's pattern (ECMA 262) does not.
    names = [Problem(f"/variants/{i}/name", "must be 1-64 characters without control characters")
             for i, v in enumerate(body["variants"]) if not _NAME.fullmatch(v["name"])]
    if names:
        raise InvalidRequest("the comparison has invalid variant names", names)


COMPARISON_BODY = Body("ComparisonRequest", "comparison", COMPARISON_REQUEST, check=_check_comparison,
                       documented=COMPARISON_REQUEST_DOCUMENTED)


@bp.post("")
@operation(tag="comparisons", errors=(403, 404, 429, 503),
           responses={202: ("Accepted: the task that compares the variants (`Location`); it has finished already "
                            "when the service runs tasks in-process", "Task")},
           response_headers={202: ("Location",)})
@require("read")
@accepts(COMPARISON_BODY)
def create_comparison(body: dict[str, Any]) -> Response:
    """Compare a submission under several variants (JSON merge patches), or stored quotes, in a background task.

    **Stored quotes.** `{"submissions": [id, id, ...]}` compares two or more stored submissions for the same
    workload (the same model, tokens, sequence length, global batch and completion window; serving: model,
    traffic and SLO; a difference is a 422 naming `/submissions/<i>` and the member). The current revision
    of each runs its job on every GPU of its training node group at the best layout the layout search finds
    for it (at its own layout where it states its training throughput, which is kept) and is evaluated there
    in full. Only the quotes whose checks pass there, or whose failed and incomplete checks an active waiver
    covers, are ranked (`passing`: by modelled days to result, simulated p50 then p90 where evaluated, then
    quote total); the others are listed apart (`not_ranked`) with the checks that stop them (`stopped_by`).
    `soonest` and `cheapest` (lowest `cost_per_run`; on a tie, the lower rank) name the quotes that pass first
    and cost least per run; `quotes` keeps every quote in order of days, as before. The finished task is also
    CSV (`GET /api/v1/tasks/{id}?format=csv`). Each must be visible to the token (404 otherwise); any role may
    compare stored quotes, while what-if variants need a role that may submit quotes.

    Each variant's `patch` is an RFC 7396 JSON merge patch applied to `submission` (`null` removes a
    member; an array is replaced whole), e.g. another sharding, GPU count, node count or server model;
    `{}` is the submission as it is. Every patched submission must satisfy the submission schema: a
    problem names the variant and the pointer. The answer is always 202 with the task (`Location`);
    `GET /api/v1/tasks/{id}` reports its progress (one step per variant) and then one row per variant:
    verdict, failing checks, expected days, GPUs quoted and needed, quote total and cost per run day.
    The same submission, variants, engine version and policy give the same task: a repeated request is
    answered with the task (and result) of the first, a failed one is run again.
    """
    actor = current_actor()
    if "submissions" in body:
        return accepted(compare.compare_stored(actor, body["submissions"], now()))
    # Evaluating documents of one's own is submitting work: a role that may only read compares stored quotes.
    authorize(actor, "submit")
    variants = [{"name": v["name"], "patch": v["patch"]} for v in body["variants"]]
    return accepted(compare.compare_variants(actor, body["submission"], variants, now()))
