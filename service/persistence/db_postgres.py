"""PostgreSQL connections that cannot hang: bounded connect, statement and socket waits (psycopg 3).

libpq's ``connect_timeout`` bounds opening a connection and the server's ``statement_timeout`` bounds a
statement it runs, but neither helps when the server stops answering on an open connection (paused,
partitioned, or a proxy that swallows the traffic): psycopg then waits for the socket for ever. Every
wait psycopg does on an open connection goes through ``Connection.wait``, which takes a timeout; the
connection class here gives each such wait the socket timeout and, when it expires, closes the connection
(its protocol state is unknown by then) so that the pool discards it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# libpq counts connect_timeout in whole seconds and treats anything below 2 as 2.
LIBPQ_MIN_CONNECT_TIMEOUT_S = 2


@dataclass(frozen=True)
class Timeouts:
    """How long a PostgreSQL connection may take to open, a statement to run, and the server to stay silent."""

    connect_s: float
    statement_s: float | None
    socket_s: float | None


@functools.cache
def deadline_connection_class() -> type:
    """Returns the psycopg connection class whose every wait on the server ends after its ``socket_timeout_s``.

    Built on first use: psycopg is the optional ``postgres`` extra, absent where only SQLite is used.
    """
    import psycopg

    # psycopg raises this private subclass of OperationalError when a wait's timeout expires.
    wait_timeout = getattr(psycopg.errors, "_WaitTimeout", psycopg.OperationalError)

    class DeadlineConnection(psycopg.Connection):
        socket_timeout_s: float | None = None

        def wait(self, gen: Any, interval: float | None = None, timeout: float | None = None) -> Any:
            if timeout is None:
                timeout = self.socket_timeout_s
            options: dict[str, Any] = {"timeout": timeout}
            if interval is not None:
                options["interval"] = interval
            try:
                return super().wait(gen, **options)
            except wait_timeout as error:
                if timeout is None or type(error) is not wait_timeout:
                    raise
                # The server may answer the abandoned request later; the connection cannot be used again.
                self.pgconn.finish()
                raise psycopg.OperationalError(f"the database server sent nothing back for {timeout} s "
                                               "(DATABASE_SOCKET_TIMEOUT_S); the connection was closed") from None

    return DeadlineConnection


def connect_args(timeouts: Timeouts) -> dict[str, Any]:
    """Returns the psycopg connection parameters that apply the connect and statement timeouts."""
    args: dict[str, Any] = {"connect_timeout": max(LIBPQ_MIN_CONNECT_TIMEOUT_S, math.ceil(timeouts.connect_s))}
    if timeouts.statement_s:
        args["options"] = f"-c statement_timeout={round(timeouts.statement_s * 1000)}"
    return args


def connect(cargs: Any, cparams: dict[str, Any], timeouts: Timeouts) -> Any:
    """Returns a new connection (SQLAlchemy's ``do_connect`` arguments) whose waits end after the socket timeout."""
    connection = deadline_connection_class().connect(*cargs, **cparams)
    connection.socket_timeout_s = timeouts.socket_s
    return connection


@contextmanager
def without_socket_timeout(dbapi_connection: Any) -> Iterator[None]:
    """Lifts the socket timeout of one connection for the block (a migration may wait long on a lock)."""
    if not hasattr(dbapi_connection, "socket_timeout_s"):
        yield
        return
    kept, dbapi_connection.socket_timeout_s = dbapi_connection.socket_timeout_s, None
    try:
        yield
    finally:
        dbapi_connection.socket_timeout_s = kept
