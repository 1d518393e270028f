"""The record as HTML (Jinja, autoescaped) and as PDF (WeasyPrint), fetching nothing but its own stylesheet.

``record_pdf`` is the entry point: an approved record with signing keys gives the final PDF (the signed
record envelope and the DSSE verdict attestation attached, then PAdES-signed); anything else gives a DRAFT
(watermarked, the canonical unsigned record attached, no signature).
"""

from __future__ import annotations

import datetime as dt
import gc
import hashlib
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

import templates
from rules.advice.best_layout import describe_layout
from rules.errors import QuotecheckError
from service.record.attestation import sign_dsse, verdict_statement
from service.record.canonical import canonical_bytes, is_approved, record_digest
from service.record.cover import decided
from service.record.envelope import sign_record, verify_record
from service.record.errors import SigningError, UnsignableRecord
from service.record.free_text import ShownText
from service.record.isolation import isolate
from service.record.keys import SigningKeys
from service.record.listing import display_number, exact, flat
from service.record.pades import sign_pdf
from service.record.pointers import compact_pointers
from service.record.view import (
    SOURCE_LABELS,
    STATUS_LABELS,
    column_names,
    record_view,
    shown,
)

TEMPLATE_DIR = Path(templates.__file__).resolve().parent
ASSET_SCHEME = "quotecheck-asset:"
# The only files the PDF renderer will read: the template's own assets, by exact name.
ASSETS = {"record.css": "text/css"}

RECORD_ATTACHMENT = "commissioning-record.json"  # the signed record envelope (final PDF)
DRAFT_ATTACHMENT = "commissioning-record.draft.json"  # the canonical, unsigned record (draft PDF)
ATTESTATION_ATTACHMENT = "verdict.intoto.dsse.json"  # the DSSE envelope of the in-toto verdict statement
ADDENDUM_ATTACHMENT = "as-built-addendum.json"  # the signed as-built addendum envelope (service/record/addendum_pdf.py)


class FetchRefused(QuotecheckError):
    """The renderer was asked for a URL that is not one of the template's own assets (a defect: fails closed)."""

    title = "Render refused a URL"
    type_slug = "render-fetch-refused"


def url_fetcher() -> Any:
    """Returns a WeasyPrint URL fetcher that serves the template's assets and raises FetchRefused otherwise."""
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    class TemplateAssetFetcher(URLFetcher):
        """Serves ``quotecheck-asset:<name>`` for the names in ASSETS; raises for every other URL.

        ``fail_on_errors`` makes a refusal stop the rendering instead of leaving a silent gap: only the
        template can ask for a URL (record text is escaped), so a refused URL is a defect to surface.
        """

        def __init__(self) -> None:
            super().__init__(timeout=1, allowed_protocols=(), allow_redirects=False, fail_on_errors=True)
            self.refused: list[str] = []

        def fetch(self, url: str, headers: Any = None) -> Any:
            name = url.removeprefix(ASSET_SCHEME) if url.startswith(ASSET_SCHEME) else None
            if name not in ASSETS:
                self.refused.append(url)
                raise FetchRefused(f"refused to fetch {url!r}: the record renderer reads only its own template "
                                   f"assets ({', '.join(ASSET_SCHEME + n for n in ASSETS)})")
            return URLFetcherResponse(url, (TEMPLATE_DIR / name).read_bytes(), {"Content-Type": ASSETS[name]})

    return TemplateAssetFetcher()


LONG_RUN = 10  # characters of a sub-table cell without a break opportunity before one is added


def breakable(value: Any) -> Markup:
    """Returns a sub-table cell's text with break opportunities (``<wbr>``) after each ``_`` and ``/``, and
    every LONG_RUN characters of a longer run: a sub-table sizes its columns by their longest unbreakable run,
    so a rack name or a digest would push the table past the right margin, and a number would be split by
    ``overflow-wrap: anywhere``. Hidden characters are written out first (``shown``), then escaped."""
    pieces = []
    for run in re.split(r"(?<=[_/])", str(shown(value))):
        pieces += [escape(run[i:i + LONG_RUN]) for i in range(0, len(run), LONG_RUN)] or [""]
    return Markup("<wbr>").join(pieces)


@cache
def environment() -> Environment:
    """Returns the Jinja environment of the record templates: autoescape on for everything, undefined is an error."""
    env = Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, finalize=shown)
    env.filters.update(num=display_number, exact=exact, breakable=breakable, columns=column_names, flat=flat,
                       isolate=isolate,
                       layout=describe_layout,
                       pointers=lambda items: compact_pointers([i["pointer"] for i in items]),
                       status_label=lambda s: STATUS_LABELS.get(s, str(s).upper()),
                       source_label=lambda s: SOURCE_LABELS.get(s, str(s)), decided=decided)
    env.tests.update(list_like=lambda v: isinstance(v, list | tuple), shown_text=lambda v: isinstance(v, ShownText),
                     list_of_mappings=lambda v: isinstance(v, list | tuple) and bool(v)
                     and all(isinstance(i, Mapping) for i in v))
    return env


