"""JSON Schemas of the API's own request and response bodies.

The request schemas validate bodies at run time; all of them become components of the OpenAPI
document next to the public contract files in schemas/, so the description cannot drift from the checks.
"""

from __future__ import annotations

from typing import Any

from service.workflow import MIN_JUSTIFICATION, State, WaiverState

_TEXT = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}
_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}

WAIVER_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["justification"],
    "properties": {
        "justification": {"type": "string", "minLength": 1, "maxLength": 4000,
                          "description": f"why the result is acceptable; at least {MIN_JUSTIFICATION} characters"},
        "expires": {"type": ["string", "null"], "format": "date", "maxLength": 10,
                    "description": "ISO date (YYYY-MM-DD) after which the waiver no longer counts; not in the past"},
    },
}

DECISION_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["action"],
    "properties": {
        "action": {"enum": ["approve", "reject", "request-changes"]},
        "comment": {"type": "string", "maxLength": 4000},
    },
}

PROBLEM: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details",
    "required": ["type", "title", "status", "detail", "instance"],
    "properties": {
        "type": {"type": "string", "format": "uri-reference"},
        "title": _TEXT,
        "status": {"type": "integer"},
        "detail": _TEXT,
        "instance": {"type": "string", "format": "uri-reference"},
        "errors": {"type": "array", "items": {
            "type": "object", "required": ["pointer", "message"],
            "properties": {"pointer": {"type": "string", "description": "JSON Pointer into the body"},
                           "parameter": {"type": "string", "description": "the query parameter at fault"},
                           "message": _TEXT}}},
    },
}

WAIVER: dict[str, Any] = {
    "type": "object",
    "required": ["id", "check_id", "state", "result_digest", "justification", "author", "created_at"],
    "properties": {
        "id": {"type": "integer"}, "check_id": _TEXT, "state": {"enum": list(WaiverState)},
        "result_digest": _DIGEST, "justification": _TEXT, "expires": {"type": ["string", "null"], "format": "date"},
        "author": _TEXT, "revision": {"type": "integer"}, "created_at": _TIME,
    },
}

DECISION: dict[str, Any] = {
    "type": "object",
    "required": ["id", "action", "actor", "role", "revision", "created_at"],
    "properties": {"id": {"type": "integer"}, "action": DECISION_REQUEST["properties"]["action"],
                   "comment": _NULLABLE_TEXT, "actor": _TEXT, "role": _TEXT, "revision": {"type": "integer"},
                   "created_at": _TIME},
}

CHECK: dict[str, Any] = {
    "type": "object",
    "required": ["id", "status", "effective_status", "basis", "evidence", "digest"],
    "properties": {
        "id": _TEXT, "title": _TEXT, "status": _TEXT,
        "effective_status": {"type": "string", "description": "`waived` when a valid waiver covers the result"},
        "basis": _TEXT, "message": _TEXT, "remediation": _TEXT, "evidence": {"type": "object"},
        "assumptions": {"type": "array"}, "digest": _DIGEST,
        "waiver": {"type": ["object", "null"], "description": "the active waiver, else the newest one, with its state"},
    },
}

