"""The schema comes from the Alembic migrations, and they match the SQLModel tables."""

from __future__ import annotations

import multiprocessing
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel, select

from service.persistence.db import current_revision, get_db, head_revision, make_engine, upgrade


def test_the_migrated_schema_matches_the_models(app):
    engine = get_db(app).engine
    assert current_revision(engine) == head_revision()
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True,
                                                               "compare_server_default": True})
        differences = compare_metadata(context, SQLModel.metadata)
    assert differences == []


def test_the_app_creates_its_tables_through_migrations(tmp_path):
    # A fresh database knows the migration it is at, which create_all would not record.
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    upgrade(engine)
    assert current_revision(engine) == head_revision()
    tables = set(inspect(engine).get_table_names())
    assert {t.name for t in SQLModel.metadata.sorted_tables} | {"alembic_version"} == tables
    engine.dispose()


def test_cli_db_upgrade_migrates_a_fresh_database(tmp_path):
    from click.testing import CliRunner

    from service.cli import main

    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    env = {"QUOTECHECK_DATABASE_URL": url, "QUOTECHECK_INSTANCE_PATH": str(tmp_path / "instance")}
    result = CliRunner().invoke(main, ["db", "upgrade"], env=env)
    assert result.exit_code == 0, result.output
    assert f"is at migration {head_revision()}" in result.output
    current = CliRunner().invoke(main, ["db", "current"], env=env)
    assert f"current: {head_revision()}" in current.output


def _migrate_in_child(url: str, start: Any) -> None:
    start.wait()
    upgrade(make_engine(url))


