"""A submission's checks for the tools that read check results: JSON, SARIF 2.1.0, JUnit XML or CSV."""

from __future__ import annotations

from datetime import date
from typing import Any

from flask import Blueprint, Response

from rules.evaluate import verdict_of
from service import exports
from service.accounts.auth import current_actor, require
from service.app.evaluation import required_approvers
from service.approval import store, workflow
from service.approval.representations import submission_view
from service.approval.store import Snapshot
from service.exports.model import Artifact, Export
from service.http import json_response, negotiated_format, now, text_response
from service.inputs import Query, accepts
from service.openapi import operation
from service.persistence.audit import timestamp
from service.persistence.db import get_db
from service.persistence.models import Waiver

bp = Blueprint("exports", __name__, url_prefix="/api/v1/submissions")

OFFERED = {"json": "application/json", **exports.MEDIA_TYPES}
FILE_SUFFIXES = {"sarif": "sarif", "junit": "junit.xml", "csv": "csv"}
# The document the checks point into: a stored submission has no file name of its own.
ARTIFACT_URI = "submission.json"

CHECKS_QUERY = Query({"type": "object", "properties": {
    "format": {"description": "json (default), sarif (SARIF 2.1.0), junit (JUnit XML) or csv; without it the "
                              "Accept header chooses among application/json, application/sarif+json, "
                              "application/xml and text/csv", "enum": list(OFFERED)},
}})


def _waiver(waiver: Waiver) -> dict[str, Any]:
    return {"id": waiver.id, "justification": waiver.justification, "author": waiver.author,
            "expires": waiver.expires.isoformat() if waiver.expires else None,
            "created_at": timestamp(waiver.created_at)}


def submission_export(snap: Snapshot, document: dict[str, Any], today: date) -> Export:
    """Returns the export of a submission's current evaluation: its checks after the waivers valid ``today``."""
    active = snap.active_waivers(today)
    checks = []
    for check in snap.checks:
        waiver = active.get(check["id"])
        checks.append({**check, "effective_status": workflow.effective_status(check["status"], waiver is not None),
                       "digest": snap.digests[check["id"]], "waiver": _waiver(waiver) if waiver else None})
    submission, record = snap.submission, snap.record.document
    digest = record["submission"]["digest"]
    artifact = Artifact(
        uri=ARTIFACT_URI, document=document, sha256=digest.removeprefix("sha256:"),
        description=f"the submitted document of revision {submission.revision} of submission {submission.id}, as "
                    "RFC 8785 canonical JSON (its SHA-256 is the record's submission digest)")
    subject = {"id": submission.id, "revision": submission.revision, "state": submission.state,
               "vendor": submission.vendor, "quote_id": submission.quote_id}
    return Export(record=record, checks=checks, artifact=artifact,
                  verdict_after_waivers=verdict_of([c["effective_status"] for c in checks]), subject=subject)


@bp.get("/<submission_id>/checks")
@operation(tag="submissions", errors=(404,),
           responses={200: ("The checks of the current evaluation, in the format asked for", "CheckList")},
           alternatives={200: {"application/sarif+json": "SarifLog", "application/xml": "JUnitXml",
                               "text/csv": "Csv"}},
           response_headers={200: ("Content-Disposition",)})
@require("read")
@accepts(CHECKS_QUERY)
def get_checks(submission_id: str, query: dict[str, Any]) -> Response:
    """Read the checks of a submission's current evaluation as JSON, SARIF 2.1.0, JUnit XML or CSV.

    Each check carries its status and its status after the waivers valid today (`waived`). SARIF has one
    result per check, located by JSON Pointer in the submission (`logicalLocations[].fullyQualifiedName`),
    a waived result suppressed with the waiver's justification; JUnit has one test case per check; CSV one
    row per check. docs/exports.md gives the mapping of statuses.
    """
    fmt = negotiated_format(query["format"], OFFERED)
    today = now().date()
    with get_db().session() as session:
        snap = store.load_visible(session, current_actor(), submission_id)
        if fmt == "json":
            view = submission_view(snap, today, required_approvers())
            return json_response({"submission_id": submission_id, "revision": snap.submission.revision,
                                  "verdict": view["verdict"], "effective_verdict": view["effective_verdict"],
                                  "record_id": snap.record.id, "checks": view["evaluation"]["checks"]})
        export = submission_export(snap, store.current_document(session, submission_id), today)
    name = f"quotecheck-{submission_id}-r{snap.submission.revision}.{FILE_SUFFIXES[fmt]}"
    return text_response(exports.render(fmt, export), OFFERED[fmt],
                         {"Content-Disposition": f'attachment; filename="{name}"'})
