"""Who may see what: a token of scope ``own`` sees only the submissions its user submitted (and their records
and tasks); anything else is answered as if it did not exist."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session, col, select

from service.accounts.actors import Actor
from service.errors import NotFound
from service.persistence.models import ApiToken, Submission


def owner_of(session: Session, submission_id: str) -> int | None:
    """Returns the id of the user who submitted ``submission_id`` (None when there is no such submission)."""
    return session.exec(select(ApiToken.user_id).join(Submission, col(Submission.submitter_token_id) == ApiToken.id)
                        .where(Submission.id == submission_id)).first()


def may_see(session: Session, actor: Actor, submission_id: str | None) -> bool:
    """Returns whether ``actor`` may read the submission: always, unless their token's scope is ``own``
    and someone else submitted it."""
    if actor.scope != "own":
        return True
    return submission_id is not None and owner_of(session, submission_id) == actor.user_id


def ensure_visible(session: Session, actor: Actor, submission_id: str) -> None:
    """Raises NotFound, as for a submission that does not exist, when ``actor`` may not see it."""
    if not may_see(session, actor, submission_id):
        raise NotFound(f"there is no submission {submission_id!r}")


def own_submissions(actor: Actor) -> list[Any]:
    """Returns the conditions that restrict a query of submissions to those ``actor`` may see."""
    if actor.scope != "own":
        return []
    tokens = select(ApiToken.id).where(ApiToken.user_id == actor.user_id)
    return [col(Submission.submitter_token_id).in_(tokens)]
