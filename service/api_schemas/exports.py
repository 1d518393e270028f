"""Response schemas of the exports: a submission's checks as JSON, SARIF, JUnit XML or CSV (docs/exports.md)."""

from __future__ import annotations

from typing import Any

from service.exports.sarif import SARIF_SCHEMA_URI

CHECK_LIST: dict[str, Any] = {
    "type": "object",
    "description": "the checks of a submission's current evaluation, each with its status after waivers",
    "required": ["submission_id", "revision", "verdict", "effective_verdict", "record_id", "checks"],
    "properties": {
        "submission_id": {"type": "string"}, "revision": {"type": "integer"},
        "verdict": {"type": "string", "description": "the current evaluation's verdict, as the engine gave it"},
        "effective_verdict": {"type": "string", "description": "the verdict after the waivers valid today"},
        "record_id": {"type": "string", "description": "the evaluation record the checks come from"},
        "checks": {"type": "array", "items": {"$ref": "#/components/schemas/Check"}},
    },
}

SARIF_LOG: dict[str, Any] = {
    "type": "object",
    "description": "a SARIF 2.1.0 log (OASIS; schema " + SARIF_SCHEMA_URI + "): one run, one result per check, "
                   "located by JSON Pointer (`logicalLocations[].fullyQualifiedName`) in the submission",
    "required": ["version", "runs"],
    "properties": {"$schema": {"type": "string"}, "version": {"const": "2.1.0"},
                   "runs": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": "object"}}},
}

JUNIT_XML: dict[str, Any] = {
    "type": "string", "contentMediaType": "application/xml",
    "description": "JUnit XML: `<testsuites>` with one `<testsuite>`, one `<testcase>` per check; fail is a "
                   "`<failure>`, insufficient-data an `<error>`, not-applicable and waived `<skipped>`",
}

CSV: dict[str, Any] = {
    "type": "string", "contentMediaType": "text/csv",
    "description": "RFC 4180 CSV with a header line; a cell that would start a spreadsheet formula is prefixed "
                   "with an apostrophe",
}