SUBMISSION_SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["id", "state", "version", "etag", "revision", "verdict", "created_at", "updated_at"],
    "properties": {
        "id": _TEXT, "state": {"enum": list(State)}, "version": {"type": "integer"}, "etag": _TEXT,
        "revision": {"type": "integer"}, "verdict": _NULLABLE_TEXT, "vendor": _NULLABLE_TEXT,
        "quote_id": _NULLABLE_TEXT, "submitter": _TEXT, "created_at": _TIME, "updated_at": _TIME,
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

SUBMISSION: dict[str, Any] = {
    "type": "object",
    "required": [*SUBMISSION_SUMMARY["required"], "evaluation", "waivers", "decisions", "approval"],
    "properties": {
        **SUBMISSION_SUMMARY["properties"],
        "effective_verdict": {"type": "string", "description": "the verdict with valid waivers counted as passed"},
        "evaluation": {"type": "object", "properties": {
            "id": {"type": "integer"}, "revision": {"type": "integer"}, "verdict": _TEXT, "evaluated_at": _TIME,
            "engine": {"type": "object"}, "policy": {"type": "object"}, "submission_digest": _DIGEST,
            "record_id": _TEXT, "summary": {"type": "object"},
            "checks": {"type": "array", "items": {"$ref": "#/components/schemas/Check"}}}},
        "waivers": {"type": "array", "items": {"$ref": "#/components/schemas/Waiver"}},
        "decisions": {"type": "array", "items": {"$ref": "#/components/schemas/Decision"}},
        "approval": {"type": "object", "properties": {
            "required_approvers": {"type": "integer"}, "approvers": {"type": "array", "items": _TEXT},
            "ready": {"type": "boolean", "description": "no check blocks approval"},
            "blocking": {"type": "array", "items": {"type": "object"}}}},
        "final_record_id": _NULLABLE_TEXT,
        "diff": {"$ref": "#/components/schemas/RevisionDiff"},
        "waiver": {"$ref": "#/components/schemas/Waiver"},
        "decision": {"$ref": "#/components/schemas/Decision"},
    },
}

REVISION_DIFF: dict[str, Any] = {
    "type": "object",
    "description": "what changed between the previous revision's evaluation and this one",
    "required": ["from_revision", "to_revision", "checks", "reopened_waivers"],
    "properties": {
        "from_revision": {"type": "integer"}, "to_revision": {"type": "integer"},
        "verdict": {"type": "object", "properties": {"from": _TEXT, "to": _TEXT}},
        "checks": {"type": "array", "items": {"type": "object", "required": ["check_id", "status", "evidence_changed"],
                                              "properties": {"check_id": _TEXT, "status": {"type": "object"},
                                                             "status_changed": {"type": "boolean"},
                                                             "evidence_changed": {"type": "boolean"},
                                                             "evidence": {"type": "object"}}}},
        "reopened_waivers": {"type": "array", "items": {"type": "object"}},
    },
}

SUBMISSION_PAGE: dict[str, Any] = {
    "type": "object",
    "required": ["items", "page", "per_page", "total"],
    "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/SubmissionSummary"}},
                   "page": {"type": "integer"}, "per_page": {"type": "integer"}, "total": {"type": "integer"},
                   "links": {"type": "object", "additionalProperties": {"type": "string"}}},
}

AUDIT_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["id", "occurred_at", "action", "prev_hash", "hash"],
    "properties": {"id": {"type": "integer"}, "occurred_at": _TIME, "submission_id": _NULLABLE_TEXT,
                   "action": _TEXT, "actor": _NULLABLE_TEXT, "actor_role": _NULLABLE_TEXT,
                   "token_prefix": _NULLABLE_TEXT, "input_digest": _NULLABLE_TEXT, "engine_version": _NULLABLE_TEXT,
                   "policy_version": _NULLABLE_TEXT, "before_state": _NULLABLE_TEXT, "after_state": _NULLABLE_TEXT,
                   "detail": {"type": "object"}, "prev_hash": _TEXT, "hash": _TEXT},
}

AUDIT_LOG: dict[str, Any] = {
    "type": "object",
    "required": ["submission_id", "events"],
    "properties": {"submission_id": _TEXT,
                   "events": {"type": "array", "items": {"$ref": "#/components/schemas/AuditEvent"}}},
}

HEALTH: dict[str, Any] = {"type": "object", "required": ["status"], "properties": {"status": _TEXT}}

SCHEMA_INDEX: dict[str, Any] = {
    "type": "object",
    "properties": {"schemas": {"type": "array", "items": {
        "type": "object", "properties": {"name": _TEXT, "href": _TEXT, "title": _TEXT}}}},
}

COMPONENTS: dict[str, dict[str, Any]] = {
    "WaiverRequest": WAIVER_REQUEST,
    "DecisionRequest": DECISION_REQUEST,
    "Problem": PROBLEM,
    "Waiver": WAIVER,
    "Decision": DECISION,
    "Check": CHECK,
    "SubmissionSummary": SUBMISSION_SUMMARY,
    "Submission": SUBMISSION,
    "RevisionDiff": REVISION_DIFF,
    "SubmissionPage": SUBMISSION_PAGE,
    "AuditEvent": AUDIT_EVENT,
    "AuditLog": AUDIT_LOG,
    "Health": HEALTH,
    "SchemaIndex": SCHEMA_INDEX,
}
