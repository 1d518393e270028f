"""The rows of an evaluated revision, written together: its revision, evaluation, check results and record (and,
for a new quote, its submission row first).

On PostgreSQL they are one statement: each row is a data-modifying ``WITH`` of it, the evaluation takes the
revision's generated id and the check results and record take the evaluation's, and PostgreSQL checks the
foreign keys between them at the end of the statement. One round trip and one execution instead of five
(per POST /api/v1/submissions: 9 SQL statements down to 5, the check results having been one each). The check
results are a ``VALUES`` list of parameters, each value its own parameter as in a row's INSERT, so each
evidence is sent as the text ``json.dumps`` gives it and parsed once by the server (a JSON array of them read
with ``json_to_recordset`` costs the server two more parses: about 0.5 ms more per POST).

Elsewhere (SQLite, in the process) they are the INSERTs of service/persistence/rows.py, in the same order.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Table, TextClause, bindparam, text
from sqlmodel import Session

from service.persistence import rows
from service.persistence.models import CheckResult, Evaluation, Record, Revision, Submission

_SUBMISSION, _REVISION, _EVALUATION, _CHECK_RESULT, _RECORD = (
    model.__table__ for model in (Submission, Revision, Evaluation, CheckResult, Record))  # type: ignore[attr-defined]
# The columns each row is given: all but the generated ids and the ids of the rows it follows.
_GIVEN = {_SUBMISSION: tuple(column.name for column in _SUBMISSION.columns),
          _REVISION: tuple(column.name for column in _REVISION.columns if column.name != "id"),
          _EVALUATION: tuple(column.name for column in _EVALUATION.columns if column.name not in ("id", "revision_id")),
          _CHECK_RESULT: ("check_id", "status", "basis", "digest", "evidence"),
          _RECORD: tuple(column.name for column in _RECORD.columns if column.name != "evaluation_id")}
_PREFIX = {_SUBMISSION: "s", _REVISION: "v", _EVALUATION: "e", _RECORD: "d"}


def _placeholders(table: Table) -> str:
    return ", ".join(f":{_PREFIX[table]}_{name}" for name in _GIVEN[table])


def _bindparams(table: Table) -> list[Any]:
    return [bindparam(f"{_PREFIX[table]}_{name}", type_=table.c[name].type) for name in _GIVEN[table]]


def _result(index: int, name: str) -> str:
    return f"c{index}_{name}"


@functools.cache
def _statement(with_submission: bool, results: int) -> TextClause:
    """Returns the PostgreSQL statement that writes the rows (the submission's too when ``with_submission``) with
    ``results`` check results, and returns the revision's and the evaluation's generated ids."""
    names = {table: ", ".join(_GIVEN[table]) for table in _GIVEN}
    values = ", ".join("(" + ", ".join(f":{_result(index, name)}" for name in _GIVEN[_CHECK_RESULT]) + f", {index})"
                       for index in range(results))
    parts = [f"submission_row AS (INSERT INTO submission ({names[_SUBMISSION]}) VALUES ({_placeholders(_SUBMISSION)}))"
             ] if with_submission else []
    parts += [
        f"revision_row AS (INSERT INTO revision ({names[_REVISION]}) VALUES ({_placeholders(_REVISION)}) RETURNING id)",
        f"evaluation_row AS (INSERT INTO evaluation ({names[_EVALUATION]}, revision_id) "
        f"SELECT {_placeholders(_EVALUATION)}, revision_row.id FROM revision_row RETURNING id)",
        # The results in the order given (their ids ascend as the record lists them).
        *([f"check_rows AS (INSERT INTO check_result (evaluation_id, {names[_CHECK_RESULT]}) "
           f"SELECT evaluation_row.id, {names[_CHECK_RESULT]} FROM evaluation_row, "
           f"(VALUES {values}) AS c({names[_CHECK_RESULT]}, position) ORDER BY c.position)"] if results else []),
        f"record_row AS (INSERT INTO record ({names[_RECORD]}, evaluation_id) "
        f"SELECT {_placeholders(_RECORD)}, evaluation_row.id FROM evaluation_row)"]
    sql = "WITH " + ",\n".join(parts) + "\nSELECT revision_row.id, evaluation_row.id FROM revision_row, evaluation_row"
    tables = [_SUBMISSION] * with_submission + [_REVISION, _EVALUATION, _RECORD]
    return text(sql).bindparams(*[param for table in tables for param in _bindparams(table)],
                                *[bindparam(_result(index, name), type_=_CHECK_RESULT.c[name].type)
                                  for index in range(results) for name in _GIVEN[_CHECK_RESULT]])


def _given(table: Table, row: Any) -> dict[str, Any]:
    return {f"{_PREFIX[table]}_{name}": getattr(row, name) for name in _GIVEN[table]}


def insert_evaluation(session: Session, submission: Submission | None, revision: Revision, evaluation: Evaluation,
                      checks: list[dict[str, Any]], record: Record) -> None:
    """Inserts ``revision`` with its ``evaluation``, check results ``checks`` (each with the columns check_id,
    status, basis, digest and evidence) and ``record``, after ``submission`` when given, in the session's
    transaction; sets the generated ids (the revision's, the evaluation's) and the ids that refer to them."""
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        parameters = {**(_given(_SUBMISSION, submission) if submission is not None else {}),
                      **_given(_REVISION, revision), **_given(_EVALUATION, evaluation), **_given(_RECORD, record),
                      **{_result(index, name): check[name] for index, check in enumerate(checks)
                         for name in _GIVEN[_CHECK_RESULT]}}
        statement = _statement(submission is not None, len(checks))
        revision.id, evaluation.id = connection.execute(statement, parameters).one()
    else:
        if submission is not None:
            rows.insert_row(session, _SUBMISSION, {name: getattr(submission, name) for name in _GIVEN[_SUBMISSION]})
        revision.id = rows.insert_row(session, _REVISION, {name: getattr(revision, name) for name in _GIVEN[_REVISION]},
                                      returning="id")
        evaluation.revision_id = revision.id
        evaluation.id = rows.insert_row(session, _EVALUATION, {
            "revision_id": revision.id, **{name: getattr(evaluation, name) for name in _GIVEN[_EVALUATION]}},
            returning="id")
        rows.insert_rows(session, _CHECK_RESULT, [{"evaluation_id": evaluation.id, **check} for check in checks])
        rows.insert_row(session, _RECORD, {"evaluation_id": evaluation.id,
                                           **{name: getattr(record, name) for name in _GIVEN[_RECORD]}})
    evaluation.revision_id = revision.id
    record.evaluation_id = evaluation.id