# What the signed PDF says of its own signature, by whether a time-stamping authority timestamps it
# (service/record/pades.py): the level it reaches, and where its signing time comes from.
SIGNATURE_LEVELS = {
    True: "PAdES B-LTA: its signing time is an RFC 3161 timestamp from a time-stamping authority, and the "
          "validation data to check it offline for years are embedded",
    False: "PAdES B-B: no time-stamping authority is configured, so nothing proves when it was signed beyond the "
           "service's own clock, and it can be checked only while the signing certificate is",
}


def record_html(record: Mapping[str, Any], *, draft: bool, signature_level: str | None = None) -> str:
    """Returns the record as HTML for the PDF (all record text escaped by Jinja autoescape); ``signature_level``:
    what a signed PDF says of its signature (SIGNATURE_LEVELS)."""
    return environment().get_template("record.html").render(record_view(record, draft=draft),
                                                            signature_level=signature_level)


# --- PDF -------------------------------------------------------------------------------------------------

_render_lock = threading.Lock()


@cache
def _font_configuration() -> Any:
    """Returns one FontConfiguration per process: building it per render costs a third of the render time.

    It is not documented as thread-safe, so renders in one process take turns (``_render_lock``); with the
    GIL, concurrent renders in threads would not run faster anyway.
    """
    from weasyprint.text.fonts import FontConfiguration

    return FontConfiguration()


@contextmanager
def _collector_paused_for_render() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector for one render, then frees the render's cyclic garbage at once.

    The one speed trick of the PDF path (issue 25: a trick stays only for >= 10 % of a reported figure). A
    render of the H200 record allocates some 700,000 objects, most alive until it ends, and leaves some 54,000
    in reference cycles. With the collector running, about 110 young, 10 middle and 1 full pass run per
    render + sign, the full one walking every object of the process; the cycles reach the oldest generation
    and wait for a full pass. Paused, everything the render allocates stays young, and the one young pass
    here, once the render's objects are unreachable, frees the cycles without walking older objects, so no
    full pass is owed later either. Collector time per render + sign (gc.callbacks, process time, after
    warm_up): 118-169 ms (14 %) running, 23-49 ms (3-6 %) paused, this young pass included. Render + sign
    alternating with the collector left running, process time, median of per-round ratios: 0.85-0.94 in five
    runs of 10-20 rounds (median 0.87). ``python -m bench pdf-targets``, 4 alternating runs each on the
    loaded two-core machine: render + sign 38.1 -> 31.5 one-page renders (medians). Peak RSS unchanged
    (``python -m bench pdf``: 155 MiB). A process that froze its start-up objects (service/startup.py) but
    loaded WeasyPrint after spends 11-12 % of render + sign in the collector; one that froze WeasyPrint too
    spends 7 %, and there the pause buys about 1 %.

    The collector is left as found: paused already (by a caller), it is neither resumed nor run here. Renders
    take turns (``_render_lock``), so no two renders pause and resume it across each other.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
            gc.collect(0)


def _write_pdf(html: str, attachments: list[tuple[str, bytes, str]], fetcher: Any, moment: dt.datetime) -> bytes:
    """Renders ``html`` with WeasyPrint; the document and its boxes are garbage once this returns."""
    from weasyprint import HTML, Attachment

    document = HTML(string=html, base_url=ASSET_SCHEME, url_fetcher=fetcher)
    files = [Attachment(string=data, name=name, description=description, created=moment, modified=moment,
                        relationship="Data", url_fetcher=fetcher)
             for name, data, description in attachments]
    return document.write_pdf(attachments=files, font_config=_font_configuration())


def html_to_pdf(html: str, attachments: list[tuple[str, bytes, str]], *,
                created: dt.datetime | None = None) -> bytes:
    """Returns the PDF of ``html`` with ``attachments`` (name, bytes, description) as embedded files."""
    from weasyprint.urls import FatalURLFetchingError

    fetcher = url_fetcher()
    moment = created or dt.datetime.now(dt.UTC)
    try:
        with _render_lock, _collector_paused_for_render():
            pdf = _write_pdf(html, attachments, fetcher, moment)
    except FatalURLFetchingError as error:
        raise FetchRefused(f"{error}: {error.__cause__}") from None
    if fetcher.refused:  # refusals are fatal above; this guards a WeasyPrint that swallowed one
        raise FetchRefused(f"the renderer asked for URLs it may not read: {', '.join(fetcher.refused)}")
    return pdf


