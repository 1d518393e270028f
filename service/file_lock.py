"""An exclusive lock on a file, held across processes (fcntl.flock), for the keys an instance folder keeps and
the processes that may create them at once (service/record/keys.py, service/webhooks/secret_box.py)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (created if missing) for the block."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
