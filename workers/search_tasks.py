"""The layout search as Celery tasks: a task per chunk of the space, run as a chord whose callback merges them.

``quotecheck.search_layouts`` (sent by the API with the submission as JSON text) is the search. It marks its
task row running with one step per chunk (``rules.advice.search.chunks_of``, one per tensor degree) and starts a
chord: ``quotecheck.search_layouts.chunk`` for every chunk, which any worker may take, so more workers
finish sooner; then ``quotecheck.search_layouts.merge`` with the chunks' results in chunk order, which
gives ``rules.advice.search.merge_chunks``'s result, the same as ``search_submission``'s.

Progress lives in the search's task row, which every worker shares: a chunk that ends adds one step
(``runs.advance``, one atomic UPDATE, so chunks ending at once in different workers both count) and
reports the count under the search's own task id in the result backend (``update_state(state="PROGRESS",
meta={"current", "total"})``), which is where ``GET /api/v1/tasks/{id}`` looks. The merge runs under the
search's task id too, so its result, or the chord's failure when a chunk died before it could record it
(killed at the hard time limit), is stored where the API reads the end of a task. A chunk that fails
records the search as failed. Without a broker the chord runs eagerly in the process that sent it: the
chunks one after another, each reporting its step, then the merge.

Idempotent as the other tasks are: the search claims its row (``workers.tasks.claim_run``), so a search whose
row is SUCCESS returns at once and one redelivered after its worker died starts again; a merge delivered again
returns the stored result, and a chunk delivered again searches its chunk again (the same result; its
step is counted again, capped at the total).
"""

from __future__ import annotations

import json
from typing import Any

from celery import Task, chord, shared_task

from rules.advice.search import (
    chunk_document,
    chunk_space,
    default_chunks,
    merge_chunks,
    search_chunk,
    search_key,
    search_submission,
)
from rules.evaluate import engine_version
from service.app import evaluation, runs
from service.tasks.tasks_port import SEARCH_LAYOUTS
from workers.tasks import TASK_OPTIONS, claim_run, publish_progress, report_progress

SEARCH_CHUNK = SEARCH_LAYOUTS + ".chunk"  # (submission JSON text, chunk_document, search task id, chunks)
MERGE_SEARCH = SEARCH_LAYOUTS + ".merge"  # (the chunks' results, submission JSON text, search task id)


def _failing(search_id: str | None, error: BaseException) -> None:
    if search_id:
        runs.fail(search_id, error)


# ignore_result: what the search leaves in the result backend is its progress and, under the same id, the
# merge's result; the search's own return (after it started the chord) must not be taken for the result.
@shared_task(name=SEARCH_LAYOUTS, ignore_result=True, **TASK_OPTIONS)
def search_layouts_task(self: Task, submission_json: str) -> dict[str, Any] | None:
    """Starts the search of the submission in ``submission_json``: a chunk task per chunk, then the merge.

    Called as a plain function (no task id), it searches in this process and returns the result.
    """
    search_id = self.request.id
    submission = json.loads(submission_json)
    if not search_id:
        return search_submission(submission, evaluation.policy())
    chunks = default_chunks()
    key = search_key(submission, engine_version(), evaluation.policy().identity()["digest"])
    claim = claim_run(self, runs.SEARCH, key, len(chunks))
    if claim.outcome != runs.RUN:
        return claim.row.result
    report_progress(self, 0, len(chunks))
    header = [search_chunk_task.s(submission_json, chunk_document(chunk), search_id, len(chunks)) for chunk in chunks]
    merge = merge_search_task.s(submission_json, search_id).set(task_id=search_id)
    try:
        chord(header)(merge)
    except Exception as error:  # the broker refused the chunks, or (in-process) a chunk or the merge failed
        _failing(search_id, error)
        raise
    return None


@shared_task(name=SEARCH_CHUNK, **TASK_OPTIONS)
def search_chunk_task(self: Task, submission_json: str, chunk: dict[str, Any], search_id: str | None,
                      total: int) -> dict[str, Any]:
    """Returns the search of one chunk (``rules.advice.search.search_chunk``) and counts it as a step of the search."""
    try:
        part = search_chunk(json.loads(submission_json), chunk_space(chunk), evaluation.policy())
    except Exception as error:
        _failing(search_id, error)
        raise
    if search_id:
        done = runs.advance(search_id)
        publish_progress(self, done, total, task_id=search_id)
    return part


@shared_task(name=MERGE_SEARCH, **TASK_OPTIONS)
def merge_search_task(self: Task, parts: list[dict[str, Any]], submission_json: str,
                      search_id: str | None) -> dict[str, Any]:
    """Returns the search merged from its chunks' results (``rules.advice.search.merge_chunks``), kept in the task
    row."""
    if search_id and (finished := runs.finished_result(search_id)) is not None:
        return finished
    try:
        result = merge_chunks(json.loads(submission_json), parts, policy=evaluation.policy())
    except Exception as error:
        _failing(search_id, error)
        raise
    if search_id:
        runs.succeed(search_id, result)
    return result