def warm_up() -> None:
    """Loads what the first render would otherwise pay for: WeasyPrint, fonts, the template, pyHanko.

    Call once when a worker or API process starts; a render after it costs what every later render costs.
    """
    import pyhanko.sign.signers  # noqa: F401  (imported for its side effect: the module load)

    environment().get_template("record.html")
    html_to_pdf('<html><head><link rel="stylesheet" href="quotecheck-asset:record.css"></head><body class="final">'
                '<p>warm <b>up</b> <span class="mono">0</span><span class="kv">x</span></p></body></html>', [])


# What decides how a record looks in its PDF, beside the record itself (see renderer_digest).
RENDERER_SOURCES = (TEMPLATE_DIR / "record.html", TEMPLATE_DIR / "record.css", Path(__file__),
                    Path(__file__).with_name("view.py"), Path(__file__).with_name("charts.py"),
                    Path(__file__).with_name("free_text.py"), Path(__file__).with_name("cover.py"),
                    Path(__file__).with_name("listing.py"), Path(__file__).with_name("pointers.py"),
                    Path(__file__).with_name("isolation.py"))


@cache
def renderer_digest() -> str:
    """Returns ``sha256:<hex>`` of what decides a record's PDF besides the record: template, stylesheet, code.

    The template and stylesheet, the modules that build the view and draw the charts, and the WeasyPrint
    version: a stored DRAFT PDF is served only while this is what rendered it (service/approval/draft_pdfs.py).
    """
    from weasyprint import __version__ as weasyprint_version

    digest = hashlib.sha256(f"weasyprint {weasyprint_version}\n".encode())
    for source in RENDERER_SOURCES:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def draft_pdf(record: dict[str, Any]) -> bytes:
    """Returns the DRAFT PDF of a record: watermarked, unsigned, with the canonical record attached."""
    attachment = (DRAFT_ATTACHMENT, canonical_bytes(record),
                  "the canonical commissioning record (RFC 8785), an UNSIGNED draft")
    return html_to_pdf(record_html(record, draft=True), [attachment])


def signed_pdf(record: dict[str, Any], keys: SigningKeys, *, now: dt.datetime | None = None,
               envelope: dict[str, Any] | None = None) -> bytes:
    """Returns the final PDF of an approved record: envelope and DSSE attestation attached, PAdES-signed.

    ``envelope``: the record's signed envelope as already issued (the service signs a record once and keeps
    the envelope), attached as it is so the PDF carries the same signed bytes as the JSON record; it must be
    the envelope of ``record`` and verify with ``keys``. Without it the record is signed now.
    Raises UnsignableRecord when the record's latest decision is not an approval.
    """
    if not is_approved(record):
        raise UnsignableRecord("only an approved record is issued as a signed PDF; this record's latest decision is "
                               f"{(record.get('decisions') or [{}])[-1].get('action', 'none yet')}; "
                               "render it as a draft instead")
    now = now or dt.datetime.now(dt.UTC)
    if envelope is None:
        envelope = sign_record(record, keys, now=now)
    else:
        check = verify_record(envelope, keys.trusted())
        if not check.ok or check.record_digest != record_digest(record):
            reasons = "; ".join(check.all_reasons()) or (f"it signs record {check.record_digest}, not "
                                                         f"{record_digest(record)}")
            raise SigningError(f"the given envelope is not this record's, signed by these keys: {reasons}")
    attestation = sign_dsse(verdict_statement(record), keys)
    attachments = [
        (RECORD_ATTACHMENT, canonical_bytes(envelope), "the signed commissioning record (RFC 8785 JSON envelope)"),
        (ATTESTATION_ATTACHMENT, canonical_bytes(attestation), "the verdict as an in-toto Statement v1, DSSE-signed"),
    ]
    html = record_html(record, draft=False, signature_level=SIGNATURE_LEVELS[keys.tsa is not None])
    pdf = html_to_pdf(html, attachments, created=now)
    return sign_pdf(pdf, keys, record_id=record.get("record_id"))


def record_pdf(record: dict[str, Any], keys: SigningKeys | None = None, *, now: dt.datetime | None = None,
               envelope: dict[str, Any] | None = None) -> bytes:
    """Returns the PDF of a record: signed when ``keys`` are given (the record must be approved), else a DRAFT.

    ``envelope``: the record's signed envelope as issued, attached instead of a new signature (see signed_pdf).
    """
    if keys is None:
        return draft_pdf(record)
    if not isinstance(keys, SigningKeys):
        raise SigningError(f"keys must be SigningKeys, not {type(keys).__name__}")
    return signed_pdf(record, keys, now=now, envelope=envelope)
