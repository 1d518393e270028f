"""Parsers for the diagnostics operators already produce, into dictionaries of a stable shape.

Pure standard library, importing nothing else of quotecheck: each module reads one tool's text and
returns plain data (docs/parsers.md lists the shapes), or raises :class:`ParseError` naming the line.

>>> parse("torch-memory", "max_memory_allocated: 1073741824")["max_allocated_gib"]
1.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parsers import csv_series, fio, nccl_tests, topology, torch_memory
from parsers.errors import ParseError

_PARSERS: dict[str, Callable[..., dict[str, Any]]] = {
    "topo": topology.parse,  # nvidia-smi topo -m
    "nccl": nccl_tests.parse,  # nccl-tests / rccl-tests *_perf output
    "fio": fio.parse,  # fio --output-format=json
    "torch-memory": torch_memory.parse,  # torch.cuda.max_memory_* or memory_stats()
    "scaling-csv": csv_series.parse_scaling,  # gpus, tokens_per_s
    "power-csv": csv_series.parse_power,  # timestamp, watts (per GPU or per node)
}
KINDS: tuple[str, ...] = tuple(_PARSERS)

__all__ = ["KINDS", "ParseError", "parse"]


def parse(kind: str, text: str, **options: Any) -> dict[str, Any]:
    """Return the parsed form of ``text``, the output of the tool ``kind`` names (one of KINDS).

    ``options`` go to that parser (``collective="all_reduce"`` for nccl output that does not name its
    binary). Raises ParseError (a ValueError) for malformed or truncated output, ValueError for an
    unknown kind, TypeError for an option the parser does not take.
    """
    try:
        parser = _PARSERS[kind]
    except KeyError:
        raise ValueError(f"unknown diagnostic kind {kind!r}; expected one of {', '.join(KINDS)}") from None
    return parser(text, **options)
