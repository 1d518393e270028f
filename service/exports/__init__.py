"""Exports of an evaluation for the tools that read check results: SARIF 2.1.0, JUnit XML and CSV.

``quotecheck evaluate FILE --format sarif|junit|csv`` and ``GET /api/v1/submissions/{id}/checks?format=…``
build an ``Export`` (service/exports/model.py: the record, the checks with their state after waivers, and
the submission document they point into) and render it with ``render``. docs/exports.md describes each
format for its readers.
"""

from __future__ import annotations

from collections.abc import Callable

from service.exports import junit, sarif, tables
from service.exports.model import Export

# Each format's media type, as the API serves it.
MEDIA_TYPES = {
    "sarif": "application/sarif+json",
    "junit": "application/xml",
    "csv": tables.CSV_MEDIA_TYPE,
}
FORMATS = tuple(MEDIA_TYPES)

_RENDERERS: dict[str, Callable[[Export], str]] = {"sarif": sarif.render, "junit": junit.render,
                                                  "csv": tables.checks_csv}


def render(fmt: str, export: Export) -> str:
    """Returns ``export`` in ``fmt`` (one of FORMATS) as text."""
    return _RENDERERS[fmt](export)
