"""The schema comes from the Alembic migrations, and they match the SQLModel tables."""

from __future__ import annotations

import multiprocessing
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from service.db import current_revision, get_db, head_revision, make_engine, upgrade


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