def test_processes_starting_at_once_migrate_once(tmp_path):
    # gunicorn workers each create the app; their migrations must queue on a lock, not collide.
    # (Processes, as in production: Alembic's context is process-global, so threads would not do.)
    context = multiprocessing.get_context("fork")
    url = f"sqlite:///{tmp_path / 'shared.sqlite3'}"
    start = context.Barrier(4)
    workers = [context.Process(target=_migrate_in_child, args=(url, start)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    engine = make_engine(url)
    assert current_revision(engine) == head_revision()
    engine.dispose()


def test_tokens_of_a_database_at_0003_keep_working_after_the_upgrade_each_as_a_user(empty_database_url, tmp_path):
    # Given a database at migration 0003 with three tokens, two of them one person's name variants, and a
    # submission of one of them
    import secrets
    from datetime import UTC, datetime

    from sqlalchemy import text

    from service import create_app
    from service.accounts.auth import hash_token

    engine = make_engine(empty_database_url)
    upgrade(engine, "0003")
    tokens = {}
    now = datetime.now(UTC)
    with engine.begin() as connection:
        for token_id, (name, role) in enumerate([("Alice", "submitter"), ("alice.", "approver"),
                                                 ("bob", "reviewer")], start=1):
            prefix = secrets.token_hex(5)
            tokens[name] = f"qc_{prefix}_{secrets.token_urlsafe(32)}"
            connection.execute(text("INSERT INTO api_token (id, name, role, prefix, token_hash, created_at) "
                                    "VALUES (:id, :name, :role, :prefix, :hash, :at)"),
                               {"id": token_id, "name": name, "role": role, "prefix": prefix,
                                "hash": hash_token(tokens[name]), "at": now})
        connection.execute(text("INSERT INTO submission (id, state, version, revision, submitter, submitter_token_id,"
                                " created_at, updated_at) VALUES ('s-1', 'evaluated', 1, 1, 'Alice', 1, :at, :at)"),
                           {"at": now})
    engine.dispose()

    # When the app starts on it (and migrates it to the newest migration)
    app = create_app({"TESTING": True, "INSTANCE_PATH": str(tmp_path / "instance"),
                      "DATABASE_URL": empty_database_url})
    engine = get_db(app).engine
    assert current_revision(engine) == head_revision()

    # Then every old token still authenticates, and sees the old submission (as scope "all")
    client = app.test_client()
    for name, token in tokens.items():
        response = client.get("/api/v1/submissions", headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, (name, response.get_json())
        assert [i["submitter"] for i in response.get_json()["items"]] == ["Alice"]
    # each name became a user, name variants one user; tokens keep their role and expire in 90 days
    with engine.connect() as connection:
        users = connection.execute(text("SELECT id, name, name_key FROM app_user ORDER BY id")).all()
        rows = connection.execute(text("SELECT name, role, user_id, scope FROM api_token ORDER BY id")).all()
    assert [(u.name, u.name_key) for u in users] == [("Alice", "alice"), ("bob", "bob")]
    assert [(r.name, r.role, r.user_id, r.scope) for r in rows] == [
        ("Alice", "submitter", users[0].id, "all"), ("alice.", "approver", users[0].id, "all"),
        ("bob", "reviewer", users[1].id, "all")]
    with get_db(app).session() as session:
        from service.accounts.auth import aware
        from service.persistence.models import ApiToken

        lifetimes = [aware(t.expires_at) - now for t in session.exec(select(ApiToken)).all()]
    assert all(89 <= lifetime.days <= 90 for lifetime in lifetimes)
    # and the migrated schema, data and all, is the models'
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True,
                                                               "compare_server_default": True})
        assert compare_metadata(context, SQLModel.metadata) == []
    # a new user gets the next id (PostgreSQL's sequence was moved past the migrated users)
    with app.app_context(), get_db(app).session() as session:
        from service.accounts.users import create_user

        assert create_user(session, "carol", datetime.now(UTC)).id == users[-1].id + 1
        session.commit()
    engine.dispose()


def _users_at_0010(url: str, names: list[str]) -> Any:
    """Returns an engine on a database at migration 0010 holding users ``names`` with the keys of that revision."""
    import unicodedata
    from datetime import UTC, datetime

    from sqlalchemy import text

    engine = make_engine(url)
    upgrade(engine, "0010")
    with engine.begin() as connection:
        for name in names:  # 0004's key: NFKC, case-folded, letters, marks and digits
            folded = unicodedata.normalize("NFKC", name).casefold()
            key = unicodedata.normalize("NFKC", "".join(c for c in folded if unicodedata.category(c)[0] in "LMN"))
            connection.execute(text("INSERT INTO app_user (name, name_key, created_at) VALUES (:n, :k, :at)"),
                               {"n": name, "k": key, "at": datetime.now(UTC)})
    return engine


def test_0011_reads_stored_names_as_they_look(empty_database_url):
    from sqlalchemy import text

    # Given users stored before 0011: "Alİce" (key "ali̇ce" then) and "bob"
    engine = _users_at_0010(empty_database_url, ["Al\u0130ce", "bob"])
    # When the database is upgraded
    upgrade(engine)
    # Then "Alİce" is the identity "alice" that a new "alice" would collide with
    with engine.connect() as connection:
        keys = [row.name_key for row in connection.execute(text("SELECT name_key FROM app_user ORDER BY id"))]
    assert keys == ["alice", "bob"]


def test_0011_disables_a_later_stored_user_whose_name_reads_as_an_earlier_ones(empty_database_url):
    from sqlalchemy import text

    # Given "alice", then "аlice" (Cyrillic а), then "Alİce" stored as three users before 0011 (three keys then)
    engine = _users_at_0010(empty_database_url, ["alice", "\u0430lice", "Al\u0130ce"])
    # When the database is upgraded
    upgrade(engine)
    # Then the first keeps the identity "alice"; the later ones are disabled and keyed apart, so no name finds them
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT id, name_key, disabled_at FROM app_user ORDER BY id")).all()
    assert [(row.name_key, row.disabled_at is None) for row in rows] == [
        ("alice", True), (f"alice#{rows[1].id}", False), (f"alice#{rows[2].id}", False)]
