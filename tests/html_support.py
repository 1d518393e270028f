"""Reading a page as a browser builds its tree: each text with the elements it stands in (Python's html.parser)."""

from __future__ import annotations

from html.parser import HTMLParser

# The HTML elements that have no end tag.
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})


class Texts(HTMLParser):
    """Collects each text of a page with the names of the elements it stands in, innermost last."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.texts: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        self.texts.append((data, tuple(self.open)))


def texts_of(page: str) -> list[tuple[str, tuple[str, ...]]]:
    """Returns every text of ``page`` with the elements it stands in."""
    parser = Texts()
    parser.feed(page)
    parser.close()
    return parser.texts
