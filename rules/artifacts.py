"""The diagnostics a submission carries raw in ``measurements``: where each one sits, the tool it came from, its parse.

The text is read by ``parsers`` (standard library only, a leaf below ``rules``), the same code that
``quotecheck parse`` runs. A submission is checked here when it enters (``rules.evaluate.validate_submission``):
an artifact the parser cannot read is a problem at its JSON Pointer, with the parser's line and expectation,
so a malformed paste is refused like any other invalid field rather than ignored. The checks then read the
parsed form through :func:`parsed`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import parsers
from schemas.problem import Problem


@dataclass(frozen=True)
class Artifact:
    """One kind of raw diagnostic a submission may carry."""

    pointer: str  # the member's JSON Pointer; ``*`` stands for each item of an array
    kind: str  # the parsers kind (parsers.KINDS) that reads it
    tool: str  # what printed it, as the record names the measurement's source


TOPOLOGY = Artifact("/measurements/topology/nvidia_smi_topo_m", "topo", "nvidia-smi topo -m")
NCCL_TESTS = Artifact("/measurements/nccl_tests/*/raw", "nccl", "nccl-tests")
FIO = Artifact("/measurements/fio", "fio", "fio --output-format=json")
TORCH_MEMORY = Artifact("/measurements/peak_memory/*/torch_memory", "torch-memory", "PyTorch CUDA memory statistics")
SCALING_CSV = Artifact("/measurements/scaling_csv", "scaling-csv", "scaling-run CSV")
POWER_CSV = Artifact("/measurements/power_csv", "power-csv", "power-reading CSV")
ARTIFACTS: tuple[Artifact, ...] = (TOPOLOGY, NCCL_TESTS, FIO, TORCH_MEMORY, SCALING_CSV, POWER_CSV)


def parse(artifact: Artifact, text: str, collective: str | None = None) -> dict[str, Any]:
    """Returns the parsed form of one artifact's text (docs/parsers.md); parsers.ParseError when it cannot be read.

    Every artifact is the tool's output as one string, fio's JSON included: as an object its hundreds of numbers
    would each become an input of the record. ``collective`` names the nccl-tests binary for output that does
    not. The result is the caller's own copy.
    """
    return copy.deepcopy(_parse(artifact.kind, text, collective))


@lru_cache(maxsize=16)
def _parse(kind: str, text: str, collective: str | None) -> dict[str, Any]:
    # Several checks (and the layout search, layout after layout) read the same artifact in one evaluation.
    return parsers.parse(kind, text, **({"collective": collective} if collective else {}))


def located(document: Any, artifact: Artifact) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """Yields (JSON Pointer, value, the object holding it) for each occurrence of ``artifact`` in ``document``."""
    yield from _walk(document, artifact.pointer.split("/")[1:], "")


def _walk(node: Any, parts: list[str], at: str) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    head, rest = parts[0], parts[1:]
    if head == "*":
        for index, item in enumerate(node if isinstance(node, list) else []):
            yield from _walk(item, rest, f"{at}/{index}")
        return
    if not isinstance(node, dict) or head not in node:
        return
    if not rest:
        yield f"{at}/{head}", node[head], node
        return
    yield from _walk(node[head], rest, f"{at}/{head}")


def artifact_problems(document: Any) -> list[Problem]:
    """Returns one problem per raw artifact of a schema-valid submission that its parser cannot read.

    The message is the parser's: the 1-based line of the text and what was expected there
    (``line 16: expected the row for NIC6 (18 devices in the header), found end of input``).
    """
    problems = []
    for artifact in ARTIFACTS:
        for pointer, value, holder in located(document, artifact):
            if not isinstance(value, str):
                continue  # the schema has already refused it
            try:
                parse(artifact, value, holder.get("collective") if artifact is NCCL_TESTS else None)
            except parsers.ParseError as error:
                problems.append(Problem(pointer, f"{artifact.tool} output cannot be read: {error}"))
    return problems
