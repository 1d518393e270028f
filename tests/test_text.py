"""The hidden-character class: its stored table is what a scan of this Python's Unicode data finds."""

from __future__ import annotations

import unicodedata

import pytest

from schemas import text


def test_the_stored_table_is_what_the_scan_finds() -> None:
    if unicodedata.unidata_version != text._HIDDEN_RANGES_UNICODE:
        pytest.skip(f"this Python has Unicode {unicodedata.unidata_version}; the table is for "
                    f"{text._HIDDEN_RANGES_UNICODE} and is not used here")
    assert text._HIDDEN_RANGES == text.scanned_hidden_ranges()


def test_another_unicode_version_is_scanned(monkeypatch: pytest.MonkeyPatch) -> None:
    scans = []
    monkeypatch.setattr(text, "_HIDDEN_RANGES_UNICODE", "0.0.0")
    monkeypatch.setattr(text, "scanned_hidden_ranges", lambda: scans.append(1) or ((0x202E, 0x202E),))
    assert text.hidden_ranges() == ((0x202E, 0x202E),)
    assert scans == [1]


@pytest.mark.parametrize("character", ["\u202e", "\u200b", "\x1b", "\ud800", "\u2028", "\u3164", "\U000e0041"])
def test_the_class_matches_each_kind_of_hidden_character(character: str) -> None:
    assert text.hidden_characters(f"EUR {character}250") == [character]


@pytest.mark.parametrize("character", ["\t", "\n", "\r", " ", "\ufe0f", "\u0301", "é", "\U0001f600"])
def test_the_class_leaves_ordinary_characters(character: str) -> None:
    assert text.hidden_characters(f"a{character}b") == []
