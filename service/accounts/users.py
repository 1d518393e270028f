"""Users: the people behind API tokens. Four-eyes and a token's scope compare users, never tokens.

A user's name is shown as given, after Unicode NFKC and with surrounding blanks trimmed (inner runs of
blanks become one space). Its identity is ``name_key``: the NFKC name, case-folded, with everything but
letters, marks and digits removed. ``Alice``, ``alice ``, ``alice.`` and ``ALICE`` are therefore one user;
so are ``Ada Lovelace`` and ``ada.lovelace``. A second user whose name differs from an existing one only
by case, blanks or punctuation is refused, so two people never share an identity by accident.
"""

from __future__ import annotations

import unicodedata
from datetime import datetime

from sqlmodel import Session, col, select

from service.errors import InvalidRequest
from service.persistence import audit
from service.persistence.models import User

MAX_NAME_LENGTH = 200
# Besides letters, marks, digits and single spaces, names may contain these.
NAME_PUNCTUATION = frozenset("._@+-'")


def display_name(raw: str) -> str:
    """Returns ``raw`` as shown: NFKC, surrounding blanks removed, inner runs of blanks one space."""
    return " ".join(unicodedata.normalize("NFKC", raw).split())


def name_key(raw: str) -> str:
    """Returns the identity of a user name: NFKC, case-folded, letters, marks and digits only."""
    folded = unicodedata.normalize("NFKC", raw).casefold()
    # Case folding can produce text that is no longer NFKC (e.g. from some ligatures): normalise again.
    return unicodedata.normalize("NFKC", "".join(c for c in folded if unicodedata.category(c)[0] in "LMN"))


def check_name(raw: str) -> tuple[str, str]:
    """Returns (display name, identity key) of ``raw``; InvalidRequest naming what is wrong with it."""
    name = display_name(raw)
    odd = sorted({c for c in name if c != " " and c not in NAME_PUNCTUATION
                  and unicodedata.category(c)[0] not in "LMN"})
    if odd:
        shown = ", ".join(f"U+{ord(c):04X}" for c in odd[:5])
        raise InvalidRequest(f"user name {name!r} may contain only letters, digits, spaces and ._@+-' "
                             f"(found {shown})")
    key = name_key(name)
    if not key:
        raise InvalidRequest(f"user name {raw!r} needs at least one letter or digit")
    if len(name) > MAX_NAME_LENGTH or len(key) > MAX_NAME_LENGTH:
        raise InvalidRequest(f"user name {name[:40]!r}… is longer than {MAX_NAME_LENGTH} characters")
    return name, key


def find_user(session: Session, raw: str) -> User | None:
    """Returns the user whose identity matches ``raw`` (case, blanks and punctuation folded), if any."""
    key = name_key(raw)
    if not key:
        return None
    return session.exec(select(User).where(User.name_key == key)).first()


def get_user(session: Session, raw: str) -> User:
    """Returns the user named ``raw``; InvalidRequest when there is none."""
    user = find_user(session, raw)
    if user is None:
        raise InvalidRequest(f"there is no user {display_name(raw)!r}; create one with `quotecheck user create NAME`")
    return user


def create_user(session: Session, raw: str, now: datetime) -> User:
    """Returns a new user named ``raw``; InvalidRequest for a bad name or one that an existing user has."""
    name, key = check_name(raw)
    existing = session.exec(select(User).where(User.name_key == key)).first()
    if existing is not None:
        same = "" if existing.name == name else (f" (names that differ only by case, blanks or punctuation "
                                                 f"are one person: {name!r} is {existing.name!r})")
        raise InvalidRequest(f"a user {existing.name!r} exists already{same}")
    user = User(name=name, name_key=key, created_at=now)
    session.add(user)
    session.flush()
    audit.append(session, action="user.created", actor=None, occurred_at=now,
                 detail={"user_id": user.id, "name": name})
    return user


def ensure_user(session: Session, raw: str, now: datetime) -> tuple[User, bool]:
    """Returns the user named ``raw`` (created when there is none) and whether it was created now."""
    user = find_user(session, raw)
    if user is not None:
        return user, False
    return create_user(session, raw, now), True


def disable_user(session: Session, raw: str, now: datetime) -> User:
    """Returns the user named ``raw`` after disabling it: its tokens get 401 from now on."""
    user = get_user(session, raw)
    if user.disabled_at is None:
        user.disabled_at = now
        session.add(user)
        session.flush()
        audit.append(session, action="user.disabled", actor=None, occurred_at=now,
                     detail={"user_id": user.id, "name": user.name})
    return user


def list_users(session: Session) -> list[User]:
    """Returns every user, oldest first."""
    return list(session.exec(select(User).order_by(col(User.id))).all())
