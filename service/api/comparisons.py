"""Comparisons: one submission evaluated under several variants, in a background task."""

from __future__ import annotations

import json
import re
from typing import Any

from flask import Blueprint, Response, current_app

from rules.compare import comparison_key, variant_documents
from rules.errors import Problem
from rules.evaluate import engine_version, submission_digest
from service import task_runs
from service.api import tasks
from service.api_schemas import COMPARISON_REQUEST, COMPARISON_REQUEST_DOCUMENTED, VARIANT_NAME_PATTERN
from service.auth import current_actor, require
from service.errors import InvalidRequest
from service.evaluation import policy
from service.http import now
from service.inputs import Body, accepts
from service.openapi import operation

bp = Blueprint("comparisons", __name__, url_prefix="/api/v1/comparisons")

_NAME = re.compile(VARIANT_NAME_PATTERN.removeprefix("^").removesuffix("$"))


def _check_comparison(body: dict[str, Any]) -> None:
    """Raises InvalidRequest for more variants than MAX_COMPARISON_VARIANTS, or a variant name of control characters."""
    limit = current_app.config["MAX_COMPARISON_VARIANTS"]
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
@operation(tag="comparisons", errors=(503,),
           responses={202: ("Accepted: the task that compares the variants (`Location`); it has finished already "
                            "when the service runs tasks in-process", "Task")},
           response_headers={202: ("Location",)})
@require("submit")
@accepts(COMPARISON_BODY)
def create_comparison(body: dict[str, Any]) -> Response:
    """Compare a submission under several variants (JSON merge patches), in a background task.

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
    submission = body["submission"]
    variants = [{"name": v["name"], "patch": v["patch"]} for v in body["variants"]]
    variant_documents(submission, variants)
    identity = policy().identity()
    key, private = tasks.key_for(actor, comparison_key(submission, variants, engine_version(), identity["digest"]))
    row, send = tasks.issue(actor, task_runs.COMPARISON, key, len(variants), now(), private=private, event={
        "action": "comparison.requested", "input_digest": submission_digest(submission),
        "engine_version": engine_version(), "policy_version": identity["version"],
        "detail": {"key": key, "variants": [v["name"] for v in variants]}})
    if send:
        tasks.send(row, [json.dumps(submission), variants])
    return tasks.accepted(row.id)
