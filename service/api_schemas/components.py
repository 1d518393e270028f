"""JSON Schemas of the API's own request and response bodies.

The request schemas validate bodies at run time, named by each endpoint's ``Body`` declaration
(service/inputs.py), which also makes them components of the OpenAPI document; the response schemas are
the components listed in COMPONENTS. Both sit next to the public contract files in schemas/.
"""

from __future__ import annotations

from typing import Any

import schemas
from service.api_schemas.addenda import ADDENDUM_COMPONENTS
from service.api_schemas.comparisons import (
    COMPARISON,
    COMPARISON_ROW,
    NOT_RANKED_QUOTE_ROW,
    PASSING_QUOTE_ROW,
    QUOTE_COMPARISON,
    QUOTE_ROW,
)
from service.api_schemas.exports import CHECK_LIST, CSV, JUNIT_XML, SARIF_LOG
from service.api_schemas.searches import SEARCH, SEARCH_LAYOUT
from service.api_schemas.webhooks import WEBHOOK_COMPONENTS
from service.approval.workflow import MIN_JUSTIFICATION, State, WaiverState

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

PO_NUMBER_PATTERN = "^[A-Za-z0-9._/-]{1,64}$"
# Printable text without leading or trailing blanks (no control characters anywhere).
SYSTEM_PATTERN = "^[^\\s\\x00-\\x1f\\x7f](?:[^\\x00-\\x1f\\x7f]*[^\\s\\x00-\\x1f\\x7f])?$"

PURCHASE_ORDER_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["po_number", "system"],
    "properties": {
        "po_number": {"type": "string", "maxLength": 64, "pattern": PO_NUMBER_PATTERN,
                      "description": "the purchase order's number: 1-64 of A-Z a-z 0-9 . _ / -"},
        "system": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": SYSTEM_PATTERN,
                   "description": "the purchasing system that holds the order (e.g. `SAP`, `Coupa`): 1-64 "
                                  "printable characters, no leading or trailing blanks"},
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
    "required": ["id", "state", "version", "etag", "revision", "verdict", "effective_verdict", "created_at",
                 "updated_at"],
    "properties": {
        "id": _TEXT, "state": {"enum": list(State)}, "version": {"type": "integer"}, "etag": _TEXT,
        "revision": {"type": "integer"},
        "verdict": {**_NULLABLE_TEXT, "description": "the verdict of the current evaluation, as the engine gave it"},
        "effective_verdict": {**_NULLABLE_TEXT, "description": "the verdict after waivers: a waiver that binds to its "
                                                              "check's current result and has not expired counts the "
                                                              "check as passed (as of today)"},
        "vendor": _NULLABLE_TEXT,
        "quote_id": _NULLABLE_TEXT, "submitter": _TEXT, "created_at": _TIME, "updated_at": _TIME,
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

SUBMISSION: dict[str, Any] = {
    "type": "object",
    "required": [*SUBMISSION_SUMMARY["required"], "evaluation", "waivers", "decisions", "approval"],
    "properties": {
        **SUBMISSION_SUMMARY["properties"],
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
        "remedy": {"type": "object", "description": "the remedy a revision was made from (POST .../remedies/{remedy}/"
                                                    "revision): its id and its changes in words"},
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

HEALTH: dict[str, Any] = {"type": "object", "required": ["status"], "properties": {
    "status": _TEXT,
    "checks": {"type": "object", "description": "GET /readyz: each check that ran (database, broker, workers) with "
                                                "its status (ok or failed) and what it found",
               "additionalProperties": {"type": "object", "required": ["status"],
                                        "properties": {"status": {"enum": ["ok", "failed"]}, "detail": _TEXT,
                                                       "queued": {"type": ["integer", "null"]},
                                                       "live": {"type": "integer"}}}}}}

SCHEMA_INDEX: dict[str, Any] = {
    "type": "object",
    "properties": {"schemas": {"type": "array", "items": {
        "type": "object", "properties": {"name": _TEXT, "href": _TEXT, "title": _TEXT}}}},
}

SIGNATURE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["alg", "key_id", "record_digest", "signed_at", "value"],
    "description": "signs the RFC 8785 bytes of this object without `value` and `timestamp` (docs/records.md)",
    "properties": {"alg": {"enum": ["ecdsa-p256-sha256", "ed25519"]}, "key_id": _DIGEST, "record_digest": _DIGEST,
                   "signed_at": _TIME, "value": {"type": "string", "contentEncoding": "base64"},
                   "x5c": {"type": "array", "minItems": 1,
                           "items": {"type": "string", "contentEncoding": "base64"},
                           "description": "the signer's certificate (DER), then its chain up to the root: present "
                                          "when the signing certificate is issued by a CA; signed"},
                   "timestamp": {"type": "string", "contentEncoding": "base64",
                                 "description": "the TSA's RFC 3161 TimeStampToken (DER) over the decoded `value`: "
                                                "present when the service has a TSA (TSA_URL); not signed, it is "
                                                "over the signature"}},
}

SIGNED_RECORD: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["record", "signature"],
    "description": "a record signed by the service: verify it with a key of GET /api/v1/keys",
    "properties": {"record": {"$ref": "#/components/schemas/RecordDocument"}, "signature": SIGNATURE},
}

RECORD_REPRESENTATION: dict[str, Any] = {
    "description": "an approved record as its signed envelope (Record-Status: signed), any other record as the "
                   "unsigned record itself (Record-Status: draft)",
    "anyOf": [{"$ref": "#/components/schemas/SignedRecord"}, {"$ref": "#/components/schemas/RecordDocument"}],
}

DSSE_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "required": ["payloadType", "payload", "signatures"],
    "description": "the verdict as an in-toto Statement v1 in a DSSE envelope (attached to the signed PDF)",
    "properties": {"payloadType": _TEXT, "payload": {"type": "string", "contentEncoding": "base64"},
                   "signatures": {"type": "array", "items": {"type": "object", "required": ["sig"],
                                                             "properties": {"keyid": _TEXT, "sig": _TEXT}}}},
}

