"""Alembic environment: runs on the connection service.persistence.db hands over, or on ``sqlalchemy.url``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool, text
from sqlmodel import SQLModel

import service.persistence.models  # noqa: F401  (registers the tables on SQLModel.metadata)
import service.persistence.webhook_models  # noqa: F401

target_metadata = SQLModel.metadata

# Any constant works; it only has to be the same in every process that migrates this database.
MIGRATION_LOCK_ID = 0x71C0DE


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        # Several API processes may start at once (gunicorn workers): the first takes the lock and
        # migrates, the others wait for it and then find nothing left to do.
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
        elif connection.dialect.name == "sqlite" and not connection.connection.dbapi_connection.in_transaction:
            # pysqlite opens no transaction before DDL; BEGIN IMMEDIATE takes the write lock now, so
            # reading the version table and creating the tables happen under one lock.
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        context.run_migrations()
        if connection.dialect.name == "sqlite":
            # service.persistence.db.upgrade runs SQLite migrations with foreign keys off (tables are rebuilt):
            # check now.
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"the migration left rows whose foreign keys point nowhere: {broken[:10]}")


def run_offline() -> None:
    context.configure(url=context.config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url"), poolclass=pool.NullPool)
    with engine.begin() as connection:
        _run(connection)


if context.is_offline_mode():
    run_offline()
else:
    run_online()
