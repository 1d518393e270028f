"""The service's errors (subclasses of rules.errors.QuotecheckError) and the one problem+json renderer.

Every error the API returns, whether raised by the domain, by the service or by Werkzeug for an HTTP
condition, goes through ``render_problem`` so clients see one shape (RFC 9457). No error class carries an
HTTP status: ``HTTP_STATUS`` below is the one table that maps error classes to status codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import kombu.exceptions
import redis.exceptions
import sqlalchemy.exc
from flask import Flask, Response, current_app, json, request
from werkzeug.exceptions import HTTPException

from rules.errors import EngineError, InvalidPolicy, InvalidSubmission, Problem, QuotecheckError
from service.record.errors import SigningError, UnreadableDocument, UnsignableRecord

PROBLEM_MEDIA_TYPE = "application/problem+json"


@dataclass(frozen=True)
class ParameterProblem(Problem):
    """A problem with a query parameter rather than the body; ``pointer`` stays empty."""

    parameter: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"pointer": self.pointer, "parameter": self.parameter, "message": self.message}


class InvalidRequest(QuotecheckError):
    """A request body or query parameter does not satisfy the operation's contract."""

    title = "Invalid request"
    type_slug = "invalid-request"


class MalformedRequest(QuotecheckError):
    """The body is not parseable JSON (or not UTF-8)."""

    title = "Malformed request body"
    type_slug = "malformed-request"


class UnsupportedMediaType(QuotecheckError):
    """The body is not declared as JSON."""

    title = "Unsupported media type"
    type_slug = "unsupported-media-type"


@dataclass
class Unauthorized(QuotecheckError):
    """No valid API token; the response carries ``WWW-Authenticate: Bearer`` (RFC 6750)."""

    # True when a token was presented but is unknown, malformed or revoked.
    invalid_token: bool = False

    title = "Authentication required"
    type_slug = "unauthorized"

    def headers(self) -> dict[str, str]:
        challenge = 'Bearer realm="quotecheck"'
        if self.invalid_token:
            challenge += ', error="invalid_token"'
        return {"WWW-Authenticate": challenge}


class Forbidden(QuotecheckError):
    """The token is valid but its role, or the four-eyes rule, does not allow this action."""

    title = "Forbidden"
    type_slug = "forbidden"


class NotFound(QuotecheckError):
    """The addressed submission, check, record or schema does not exist."""

    title = "Not found"
    type_slug = "not-found"


class WorkflowConflict(QuotecheckError):
    """The submission's state does not allow this transition (e.g. it is already approved)."""

    title = "Workflow conflict"
    type_slug = "workflow-conflict"


class ApprovalBlocked(WorkflowConflict):
    """Approval is not possible yet: failed or incomplete checks lack a valid waiver."""

    title = "Approval blocked"
    type_slug = "approval-blocked"


class PreconditionFailed(QuotecheckError):
    """If-Match does not name the current ETag: someone changed the submission since it was read."""

    title = "Precondition failed"
    type_slug = "precondition-failed"


class PreconditionRequired(QuotecheckError):
    """A transition was sent without If-Match; lost updates are refused rather than guessed at."""

    title = "Precondition required"
    type_slug = "precondition-required"


class IdempotencyKeyReused(QuotecheckError):
    """An Idempotency-Key was sent again with a different body."""

    title = "Idempotency key reused"
    type_slug = "idempotency-key-reused"


@dataclass
class TooManyTasks(QuotecheckError):
    """The caller has as many background tasks queued or running as one user may (MAX_ACTIVE_TASKS_PER_USER).

    Its response carries ``Retry-After``: ``retry_after_s`` (TASK_LIMIT_RETRY_AFTER_S).
    """

    retry_after_s: int = 0

    title = "Too many tasks"
    type_slug = "too-many-tasks"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


class ServiceUnavailable(QuotecheckError):
    """A dependency (the database, the task queue) cannot be reached or did not answer in time.

    Its response carries ``Retry-After`` (RETRY_AFTER_S); its detail never names a host or port (the log does).
    """

    title = "Service unavailable"
    type_slug = "service-unavailable"


class ConfigurationError(QuotecheckError):
    """The service lacks a setting an operation needs, or has one that does not fit the data (a key that does not
    open what was stored with another); an operator fixes it, retrying does not."""

    title = "Service not configured for this"
    type_slug = "configuration-error"


# Errors of the database and the task queue (refused, timed out, dropped), which say nothing about the request.
DATABASE_FAILURES: tuple[type[BaseException], ...] = (
    sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, sqlalchemy.exc.TimeoutError)
