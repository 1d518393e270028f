"""What-if of a stored submission, for the pages: its current revision evaluated again with levers moved
(rules/advice/what_if.py). Read-only: nothing is stored, so any actor who may see the submission may ask."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rules.advice.what_if import Flip, Levers, WhatIf
from rules.catalogue import load_catalogue
from service.accounts.auth import Actor
from service.app.evaluation import policy
from service.approval import store
from service.persistence.db import get_db
from service.persistence.models import Submission


@dataclass(frozen=True)
class WhatIfView:
    """What the what-if page shows: the submission, its outcome as submitted and with the levers, the flips."""

    submission: Submission
    levers: Levers
    base: dict[str, Any]
    shown: dict[str, Any]
    submitted: dict[str, Any]  # the levers' values as submitted: mfu (stated or modelled), nodes, window_days
    flips: list[Flip]
    curve: list[dict[str, Any]]
    evaluations: int


def what_if(actor: Actor, submission_id: str, levers: Levers, now: datetime) -> WhatIfView:
    """Returns the what-if of the current revision of a submission ``actor`` may see (NotFound otherwise)."""
    with get_db().session() as session:
        snap = store.load_visible(session, actor, submission_id)
        document = store.current_document(session, submission_id)
    what = WhatIf(document, policy(), load_catalogue(), now)
    base, shown, quoted = what.at(Levers()), what.at(levers), what.training_nodes()
    submitted = {"mfu": base["mfu"], "nodes": quoted[0] if quoted else None, "window_days": base["window_days"]}
    flips, curve = what.flips(levers), what.curve(levers)
    return WhatIfView(snap.submission, levers, base, shown, submitted, flips, curve, what.evaluations)