PDF: dict[str, Any] = {"type": "string", "contentMediaType": "application/pdf"}

VERIFICATION: dict[str, Any] = {
    "type": "object",
    "required": ["ok", "subject", "reasons", "findings", "parts"],
    "properties": {
        "ok": {"type": "boolean", "description": "true only when every signature and digest verified"},
        "subject": {"type": "string", "description": "what was verified: record envelope, DSSE envelope, PDF"},
        "reasons": {"type": "array", "items": _TEXT, "description": "why it is not valid: found vs expected"},
        "findings": {"type": "array", "items": _TEXT, "description": "what held"},
        "key_id": _NULLABLE_TEXT, "record_digest": _NULLABLE_TEXT, "record_id": _NULLABLE_TEXT,
        "verdict": _NULLABLE_TEXT,
        "approved": {"type": ["boolean", "null"],
                     "description": "whether the record's latest decision is an approval; false for an evaluation "
                                    "signed outside the workflow, whatever `ok` says of its signature; null "
                                    "when no record was found"},
        "addendum_of": {"type": ["object", "null"], "properties": {"record_id": _NULLABLE_TEXT,
                                                                   "digest": _NULLABLE_TEXT},
                        "description": "for an as-built addendum, the record it names; null for anything else"},
        "level": {"type": ["string", "null"], "enum": ["B-B", "B-T", "B-LT", "B-LTA", None],
                  "description": "the signature's level: PAdES baseline of a PDF; B-T for an envelope whose "
                                 "signature carries a timestamp, else B-B; null when no signature was read"},
        "signing_time": {"type": ["string", "null"], "format": "date-time",
                         "description": "the time in the TSA's timestamp of the signature (RFC 3339); null "
                                        "without a timestamp (the signer's own time is in the envelope)"},
        "parts": {"type": "array", "items": {"$ref": "#/components/schemas/Verification"},
                  "description": "the verifications of a PDF's attachments"},
    },
}

