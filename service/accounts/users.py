"""Users: the people behind API tokens. Four-eyes and a token's scope compare users, never tokens.

A user's name is shown as given, after Unicode NFKC and with surrounding blanks trimmed (inner runs of
blanks become one space). Its identity is ``name_key``: what the name reads as (service/accounts/lookalikes.py,
the skeleton of Unicode Technical Standard #39 of the case-folded NFKC name, letters and digits only).
``Alice``, ``alice ``, ``alice.`` and ``ALICE`` are therefore one user; so are ``Ada Lovelace`` and
``ada.lovelace``, and so are names that only look alike: ``аlice`` with a Cyrillic ``а``, ``alıce`` with a
dotless ``ı``, ``Alİce``. A second user whose name reads as an existing one is refused, so that no one can
approve as someone who looks like the submitter. Invisible letters (Hangul fillers, the combining grapheme
joiner, Khmer inherent vowels: schemas/text.py) and variation selectors are refused in a name outright.
"""

from __future__ import annotations

import unicodedata
from datetime import datetime

from sqlmodel import Session, col, select

from schemas.text import code_point, hidden_characters, visible
from service.accounts.lookalikes import identity
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
    """Returns the identity of a user name: what it reads as (``lookalikes.identity``)."""
    return identity(raw)


def check_name(raw: str) -> tuple[str, str]:
    """Returns (display name, identity key) of ``raw``; InvalidRequest naming what is wrong with it."""
    name = display_name(raw)
    hidden = hidden_characters(raw) + hidden_characters(name) + [
        c for c in raw if unicodedata.name(c, "").startswith("VARIATION SELECTOR")]
    if hidden:
        shown = ", ".join(code_point(c) for c in dict.fromkeys(hidden))
        raise InvalidRequest(f"user name {visible(raw)!r} contains {shown}: a name may not hold invisible "
                             "characters, which would let it read as another user's")
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
    """Returns a new user named ``raw``; InvalidRequest for a bad name or one that an existing user has.

    A name that reads as an existing user's once its invisible characters are left out is refused naming that
    user (``alice`` with a U+034F or a Hangul filler is alice's name), before any other fault of the name."""
    readable = "".join(c for c in raw if c not in set(hidden_characters(raw)))
    existing = session.exec(select(User).where(User.name_key == name_key(readable))).first() if readable else None
    name, key = (display_name(raw), None) if existing is not None else check_name(raw)
    if existing is not None:
        same = "" if existing.name == name else (f" (names that read alike are one person, whatever their case, "
                                                 f"blanks, punctuation, invisible or look-alike letters: "
                                                 f"{visible(name)!r} is {existing.name!r})")
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
