"""What a server process (a gunicorn worker, a Celery worker) does once its app is loaded, before its first job.

The cyclic garbage collector's full collections walk every object it tracks. A server process holds, for
as long as it lives, the Flask app, the rules engine, the policy, the catalogue and the schemas' validators:
about 150,000 tracked objects that no collection can free. A full collection, set off now and then by the
allocations of an evaluation, walked them all (about 3 ms, averaged over the evaluations of the DGX example,
where the evaluation itself takes 10-20 ms). ``gc.freeze()`` moves the objects tracked at that moment into a
permanent generation that collections skip; what the process creates afterwards is collected as before.
It is the start-up practice the ``gc`` module's documentation describes for long-lived server processes.

It is called once, at start-up, and never inside an evaluation: a freeze during a request would also move
that request's objects, which would then never be collected.
"""

from __future__ import annotations

import gc

from rules.evaluate import load_defaults


def settle_after_start_up() -> None:
    """Loads what every evaluation reads (rules.evaluate.load_defaults), then freezes the objects the process
    holds so far out of the garbage collector's walks (``gc.freeze``)."""
    load_defaults()
    gc.collect()  # the start-up's own garbage goes first, so that none of it is frozen
    gc.freeze()
