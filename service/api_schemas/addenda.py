"""JSON Schemas of the as-built addenda over the API: the request of POST /api/v1/records/{id}/addenda, the
listing, and GET /api/v1/calibration (service/api/addenda.py).

The request's ``measurements`` is the submission schema's own ``measurements`` definition, with that schema's
``$defs``, so an addendum accepts exactly what a submission does and a problem names the same JSON Pointer.
"""

from __future__ import annotations

from typing import Any

import schemas

_TEXT = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}
_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_VERDICT = {"enum": ["pass", "warn", "incomplete", "fail"]}
_LINKS = {"type": "object", "additionalProperties": {"type": "string"}}

MAX_NOTE_LENGTH = 4000


def _addendum_request() -> dict[str, Any]:
    submission = schemas.load_schema("submission")
    measurements = submission["properties"]["measurements"]
    return {
        "$defs": submission["$defs"],
        "type": "object",
        "additionalProperties": False,
        "required": ["measurements"],
        "properties": {
            "measurements": {**measurements, "minProperties": 1,
                             "description": "the acceptance-test measurements, as a submission's `measurements` "
                                            "(schemas/submission.schema.json); each member given replaces the "
                                            "submitted one (RFC 7396: objects merge, arrays are replaced whole)"},
            "note": {"type": "string", "minLength": 1, "maxLength": MAX_NOTE_LENGTH,
                     "description": "free text for the addendum, e.g. where and when the tests ran"},
        },
    }


ADDENDUM_REQUEST: dict[str, Any] = _addendum_request()

# The documented request: the same, with measurements described by the contract schema's component.
ADDENDUM_REQUEST_DOCUMENTED: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["measurements"],
    "properties": {
        "measurements": {"allOf": [{"$ref": "#/components/schemas/SubmissionDocument/properties/measurements"}],
                         "minProperties": 1,
                         "description": ADDENDUM_REQUEST["properties"]["measurements"]["description"]},
        "note": ADDENDUM_REQUEST["properties"]["note"],
    },
}

SIGNED_ADDENDUM: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["record", "signature"],
    "description": "an as-built addendum signed by the service, in the envelope records use: verify it with a key "
                   "of GET /api/v1/keys (`quotecheck verify`, POST /api/v1/records/verify)",
    "properties": {"record": {"$ref": "#/components/schemas/AddendumDocument"},
                   "signature": {"$ref": "#/components/schemas/SignedRecord/properties/signature"}},
}

SIGNED_DOCUMENT: dict[str, Any] = {
    "description": "a signed record or a signed as-built addendum (the same envelope)",
    "anyOf": [{"$ref": "#/components/schemas/SignedRecord"}, {"$ref": "#/components/schemas/SignedAddendum"}],
}

ADDENDUM_SUMMARY: dict[str, Any] = {
    "type": "object",
    "required": ["addendum_id", "record_id", "record_digest", "digest", "verdict", "record_verdict", "changes",
                 "measured_checks", "estimators", "issued_at", "actor", "links"],
    "properties": {
        "addendum_id": _TEXT,
        "record_id": {**_TEXT, "description": "the version of the approved record the addendum names"},
        "record_digest": _DIGEST,
        "digest": {**_DIGEST, "description": "SHA-256 of the addendum's RFC 8785 bytes (the signed digest)"},
        "verdict": {**_VERDICT, "description": "the as-built verdict"},
        "record_verdict": {**_VERDICT, "description": "the approved record's verdict"},
        "changes": {"type": "array", "items": {"type": "object"}},
        "measured_checks": {"type": "array", "items": _TEXT},
        "estimators": {"type": "array", "items": _TEXT, "description": "the estimators the addendum measured"},
        "issued_at": _TIME, "actor": _TEXT, "note": _NULLABLE_TEXT,
        "links": _LINKS,
    },
}

ADDENDUM_LIST: dict[str, Any] = {
    "type": "object",
    "required": ["record_id", "items", "total"],
    "properties": {
        "record_id": _TEXT,
        "items": {"type": "array", "items": {"$ref": "#/components/schemas/AddendumSummary"},
                  "description": "the addenda of every version of the record, oldest first"},
        "total": {"type": "integer", "minimum": 0},
    },
}

CALIBRATION_ROW: dict[str, Any] = {
    "type": "object",
    "required": ["estimator", "check_id", "figure", "unit", "optimistic_when", "count", "median_ratio",
                 "worst_ratio", "optimistic_count"],
    "properties": {
        "estimator": {**_TEXT, "description": "check id and evidence figure, e.g. `peak-memory total_gib`"},
        "check_id": _TEXT, "figure": _TEXT, "unit": _NULLABLE_TEXT,
        "optimistic_when": {**_NULLABLE_TEXT, "description": "which side of the estimate a measurement shows the "
                                                             "estimate optimistic"},
        "count": {"type": "integer", "minimum": 0, "description": "addenda that measured the figure"},
        "median_ratio": {**_NUMBER_OR_NULL, "description": "median of measured / estimated; null without any"},
        "worst_ratio": {**_NUMBER_OR_NULL, "description": "the ratio furthest from 1 (0.5 and 2 are equally far)"},
        "optimistic_count": {"type": "integer", "minimum": 0,
                             "description": "addenda in which the estimate was optimistic"},
    },
}

CALIBRATION: dict[str, Any] = {
    "type": "object",
    "required": ["addenda", "estimators"],
    "properties": {
        "addenda": {"type": "integer", "minimum": 0, "description": "addenda counted (those the token may see)"},
        "estimators": {"type": "array", "items": {"$ref": "#/components/schemas/CalibrationRow"}},
    },
}

# Registered in service.api_schemas.components.COMPONENTS.
ADDENDUM_COMPONENTS: dict[str, dict[str, Any]] = {
    "SignedAddendum": SIGNED_ADDENDUM,
    "SignedDocument": SIGNED_DOCUMENT,
    "AddendumSummary": ADDENDUM_SUMMARY,
    "AddendumList": ADDENDUM_LIST,
    "CalibrationRow": CALIBRATION_ROW,
    "Calibration": CALIBRATION,
}
