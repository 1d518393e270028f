"""parsers.torch_memory on the layouts PyTorch prints (torch/cuda/memory.py).

No captured dump was found in public material (tests/data/README.md), so these inputs are written in
the documented layouts: ``print(torch.cuda.memory_stats())`` (an OrderedDict of
``<stat>.<pool>.<metric>`` byte counts), its JSON form, and lines naming ``max_memory_allocated`` /
``max_memory_reserved``, whose values PyTorch defines as ``allocated_bytes.all.peak`` and
``reserved_bytes.all.peak``. Byte counts are whole GiB multiples so each expectation reads off directly.
"""

import json

import pytest

from parsers import ParseError, torch_memory

GIB = 2**30

STATS = {
    "active.all.peak": 812,
    "active_bytes.all.peak": 71 * GIB,
    "allocated_bytes.all.allocated": 9_000 * GIB,
    "allocated_bytes.all.current": 20 * GIB,
    "allocated_bytes.all.freed": 8_980 * GIB,
    "allocated_bytes.all.peak": 71 * GIB,
    "allocated_bytes.large_pool.peak": 70 * GIB,
    "num_alloc_retries": 3,
    "num_ooms": 0,
    "reserved_bytes.all.current": 74 * GIB,
    "reserved_bytes.all.peak": 76 * GIB,
}
EXPECTED_FROM_STATS = {
    "max_allocated_gib": 71.0,
    "max_reserved_gib": 76.0,
    "current_allocated_gib": 20.0,
    "current_reserved_gib": 74.0,
    "num_alloc_retries": 3,
    "num_ooms": 0,
    "source": "memory_stats",
}


def parse_error(text: str) -> str:
    with pytest.raises(ParseError) as caught:
        torch_memory.parse(text)
    return str(caught.value)


def ordered_dict_repr(stats: dict) -> str:
    # the layout print(torch.cuda.memory_stats()) gives: OrderedDict([('key', value), ...])
    return "OrderedDict([" + ", ".join(f"({key!r}, {value})" for key, value in stats.items()) + "])"


def test_memory_stats_printed_as_an_ordered_dict():
    assert torch_memory.parse(ordered_dict_repr(STATS)) == EXPECTED_FROM_STATS


def test_memory_stats_dumped_as_json_or_a_plain_dict():
    assert torch_memory.parse(json.dumps(STATS, indent=2)) == EXPECTED_FROM_STATS
    assert torch_memory.parse(repr(STATS)) == EXPECTED_FROM_STATS


def test_named_lines_with_the_largest_of_several_ranks_kept():
    text = "\n".join(
        [
            "[rank0] torch.cuda.max_memory_allocated() = 76235669504",
            "[rank1] torch.cuda.max_memory_allocated() = 75161927680",
            "max_memory_reserved: 81604378624",
        ]
    )

    result = torch_memory.parse(text)

    assert (result["max_allocated_gib"], result["max_reserved_gib"]) == (71.0, 76.0)
    assert (result["current_allocated_gib"], result["num_ooms"], result["source"]) == (None, None, "named")


def test_bare_numbers_are_allocated_then_reserved():
    result = torch_memory.parse(f"{71 * GIB}\n{76 * GIB}\n")

    assert (result["max_allocated_gib"], result["max_reserved_gib"], result["source"]) == (71.0, 76.0, "bare")


def test_one_bare_number_is_the_allocated_peak():
    result = torch_memory.parse(str(40 * GIB))

    assert (result["max_allocated_gib"], result["max_reserved_gib"]) == (40.0, None)


def test_reserved_below_allocated_is_rejected_as_swapped():
    assert parse_error(f"{76 * GIB}\n{71 * GIB}") == (
        f"line 2: expected max_memory_reserved ({71 * GIB}) to be at least max_memory_allocated ({76 * GIB})"
    )


def test_a_value_with_units_is_not_a_byte_count():
    assert parse_error("max_memory_allocated: 71.0GiB") == (
        "line 1: expected max_memory_allocated as a whole number of bytes, found '71.0GiB'"
    )


def test_truncated_memory_stats_repr_is_rejected():
    text = ordered_dict_repr(STATS)[:200]

    assert parse_error(text) == "line 1: expected ')' closing OrderedDict(...), found end of input"


def test_stats_without_the_documented_keys_are_rejected():
    assert parse_error('{"foo": 1}') == (
        "line 1: expected memory_stats() keys such as 'allocated_bytes.all.peak', found none"
    )


def test_a_negative_stat_names_its_line():
    text = json.dumps({**STATS, "reserved_bytes.all.peak": -1}, indent=1)
    line = next(i + 1 for i, row in enumerate(text.splitlines()) if "reserved_bytes.all.peak" in row)

    assert parse_error(text) == f"line {line}: expected reserved_bytes.all.peak as a whole number of bytes, found -1"


def test_text_that_is_no_memory_figure_is_rejected():
    assert parse_error("CUDA out of memory.") == (
        "line 1: expected max_memory_allocated/max_memory_reserved bytes or memory_stats(), found 'CUDA out of memory.'"
    )