QUEUE_FAILURES: tuple[type[BaseException], ...] = (
    kombu.exceptions.OperationalError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def dependency_failure(error: BaseException) -> ServiceUnavailable | None:
    """Returns the 503 problem that stands for ``error`` when it is a failure of the database or the task queue.

    Its detail says which dependency failed and what to do, never the address in the error's own text.
    """
    if isinstance(error, DATABASE_FAILURES) or (
            isinstance(error, sqlalchemy.exc.DBAPIError) and error.connection_invalidated):
        return ServiceUnavailable("the database did not answer in time or refused the connection; nothing was "
                                  "changed by this request: retry it later")
    if isinstance(error, QUEUE_FAILURES):
        return ServiceUnavailable("the task queue did not answer in time or refused the connection: retry the "
                                  "request later")
    return None


# The HTTP status of each error class; a class not listed takes its nearest listed base class's status
# (ApprovalBlocked is a WorkflowConflict: 409), and an error of no listed class is a 500.
HTTP_STATUS: dict[type[QuotecheckError], int] = {
    MalformedRequest: 400,
    Unauthorized: 401,
    Forbidden: 403,
    NotFound: 404,
    WorkflowConflict: 409,
    UnsignableRecord: 409,
    PreconditionFailed: 412,
    UnsupportedMediaType: 415,
    InvalidRequest: 422,
    InvalidSubmission: 422,
    InvalidPolicy: 422,
    IdempotencyKeyReused: 422,
    UnreadableDocument: 422,
    PreconditionRequired: 428,
    TooManyTasks: 429,
    EngineError: 500,
    SigningError: 500,
    ConfigurationError: 500,
    ServiceUnavailable: 503,
}


def status_of(error: QuotecheckError) -> int:
    """Returns the HTTP status of ``error``: that of its class, or of its nearest base class in HTTP_STATUS."""
    return next((HTTP_STATUS[cls] for cls in type(error).__mro__ if cls in HTTP_STATUS), 500)


def problem_type(slug: str) -> str:
    """Returns the problem type URI for ``slug`` under the configured base."""
    return current_app.config["PROBLEM_TYPE_BASE"] + slug


# What RFC 3986 allows unencoded in a path (pchar and "/"); everything else in ``instance`` is percent-encoded.
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def problem_instance() -> str:
    """Returns the request's path as a URI reference (RFC 3986), the ``instance`` of its problems.

    ``request.path`` is decoded: a path parameter sent as ``%20`` or ``%C3%A9`` comes back as a space or
    ``é``, which is not a URI reference; it is encoded again, and a literal ``%`` becomes ``%25``.
    """
    return quote(request.path, safe=_PATH_SAFE)


def render_problem(status: int, type_uri: str, title: str, detail: str, problems: list[Problem] | None = None,
                   headers: dict[str, str] | None = None, **extra: Any) -> Response:
    """Returns an ``application/problem+json`` response with the RFC 9457 members and ``errors``."""
    body: dict[str, Any] = {"type": type_uri, "title": title, "status": status, "detail": detail,
                            "instance": problem_instance()}
    if problems:
        body["errors"] = [p.as_dict() for p in problems]
    body.update(extra)
    response = current_app.response_class(json.dumps(body), status=status, mimetype=PROBLEM_MEDIA_TYPE)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def with_retry_after(status: int, headers: dict[str, str] | None) -> dict[str, str] | None:
    """Returns ``headers`` with ``Retry-After`` (RETRY_AFTER_S) added to a 503 that has none."""
    if status != 503 or any(name.lower() == "retry-after" for name in headers or {}):
        return headers
    return {**(headers or {}), "Retry-After": str(current_app.config.get("RETRY_AFTER_S", 5))}


def handle_error(error: Exception) -> Response:
    """Returns the problem+json response for any error a view raised: ours, Werkzeug's, or unexpected."""
    unavailable = dependency_failure(error)
    if unavailable is not None:
        # The error's own text (host, port, driver message) goes to the log only.
        current_app.logger.error("dependency failure: %s: %s", type(error).__name__, error)
        error = unavailable
    if isinstance(error, QuotecheckError):
        headers = error.headers() if callable(getattr(error, "headers", None)) else None
        status = status_of(error)
        if status >= 500 and unavailable is None:
            current_app.logger.error("%s: %s", type(error).__name__, error)
        return render_problem(status, problem_type(error.type_slug), error.title, error.detail, error.problems,
                              with_retry_after(status, headers))
    if isinstance(error, HTTPException):
        # Werkzeug's errors have no problem type of their own: "about:blank" with the status phrase as
        # title is what RFC 9457 prescribes for them.
        status = error.code or 500
        headers = {k: v for k, v in error.get_headers() if k.lower() != "content-type"}
        detail = error.description or error.name
        limit = current_app.config.get("MAX_CONTENT_LENGTH")
        if status == 413 and limit:
            detail = f"the request body exceeds the limit of {limit:,} bytes"
        return render_problem(status, "about:blank", error.name, detail, headers=with_retry_after(status, headers))
    current_app.logger.exception("unhandled error")
    return render_problem(500, problem_type("internal-error"), "Internal server error",
                          "the server failed to handle the request; the error was logged")


def init_app(app: Flask) -> None:
    """Registers the one error handler: every exception a request raises is rendered by ``handle_error``."""
    app.register_error_handler(Exception, handle_error)
