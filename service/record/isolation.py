"""Text a person wrote, isolated from the text beside them (Unicode bidirectional isolates).

A vendor, quote id, rack name or justification in Hebrew or Arabic sets the direction of the neutral characters
and digits that follow it: "by שרה, 6 Dec 2026" displays its date's "6" before the name, and a figure beside
a right-to-left label can appear to belong to another. The bidirectional algorithm keeps an isolate's content
and its surroundings apart (UAX #9, rules X5a-X5c), so the pages and the record's PDF write every such text in
an isolate of its own:

- ``isolate``: ``<bdi>text</bdi>``, its direction taken from its own first strong character (HTML's ``bdi``);
- ``isolate_text``: FSI text PDI (U+2068, U+2069) where no element may stand (a page's ``<title>``).

Each writes the text out as ``shown`` does (hidden characters as ``<U+XXXX>``, so a stored ``U+2069`` cannot
close the isolate early), escapes it, and returns Markup. WeasyPrint (the PDF) knows neither ``unicode-bidi`` nor
``dir="auto"``, but lays each inline element's text out with a Pango layout of its own: a ``bdi`` is kept apart
there too, its text set in the paragraph's direction (left to right), in which a right-to-left name still reads
in its own order (tests/record/test_record_bidi.py reads it back with pdftotext).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from schemas.text import visible

FIRST_STRONG_ISOLATE, POP_DIRECTIONAL_ISOLATE = "\u2068", "\u2069"


def _shown(value: Any) -> Any:
    return value if isinstance(value, Markup) else visible(str(value))


def isolate(value: Any) -> Markup:
    """Returns ``value`` as HTML in a ``<bdi>`` of its own: text written out as ``shown`` does and escaped, Markup
    (a figure already isolated, a link) as it is."""
    return Markup("<bdi>%s</bdi>") % _shown(value)


def isolate_text(value: Any) -> Markup:
    """Returns ``value`` written out as ``shown`` does between FSI and PDI: the isolate of a text where no element
    may stand (a ``<title>``). Markup, so that ``shown`` does not write the two out."""
    return Markup(FIRST_STRONG_ISOLATE) + Markup.escape(_shown(value)) + Markup(POP_DIRECTIONAL_ISOLATE)
