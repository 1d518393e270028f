"""The audit hash chain and `quotecheck audit verify`."""

from __future__ import annotations

from api_support import waive_all
from click.testing import CliRunner
from sqlalchemy import text
from sqlmodel import select

from service.accounts.auth import aware
from service.cli import main
from service.persistence import audit
from service.persistence.db import get_db
from service.persistence.models import ApiToken, AuditEvent


def _verify_cli(database_url: str, tmp_path) -> object:
    env = {"QUOTECHECK_DATABASE_URL": database_url, "QUOTECHECK_INSTANCE_PATH": str(tmp_path / "cli-instance")}
    return CliRunner().invoke(main, ["audit", "verify"], env=env)


def test_verify_reports_ok_with_the_count(app, as_role, submitted, database_url, tmp_path):
    _, view = submitted
    waive_all(as_role("reviewer"), view)
    with get_db(app).session() as session:
        count = audit.count(session)

    result = _verify_cli(database_url, tmp_path)

    assert result.exit_code == 0, result.output
    assert f"audit chain OK: {count} events" in result.output


def test_editing_one_audit_row_makes_verify_name_that_event(app, as_role, submitted, database_url, tmp_path):
    # Given a chain with a few events, one of them a waiver
    _, view = submitted
    waive_all(as_role("reviewer"), view)
    with get_db(app).session() as session:
        events = audit.events_of(session, view["id"])
    target = next(e for e in events if e.action == "waiver.created")

    # When someone with database access rewrites who waived
    with get_db(app).engine.begin() as connection:
        connection.execute(text("UPDATE audit_event SET actor = 'mallory' WHERE id = :id"), {"id": target.id})

    # Then verify exits 1 and names that event and what mismatched
    result = _verify_cli(database_url, tmp_path)
    assert result.exit_code == 1, result.output
    assert f"BROKEN at event {target.id}:" in result.output
    assert "does not match the recomputed" in result.output


def test_rewriting_a_hash_breaks_the_next_link(app, submitted):
    with get_db(app).engine.begin() as connection:
        connection.execute(text("UPDATE audit_event SET hash = :h WHERE id = 2"), {"h": "f" * 64})
    with get_db(app).session() as session:
        result = audit.verify(session)
    assert not result.ok and result.broken_at == 2


def test_deleting_the_newest_event_is_noticed(app, submitted):
    with get_db(app).session() as session:
        last = audit.count(session)
    with get_db(app).engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_event WHERE id = :id"), {"id": last})
    with get_db(app).session() as session:
        result = audit.verify(session)
    assert not result.ok and result.broken_at == last and "chain head" in result.problem


def test_deleting_an_event_in_the_middle_is_noticed(app, submitted):
    with get_db(app).engine.begin() as connection:
        connection.execute(text("DELETE FROM audit_event WHERE id = 2"))
    with get_db(app).session() as session:
        result = audit.verify(session)
    assert not result.ok and result.broken_at == 2 and "missing" in result.problem


def test_token_creation_is_audited(app, as_role):
    caller = as_role("approver")
    with get_db(app).session() as session:
        assert audit.verify(session).ok
        rows = session.exec(select(AuditEvent).where(AuditEvent.action == "token.created")).all()
        users = session.exec(select(AuditEvent).where(AuditEvent.action == "user.created")).all()
        token = session.exec(select(ApiToken).where(ApiToken.prefix == caller.token.split("_")[1])).one()
    assert [r.detail for r in rows if r.detail["name"] == caller.name] == [
        {"name": caller.name, "user_id": token.user_id, "role": "approver", "scope": "all",
         "token_prefix": token.prefix, "expires_at": audit.timestamp(aware(token.expires_at))}]
    assert [e.detail for e in users] == [{"user_id": token.user_id, "name": caller.name}]
