"""A submission's checks for the tools that read check results: JSON, SARIF 2.1.0, JUnit XML or CSV."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from service.accounts.auth import current_actor, require
from service.app.responses import CHECK_FORMATS, checks_response
from service.app.submissions import read_checks
from service.http import negotiated_format, now
from service.inputs import Query, accepts
from service.openapi import operation

bp = Blueprint("exports", __name__, url_prefix="/api/v1/submissions")

CHECKS_QUERY = Query({"type": "object", "properties": {
    "format": {"description": "json (default), sarif (SARIF 2.1.0), junit (JUnit XML) or csv; without it the "
                              "Accept header chooses among application/json, application/sarif+json, "
                              "application/xml and text/csv", "enum": list(CHECK_FORMATS)},
}})


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
    fmt = negotiated_format(query["format"], CHECK_FORMATS)
    return checks_response(read_checks(current_actor(), submission_id, fmt == "json", now().date()), fmt)
