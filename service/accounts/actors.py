"""Who acts: the one description of a caller that the API, the pages, the CLI, the workers and the audit log share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Actor:
    """Who acts: the user's name, the token's role (and prefix, which identifies the token without its secret).

    ``user_id`` is what the four-eyes rule compares; ``scope`` is the token's (service.accounts.auth.Scope).
    """

    name: str
    role: str
    token_id: int | None = None
    token_prefix: str | None = None
    user_id: int | None = None
    scope: str = "all"
