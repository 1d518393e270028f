"""Right-to-left text a person wrote is isolated on the pages (service/record/isolation.py): a Hebrew vendor, a quote
id and an Arabic justification beside figures stand in a ``<bdi>`` wherever the submission page and the queue show
them, so they cannot move the digits, dates and separators written beside them; a ``<title>``, where no element may
stand, holds them between FSI and PDI.

Read with Python's html.parser, as a browser builds the tree, not with a pattern over the markup.
"""

from __future__ import annotations

from api_support import blocking_checks, url
from ui_support import sign_in

from tests.html_support import texts_of

VENDOR = "שרתים בע״מ"
QUOTE_ID = "Q-17"
# An Arabic justification with figures in it: "approved: the rack carries 8 × H200 at 1,234,567 watts"
JUSTIFICATION = "مقبول: الرف rack-3 يحمل 8 × H200 بقدرة 1,234,567 واط"
FSI, PDI = "\u2068", "\u2069"


def occurrences(page: str, text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Returns each text node of ``page`` that holds ``text``, with the elements it stands in."""
    return [(data, elements) for data, elements in texts_of(page) if text in data]


def assert_isolated(page: str, text: str, *, at_least: int) -> None:
    found = occurrences(page, text)
    assert len(found) >= at_least, (text, found)
    for data, elements in found:
        if elements[-1:] == ("title",):
            assert f"{FSI}{text}{PDI}" in data, data  # no element may stand in a <title>
        else:
            assert elements[-1] == "bdi" and data == text, (text, data, elements)


def test_rtl_vendor_quote_id_and_justification_are_isolated_on_the_quote_page_and_the_queue(
        app, as_role, submission_document):
    # Given a quote of a Hebrew-named vendor, one of whose checks a reviewer waived with an Arabic justification
    submission_document["quote"].update(vendor=VENDOR, quote_id=QUOTE_ID)
    submitter = as_role("submitter")
    created = submitter.post("/api/v1/submissions", json=submission_document)
    assert created.status_code == 201, created.get_json()
    view = created.get_json()
    reviewer = as_role("reviewer")
    waived = reviewer.post(url(view["id"], "checks", blocking_checks(view)[0], "waivers"),
                           json={"justification": JUSTIFICATION}, if_match=view["etag"])
    assert waived.status_code == 201, waived.get_json()

    # When a reviewer opens the quote's page and the queue of every quote
    browser = sign_in(app, reviewer)
    quote_page = browser.text(f"/ui/submissions/{view['id']}")
    queue_page = browser.text("/ui/queue/all")

    # Then every text of theirs stands alone in a <bdi> (the title and heading, the check's waiver, the waivers
    # table; the queue's row), so that no figure, date or separator beside it is reordered with it
    assert_isolated(quote_page, VENDOR, at_least=2)
    assert_isolated(quote_page, QUOTE_ID, at_least=2)
    assert_isolated(quote_page, JUSTIFICATION, at_least=2)
    assert_isolated(queue_page, VENDOR, at_least=1)
    assert_isolated(queue_page, QUOTE_ID, at_least=1)
    # who submitted and who waived are names people chose: isolated too ("by <name>, 6 Dec 2026 …")
    assert_isolated(quote_page, submitter.name, at_least=1)
    assert_isolated(quote_page, reviewer.name, at_least=1)


def test_hidden_characters_in_stored_text_are_written_out_inside_the_isolate(app):
    # A text stored before intake refused bidi controls cannot close its isolate early (U+2069 written out)
    from service.record.isolation import isolate, isolate_text

    assert str(isolate("abc\u2069 12")) == "<bdi>abc&lt;U+2069&gt; 12</bdi>"
    assert str(isolate_text("<b>\u202e")) == f"{FSI}&lt;b&gt;&lt;U+202E&gt;{PDI}"
