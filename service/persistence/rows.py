"""Rows written as plain rows: INSERT statements of the Core (no ORM unit of work), built once and reused.

A submission writes a handful of rows that nothing reads back through the session (the request's answer is
built from the values just written). Adding them as ORM objects and flushing costs more than the statement
itself: the unit of work sorts, collects and post-processes each object. These statements write the same
columns with the same types, so what is stored is the same.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Insert, Table, TextClause, bindparam, insert, text
from sqlmodel import Session


@functools.cache
def _insert(table: Table, returning: str | None) -> Insert:
    statement = insert(table)
    return statement.returning(table.c[returning]) if returning else statement


def insert_row(session: Session, table: Table, row: dict[str, Any], returning: str | None = None) -> Any:
    """Inserts ``row`` (column → value; columns left out get their defaults) into ``table`` in the session's
    transaction; returns the value of column ``returning`` of the row written (its generated id), else None."""
    result = session.connection().execute(_insert(table, returning), row)
    return result.scalar_one() if returning else None


@functools.cache
def rows_statement(table: Table, names: tuple[str, ...], count: int) -> TextClause:
    """Returns one ``INSERT … VALUES (…), (…)`` of ``count`` rows of the columns ``names`` of ``table``
    (parameters ``r<index>_<column>``, typed as the columns).

    Text, built once per table, columns and count: SQLAlchemy caches no compiled form of a many-row
    INSERT … VALUES. One statement instead of one per row (an executemany): one round trip, and one execution
    on the server.
    """
    rows = ", ".join("(" + ", ".join(f":r{index}_{name}" for name in names) + ")" for index in range(count))
    sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES {rows}"
    return text(sql).bindparams(*[bindparam(f"r{index}_{name}", type_=table.c[name].type)
                                  for index in range(count) for name in names])


def insert_rows(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Inserts ``rows`` (each with the same columns, those of the first) into ``table`` in the session's
    transaction with one statement."""
    if not rows:
        return
    names = tuple(rows[0])
    parameters = {f"r{index}_{name}": row[name] for index, row in enumerate(rows) for name in names}
    session.connection().execute(rows_statement(table, names, len(rows)), parameters)
