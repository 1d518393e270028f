"""Stand-ins for a dependency that hangs: a TCP server on 127.0.0.1 that accepts connections and never answers.

A Redis or PostgreSQL that is paused (SIGSTOP), or a proxy in front of one whose upstream died, looks like
this to a client: the connection opens (the kernel completes the handshake), then nothing comes back.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def hung_server() -> Iterator[int]:
    """Yields the port of a server that accepts every connection and never sends a byte; closes it afterwards."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(connection)  # kept open, read from by nobody

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        for connection in accepted:
            connection.close()
