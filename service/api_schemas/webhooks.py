"""JSON Schemas of the webhook API: a subscription's request and representations, and its delivery log."""

from __future__ import annotations

from typing import Any

from service.webhooks.subscriptions import CANCELLED, DELIVERED, EVENT_TYPES, FAILED, MAX_URL_LENGTH, PENDING

_TEXT = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_TIME = {"type": "string", "format": "date-time"}
_NULLABLE_TIME = {"type": ["string", "null"], "format": "date-time"}
_LINKS = {"type": "object", "additionalProperties": {"type": "string"}}
DELIVERY_STATES = (PENDING, DELIVERED, FAILED, CANCELLED)

WEBHOOK_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["url", "events"],
    "properties": {
        "url": {"type": "string", "minLength": 1, "maxLength": MAX_URL_LENGTH,
                "description": "where events are POSTed: http or https, a host, no credentials, no fragment"},
        "events": {"type": "array", "minItems": 1, "uniqueItems": True,
                   "items": {"enum": list(EVENT_TYPES)},
                   "description": "the events to send: " + "; ".join(f"`{name}`: {meaning}"
                                                                     for name, meaning in EVENT_TYPES.items())},
        "description": {"type": "string", "maxLength": 200, "description": "what the receiver is, for people"},
    },
}

WEBHOOK: dict[str, Any] = {
    "type": "object",
    "required": ["id", "url", "events", "created_by", "created_at", "deliveries", "links"],
    "properties": {
        "id": {"type": "integer"}, "url": _TEXT, "events": {"type": "array", "items": {"enum": list(EVENT_TYPES)}},
        "description": _NULLABLE_TEXT, "created_by": _TEXT, "created_at": _TIME,
        "deliveries": {"type": "object", "description": "how many deliveries are in each state",
                       "properties": {state: {"type": "integer"} for state in DELIVERY_STATES}},
        "links": _LINKS,
    },
}

WEBHOOK_CREATED: dict[str, Any] = {
    "type": "object",
    "required": [*WEBHOOK["required"], "secret"],
    "properties": {**WEBHOOK["properties"],
                   "secret": {"type": "string", "pattern": "^whsec_[A-Za-z0-9+/=]+$",
                              "description": "the signing secret (Standard Webhooks form), shown this once: the "
                                             "receiver verifies `webhook-signature` with it"}},
}

WEBHOOK_LIST: dict[str, Any] = {
    "type": "object", "required": ["items"],
    "properties": {"items": {"type": "array", "items": {"$ref": "#/components/schemas/Webhook"}}},
}

WEBHOOK_ATTEMPT: dict[str, Any] = {
    "type": "object",
    "required": ["number", "attempted_at", "duration_ms", "status_code", "error"],
    "properties": {"number": {"type": "integer"}, "attempted_at": _TIME, "duration_ms": {"type": "integer"},
                   "status_code": {"type": ["integer", "null"], "description": "the receiver's HTTP status"},
                   "error": {**_NULLABLE_TEXT, "description": "why the attempt failed (refused, timed out, a "
                                                              "status other than 2xx)"}},
}

WEBHOOK_DELIVERY: dict[str, Any] = {
    "type": "object",
    "required": ["id", "event_id", "event_type", "state", "attempts", "created_at", "log"],
    "properties": {
        "id": {"type": "string", "description": "the `webhook-id` header, the same on every attempt"},
        "event_id": {"type": "string", "description": "the body's `id`"},
        "event_type": {"enum": list(EVENT_TYPES)}, "state": {"enum": list(DELIVERY_STATES)},
        "attempts": {"type": "integer"}, "next_attempt_at": _NULLABLE_TIME,
        "last_status_code": {"type": ["integer", "null"]}, "last_error": _NULLABLE_TEXT,
        "submission_id": _NULLABLE_TEXT, "audit_event_id": {"type": "integer"}, "created_at": _TIME,
        "delivered_at": _NULLABLE_TIME,
        "log": {"type": "array", "items": {"$ref": "#/components/schemas/WebhookAttempt"},
                "description": "every attempt, oldest first"},
    },
}

WEBHOOK_DELIVERY_PAGE: dict[str, Any] = {
    "type": "object",
    "required": ["webhook_id", "items", "page", "per_page", "total"],
    "properties": {"webhook_id": {"type": "integer"},
                   "items": {"type": "array", "items": {"$ref": "#/components/schemas/WebhookDelivery"}},
                   "page": {"type": "integer"}, "per_page": {"type": "integer"}, "total": {"type": "integer"},
                   "links": _LINKS},
}

WEBHOOK_COMPONENTS: dict[str, dict[str, Any]] = {
    "Webhook": WEBHOOK,
    "WebhookCreated": WEBHOOK_CREATED,
    "WebhookList": WEBHOOK_LIST,
    "WebhookAttempt": WEBHOOK_ATTEMPT,
    "WebhookDelivery": WEBHOOK_DELIVERY,
    "WebhookDeliveryPage": WEBHOOK_DELIVERY_PAGE,
}
