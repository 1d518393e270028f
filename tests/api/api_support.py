"""Helpers shared by the API tests: the test submission, a movable clock, callers in a role, workflow steps."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import Flask

from service.accounts.auth import create_token
from service.persistence.db import get_db

# A small training submission that the catalogue can size; without an optimizer the
# training-objective check fails, which the waiver and approval tests need.
FAILING_SUBMISSION: dict[str, Any] = {
    "schema_version": "1",
    "quote": {
        "vendor": "Acme GPU Systems",
        "quote_id": "ACME-2026-001",
        "node_groups": [{"name": "gpu", "count": 2, "server_model": "DGX-H100",
                         "gpu": {"model": "H100-SXM5-80GB", "count": 8}}],
    },
    "workload": {
        "training": {
            "objective": "full-fine-tune",
            "model": {"name": "Llama-3-8B", "parameters": 8030261248},
            "precision": "bf16-mixed",
            "sequence_length": 8192,
            "micro_batch": 1,
            "global_batch": 64,
            "gpus": 16,
            "completion_window_days": 7,
            "parallelism": {"sharding": "fsdp-full"},
        }
    },
}

JUSTIFICATION = "The vendor confirmed the missing figure in writing (mail of 2026-11-20)."


class Clock:
    """The app's clock in tests: the real time shifted by ``offset`` (move it with ``advance``)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)


@dataclass
class Caller:
    """A test client that sends one token: ``as_role("approver").post(url, json=..., if_match=etag)``."""

    app: Flask
    name: str
    role: str
    token: str

    def _headers(self, headers: dict[str, str] | None, if_match: str | None) -> dict[str, str]:
        merged = {"Authorization": f"Bearer {self.token}", **(headers or {})}
        if if_match is not None:
            merged["If-Match"] = if_match
        return merged

    def get(self, url: str, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
        return self.app.test_client().get(url, headers=self._headers(headers, None), **kwargs)

    def post(self, url: str, json: Any = None, if_match: str | None = None, headers: dict[str, str] | None = None,
             **kwargs: Any) -> Any:
        return self.app.test_client().post(url, json=json, headers=self._headers(headers, if_match), **kwargs)


def new_token(app: Flask, role: str, name: str | None = None) -> tuple[str, str]:
    """Returns (name, token) of a new token with ``role``."""
    name = name or f"{role}-{secrets.token_hex(3)}"
    with app.app_context(), get_db(app).session() as session:
        _, token = create_token(session, name, role, datetime.now(UTC))
        session.commit()
    return name, token


def token_for(app: Flask, user: str, role: str, *, scope: str = "all", days: int = 90) -> Caller:
    """Returns a caller with a new token of ``user`` (created when there is none) in ``role``."""
    with app.app_context(), get_db(app).session() as session:
        row, token = create_token(session, user, role, datetime.now(UTC), lifetime=timedelta(days=days), scope=scope)
        session.commit()
        name = row.name
    return Caller(app, name, role, token)


# --- workflow helpers -------------------------------------------------------------------------------------

def caller_for(app: Flask, role: str = "submitter") -> Caller:
    """Returns a Caller holding a new token in ``role`` for a new user (``new_token``)."""
    name, token = new_token(app, role)
    return Caller(app, name, role, token)


def url(submission_id: str, *parts: str) -> str:
    return "/".join(["/api/v1/submissions", submission_id, *parts])


def blocking_checks(view: dict[str, Any]) -> list[str]:
    """Returns the ids of the checks that need a waiver before approval."""
    return [c["id"] for c in view["evaluation"]["checks"]
            if c["status"] in ("fail", "insufficient-data") and c["effective_status"] != "waived"]


def waive_all(reviewer: Caller, view: dict[str, Any], expires: str | None = None) -> dict[str, Any]:
    """Returns the submission after ``reviewer`` waived every check that blocks approval."""
    for check_id in blocking_checks(view):
        body: dict[str, Any] = {"justification": JUSTIFICATION}
        if expires:
            body["expires"] = expires
        response = reviewer.post(url(view["id"], "checks", check_id, "waivers"), json=body, if_match=view["etag"])
        assert response.status_code == 201, response.get_json()
        view = response.get_json()
    return view
