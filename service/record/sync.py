"""pyHanko's synchronous wrappers (which call asyncio.run) made callable from a thread that already runs a loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def run_off_loop(function: Any, *args: Any, **kwargs: Any) -> Any:
    """Runs a pyHanko sync wrapper (which calls asyncio.run) in a thread when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = function(*args, **kwargs)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
