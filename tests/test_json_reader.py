"""The one reader of outside JSON (schemas/json_reader.py): what it refuses, where, and in which words."""

from __future__ import annotations

import json

import pytest

import schemas
from schemas.json_reader import (
    MAX_JSON_DEPTH,
    MAX_LISTED_PROBLEMS,
    SAFE_INTEGER,
    JsonTooLarge,
    NotJson,
    UnacceptableJson,
    read_json,
    strings_and_odd_numbers,
    strings_numbers_and_tuples,
    unrepresentable_numbers,
)
from schemas.text import _texts, hidden_text_problems, holds_hidden_text


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def test_nesting_up_to_the_limit_is_read_and_one_level_more_is_not() -> None:
    assert read_json(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(NotJson, match="more than 64 levels deep"):
        read_json(nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(NotJson, match="more than 64 levels deep"):
        read_json("[" * 100_000 + "]" * 100_000)  # deeper than Python's parser recurses


def test_a_repeated_member_name_is_named_with_its_pointer_wherever_it_is() -> None:
    with pytest.raises(NotJson) as refused:
        read_json('{"a": [{"b": 1}, {"x~/y": 1, "x~/y": 2, "c": 0, "c": 1}]}', "q.json")

    assert refused.value.detail == "q.json is not acceptable JSON: member name 'c', 'x~/y' appears more than once in " \
                                   "one object"
    assert [p.pointer for p in refused.value.problems] == ["/a/1/c", "/a/1/x~0~1y"]


def test_numbers_json_carries_exactly_are_read_and_others_are_named() -> None:
    assert read_json(json.dumps([SAFE_INTEGER, -SAFE_INTEGER, 1e308, 12345678901234567.5])) is not None
    with pytest.raises(UnacceptableJson) as refused:
        read_json('{"big": 9007199254740992, "small": -9007199254740992, "huge": 1e400, "ok": 1}')

    assert refused.value.detail == "the body contains a number JSON does not carry exactly"
    assert [p.pointer for p in refused.value.problems] == ["/big", "/huge", "/small"]
    assert refused.value.problems[0].message == "9007199254740992 is outside the numbers JSON carries exactly " \
                                                "(±9,007,199,254,740,991)"


def test_nul_and_lone_surrogates_are_listed_together_by_pointer() -> None:
    with pytest.raises(UnacceptableJson) as refused:
        read_json('{"n": "a\\u0000", "s": ["\\ud800"], "k\\udc00": 1}')

    assert refused.value.detail == ("the body contains a lone surrogate, which is not a character; it also contains "
                                    "the character U+0000 (NUL), which text may not hold here")
    assert [p.pointer for p in refused.value.problems] == ["/k<U+DC00>", "/n", "/s/0"]
    assert refused.value.problems[1].message == "must not contain U+0000 (NUL)"
    assert "U+D800 (a lone surrogate" in refused.value.problems[2].message


def test_a_valid_surrogate_pair_is_one_character() -> None:
    assert read_json('"\\ud83d\\udda5"') == "\U0001f5a5"


def test_at_most_a_hundred_places_are_listed_and_the_detail_counts_them_all() -> None:
    with pytest.raises(UnacceptableJson) as refused:
        read_json(json.dumps([2**60] * 250))

    assert len(refused.value.problems) == MAX_LISTED_PROBLEMS
    assert "(250 places; the first 100 are listed)" in refused.value.detail


@pytest.mark.parametrize(("data", "words"), [
    (b"\xff\xfe{}", "is not UTF-8 text"),
    ('{"x": NaN}', "NaN is not a JSON number"),
    ("{not json", "is not valid JSON"),
    ("[" + "9" * 5000 + "]", "digits; no number here needs that many"),
])
def test_what_is_not_json_says_why(data: bytes | str, words: str) -> None:
    with pytest.raises(NotJson, match=words):
        read_json(data)


def test_the_size_is_checked_before_anything_is_parsed_and_a_byte_order_mark_is_ignored() -> None:
    with pytest.raises(JsonTooLarge, match="f.json is 11 bytes; the limit is 10 bytes"):
        read_json(b'"xxxxxxxxx"', "f.json", max_bytes=10)
    assert read_json(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}
    assert read_json('\ufeff{"a": 1}') == {"a": 1}


def test_unrepresentable_numbers_of_a_parsed_document_are_named_in_the_readers_words() -> None:
    problems = unrepresentable_numbers({"a": [1, 2**53, {"b": float("inf")}], "c": True})

    assert [(p.pointer, p.message.split(" is ")[0]) for p in problems] == [("/a/1", "9007199254740992"),
                                                                           ("/a/2/b", "inf")]


class _Names(dict):
    pass


@pytest.mark.parametrize("document", [
    {"a": [1, 2.5, None, True, "x", {"b": "y"}]},
    {"a": [1, 2**53, {"b": float("inf")}], "c": True},
    [float("nan")], [-(2**53)], [2**53 - 1, -(2**53 - 1)], {"a": (1, 2**60)},
    _Names({"k\u202e": [float("-inf")]}), {"n": ["t\u200b", "plain"]}, "just text", 7,
])
def test_the_one_walk_finds_what_the_locating_walks_locate(document) -> None:
    texts, odd = strings_and_odd_numbers(document)
    assert odd == bool(unrepresentable_numbers(document))
    assert holds_hidden_text(texts) == bool(hidden_text_problems(document))
    assert sorted(texts) == sorted(_texts(document))
    assert strings_numbers_and_tuples(document) == (texts, odd, schemas._holds_tuple(document))


def test_the_one_walk_finds_a_tuple_wherever_it_is() -> None:
    assert strings_numbers_and_tuples({"a": [{"b": ("x",)}]})[2]
    assert strings_numbers_and_tuples((1,))[2]
    assert not strings_numbers_and_tuples({"a": [{"b": ["x"]}]})[2]
