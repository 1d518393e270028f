"""Python's cyclic garbage collector paused around work that allocates many objects and frees them by refcount.

The collector runs a generation's pass every few hundred allocations and walks every object tracked in it.
Parsing a JSON body (schemas/json_reader.py) and rendering a record's PDF (service/record/render.py) allocate
hundreds of thousands of containers that live until the work ends and make few or no cycles, so those passes
find next to nothing to free and took half of a 500 kB body's parse and a tenth of a record's render.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Yields with the cyclic garbage collector disabled, then leaves it as it found it, on error too.

    A collector already disabled (by the caller, or by an enclosing pause) stays disabled. What refcounting
    does not free meanwhile is collected on the collector's next run after it is enabled again.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