PUBLIC_KEYS: dict[str, Any] = {
    "type": "object",
    "required": ["keys"],
    "properties": {"keys": {"type": "array", "items": {
        "type": "object",
        "required": ["key_id", "algorithm", "public_key_pem", "uses"],
        "properties": {"key_id": _DIGEST, "algorithm": _TEXT, "public_key_pem": _TEXT,
                       "certificate_pem": _TEXT, "certificate_sha256": _DIGEST, "not_before": _TIME,
                       "not_after": _TIME, "uses": {"type": "array", "items": _TEXT},
                       "chain_pem": {"type": "array", "items": _TEXT,
                                     "description": "a CA-issued certificate's issuers up to the root (PEM)"},
                       "tsa_trust_roots_pem": {"type": "array", "items": _TEXT,
                                               "description": "the roots the time-stamping authority's timestamps "
                                                              "chain to (PEM), when records are timestamped"}}}}},
}

PURCHASE_ORDER_LINK: dict[str, Any] = {
    "type": "object",
    "required": ["record_id", "issue", "record_digest", "purchase_order", "purchase_orders", "linked", "links"],
    "properties": {
        "record_id": {"type": "string", "description": "the newest issue of the record, which lists the order"},
        "issue": {"type": "integer"}, "record_digest": _DIGEST,
        "supersedes": {"type": ["object", "null"], "properties": {"record_id": _TEXT, "digest": _DIGEST}},
        "purchase_order": {"type": "object", "description": "the link as the record lists it"},
        "purchase_orders": {"type": "array", "items": {"type": "object"}},
        "linked": {"type": "boolean", "description": "true when this request issued the record; false when the "
                                                     "order was already listed (nothing changed)"},
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

RECORD_PDF_RESULT: dict[str, Any] = {
    "type": "object",
    "description": "the signed PDF, stored: fetch it from `href` (GET /api/v1/records/{id}.pdf)",
    "required": ["record_id", "record_digest", "pdf_digest", "bytes", "href"],
    "properties": {"record_id": _TEXT, "record_digest": _DIGEST, "record_status": _TEXT, "pdf_digest": _DIGEST,
                   "bytes": {"type": "integer"}, "href": _TEXT},
}

TASK: dict[str, Any] = {
    "type": "object",
    "required": ["id", "kind", "state", "progress", "created_at", "updated_at", "links"],
    "properties": {
        "id": _TEXT,
        "kind": {"enum": ["comparison", "quote-comparison", "record-pdf", "search", "remedies"]},
        "state": {"enum": ["PENDING", "PROGRESS", "SUCCESS", "FAILURE"],
                  "description": "PENDING: queued; PROGRESS: running; SUCCESS: `result`; FAILURE: `error`"},
        "progress": {"type": "object", "required": ["current", "total"],
                     "properties": {"current": {"type": "integer"}, "total": {"type": "integer"}}},
        "result": {"anyOf": [{"$ref": f"#/components/schemas/{name}"}
                             for name in ("Comparison", "QuoteComparison", "RecordPdfResult", "Search", "Remedies")]},
        "error": {"$ref": "#/components/schemas/Problem"},
        "created_at": _TIME, "updated_at": _TIME,
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}

COMPONENTS: dict[str, dict[str, Any]] = {
    "ComparisonRow": COMPARISON_ROW,
    "Comparison": COMPARISON,
    "QuoteRow": QUOTE_ROW,
    "PassingQuoteRow": PASSING_QUOTE_ROW,
    "NotRankedQuoteRow": NOT_RANKED_QUOTE_ROW,
    "QuoteComparison": QUOTE_COMPARISON,
    "RecordPdfResult": RECORD_PDF_RESULT,
    "Search": SEARCH,
    "SearchLayout": SEARCH_LAYOUT,
    # The remediation search: the record schema's remedies member, which GET .../remedies returns.
    "Remedies": schemas.load_schema("record")["properties"]["remedies"],
    "Task": TASK,
    "PurchaseOrderLink": PURCHASE_ORDER_LINK,
    "SignedRecord": SIGNED_RECORD,
    "RecordRepresentation": RECORD_REPRESENTATION,
    "DsseEnvelope": DSSE_ENVELOPE,
    "Pdf": PDF,
    "Verification": VERIFICATION,
    "PublicKeys": PUBLIC_KEYS,
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
    **ADDENDUM_COMPONENTS,
    "CheckList": CHECK_LIST,
    "SarifLog": SARIF_LOG,
    "JUnitXml": JUNIT_XML,
    "Csv": CSV,
    **WEBHOOK_COMPONENTS,
}
