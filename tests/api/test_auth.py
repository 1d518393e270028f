"""Tokens and roles: 401 without a valid token, 403 for a role that may not act."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from api_support import JUSTIFICATION, url
from click.testing import CliRunner
from sqlmodel import select

from service.accounts.auth import PERMISSIONS, create_token, hash_token
from service.cli import main
from service.errors import InvalidRequest
from service.persistence.db import get_db
from service.persistence.models import ApiToken

READ_PATHS = ["/api/v1/submissions", "/api/v1/submissions/{id}", "/api/v1/submissions/{id}/audit",
              "/api/v1/records/{record}.json"]


@pytest.mark.parametrize("header", [None, "Bearer", "Basic dXNlcjpwYXNz", "Bearer qc_0123456789_" + "x" * 43,
                                    "Bearer not-a-token"])
def test_requests_without_a_valid_token_get_401_with_a_bearer_challenge(client, submitted, header):
    _, view = submitted
    headers = {"Authorization": header} if header else {}
    paths = [p.format(id=view["id"], record=view["evaluation"]["record_id"]) for p in READ_PATHS]
    for path in paths:
        response = client.get(path, headers=headers)
        assert response.status_code == 401, path
        assert response.headers["WWW-Authenticate"].startswith('Bearer realm="quotecheck"')
        assert response.mimetype == "application/problem+json"
    created = client.post("/api/v1/submissions", json={}, headers=headers)
    assert created.status_code == 401
    if header:
        assert 'error="invalid_token"' in created.headers["WWW-Authenticate"]


def test_a_token_with_the_right_prefix_and_a_wrong_secret_is_refused(client, as_role):
    caller = as_role("reviewer")
    forged = caller.token[:-4] + ("AAAA" if not caller.token.endswith("AAAA") else "BBBB")
    response = client.get("/api/v1/submissions", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401


def test_only_the_hash_of_a_token_is_stored(app, as_role):
    caller = as_role("approver")
    with get_db(app).session() as session:
        row = session.exec(select(ApiToken).where(ApiToken.name == caller.name)).one()
    assert row.token_hash == hash_token(caller.token) and caller.token not in row.model_dump_json()
    assert caller.token.startswith(f"qc_{row.prefix}_")


def test_every_role_may_read(as_role, submitted):
    _, view = submitted
    for role in ("submitter", "reviewer", "approver", "admin"):
        assert as_role(role).get(url(view["id"])).status_code == 200


@pytest.mark.parametrize(("role", "action", "allowed"), [
    ("reviewer", "submit", False), ("approver", "submit", False), ("admin", "submit", True),
    ("submitter", "waive", False), ("approver", "waive", False),
    ("submitter", "request-changes", False), ("reviewer", "approve", False), ("reviewer", "reject", True),
])
def test_roles_that_may_not_act_get_403(as_role, submitted, submission_document, role, action, allowed):
    _, view = submitted
    caller = as_role(role)
    if action == "submit":
        response = caller.post("/api/v1/submissions", json=submission_document)
    elif action == "waive":
        response = caller.post(url(view["id"], "checks", "training-objective", "waivers"),
                               json={"justification": JUSTIFICATION}, if_match=view["etag"])
    else:
        response = caller.post(url(view["id"], "decisions"), json={"action": action}, if_match=view["etag"])
    if allowed:
        assert response.status_code in (201, 409), response.get_json()
    else:
        assert response.status_code == 403, response.get_json()
        assert response.get_json()["type"].endswith("/forbidden")


def test_revoked_token_gets_401(app, as_role, tmp_path):
    caller = as_role("reviewer")
    assert caller.get("/api/v1/submissions").status_code == 200
    result = CliRunner().invoke(main, ["token", "revoke", "--name", caller.name], obj={"app": app})
    assert result.exit_code == 0, result.output
    response = caller.get("/api/v1/submissions")
    assert response.status_code == 401 and "revoked" in response.get_json()["detail"]


def test_cli_token_create_prints_a_working_token_once(app, database_url, tmp_path):
    env = {"QUOTECHECK_DATABASE_URL": database_url, "QUOTECHECK_INSTANCE_PATH": str(tmp_path / "cli-instance")}
    result = CliRunner().invoke(main, ["token", "create", "--name", "Ada Lovelace", "--role", "approver"], env=env)

    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith("qc_")
    response = app.test_client().get("/api/v1/submissions", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    # --name names the token's user: a second token of the same name is a second token of the same person
    second = CliRunner().invoke(main, ["token", "create", "--name", "ada lovelace.", "--role", "admin"], env=env)
    assert second.exit_code == 0, second.output
    with get_db(app).session() as session:
        rows = session.exec(select(ApiToken)).all()
    assert len(rows) == 2 and rows[0].user_id == rows[1].user_id
    duplicate = CliRunner().invoke(main, ["user", "create", "ADA  Lovelace"], env=env)
    assert duplicate.exit_code == 2 and "exists already" in duplicate.stderr


def test_create_token_rejects_unknown_roles_and_bad_names(app):
    with get_db(app).session() as session:
        with pytest.raises(InvalidRequest):
            create_token(session, "eve", "superuser", datetime.now(UTC))
        with pytest.raises(InvalidRequest):
            create_token(session, "", "admin", datetime.now(UTC))


def test_admin_may_do_everything_the_roles_may():
    for action, roles in PERMISSIONS.items():
        assert "admin" in roles, action
