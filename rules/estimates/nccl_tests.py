"""nccl-tests output: the result table of ``all_reduce_perf`` and its kin, and the busbw a job can rely on.

Format: nccl-tests README and ``src/common.cu``; bandwidth definitions: ``doc/PERFORMANCE.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from rules.errors import InconsistentInput


@dataclass(frozen=True)
class NcclTestsRow:
    """One size of an nccl-tests run (``all_reduce_perf`` and the other ``*_perf`` binaries)."""

    size_bytes: int
    count: int
    dtype: str
    redop: str | None  # None when the binary prints no reduction column
    root: int | None  # None when the binary prints no root column
    out_of_place_time_us: float
    out_of_place_algbw_gbs: float
    out_of_place_busbw_gbs: float
    out_of_place_wrong: int | None  # None for "N/A" (validation off) or an old float "error" column
    in_place_time_us: float
    in_place_algbw_gbs: float
    in_place_busbw_gbs: float
    in_place_wrong: int | None

    @property
    def busbw_gbs(self) -> float:
        """The better of the out-of-place and in-place bus bandwidths."""
        return max(self.out_of_place_busbw_gbs, self.in_place_busbw_gbs)


# mpirun --tag-output / srun --label prefixes: "[1,0]<stdout>:" or "0: ".
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_AVG_BUSBW = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")


def _wrong(token: str) -> int | None:
    try:
        return int(token)
    except ValueError:
        return None


def _parse_row(tokens: list[str]) -> NcclTestsRow | None:
    # size count type [redop] [root] then two blocks of time algbw busbw #wrong.
    if len(tokens) < 11 or not tokens[0].isdigit() or not tokens[1].isdigit():
        return None
    middle = tokens[3:-8]
    if len(middle) > 2:
        return None
    redop = root = None
    for token in middle:
        if re.fullmatch(r"-?\d+", token):
            root = int(token)
        else:
            redop = token
    try:
        values = [float(t) for t in (tokens[-8], tokens[-7], tokens[-6], tokens[-4], tokens[-3], tokens[-2])]
    except ValueError:
        return None
    if not all(math.isfinite(v) for v in values):
        return None
    return NcclTestsRow(
        size_bytes=int(tokens[0]),
        count=int(tokens[1]),
        dtype=tokens[2],
        redop=redop,
        root=root,
        out_of_place_time_us=values[0],
        out_of_place_algbw_gbs=values[1],
        out_of_place_busbw_gbs=values[2],
        out_of_place_wrong=_wrong(tokens[-5]),
        in_place_time_us=values[3],
        in_place_algbw_gbs=values[4],
        in_place_busbw_gbs=values[5],
        in_place_wrong=_wrong(tokens[-1]),
    )


def parse_nccl_tests_output(raw: str) -> list[NcclTestsRow]:
    """Return the result rows (size, busbw, …) of nccl-tests text output such as ``all_reduce_perf``.

    Format (nccl-tests README and ``src/common.cu``): lines starting with ``#`` are comments (header,
    device list, "# Out of bounds values", "# Avg bus bandwidth"); each result line has size (B),
    count (elements), type, redop, root, then time (us), algbw (GB/s), busbw (GB/s), #wrong for the
    out-of-place and again for the in-place run. Older releases print no root column and a float
    ``error`` instead of ``#wrong``; both are accepted. ``mpirun --tag-output`` prefixes are stripped;
    other lines (NCCL banners, warnings) are skipped. Raises ValueError when no result row is found.
    """
    rows: list[NcclTestsRow] = []
    for line in raw.splitlines():
        line = _PREFIX.sub("", line, count=1).strip()
        if not line or line.startswith("#"):
            continue
        row = _parse_row(line.split())
        if row is not None:
            rows.append(row)
    if not rows:
        raise InconsistentInput("no nccl-tests result rows found (expected lines: size count type ... busbw #wrong)")
    return rows


def parse_nccl_tests_avg_busbw_gbs(raw: str) -> float | None:
    """Return the "# Avg bus bandwidth" figure (GB/s) of nccl-tests output, or None if absent.

    Source: nccl-tests ``src/common.cu`` prints it after the table; it averages busbw over every size
    in the sweep, small sizes included, so it understates the large-message bandwidth a training step
    sees: prefer :func:`peak_busbw_gbs` or the busbw at the step's message size.
    """
    found = None
    for line in raw.splitlines():
        match = _AVG_BUSBW.search(_PREFIX.sub("", line, count=1))
        if match:
            found = float(match.group(1))
    return found


def peak_busbw_gbs(rows: Iterable[NcclTestsRow], min_size_bytes: int = 0) -> float:
    """Return the highest busbw (GB/s) among rows of at least ``min_size_bytes``.

    Source: nccl-tests ``doc/PERFORMANCE.md``: on large sizes time is linear in size, so the large-size
    busbw is the bandwidth figure to compare with hardware.
    """
    candidates = [r.busbw_gbs for r in rows if r.size_bytes >= min_size_bytes]
    if not candidates:
        raise InconsistentInput(f"no nccl-tests row of at least {min_size_bytes} bytes")
    return max(candidates)


@dataclass(frozen=True)
class NcclTestsRun:
    """One recorded nccl-tests run: how many nodes it spanned and its raw text output."""

    name: str  # how notes refer to the run (its place in the submission)
    nodes: int
    raw: str


@dataclass(frozen=True)
class MeasuredBusbw:
    """The busbw recorded nccl-tests runs give a job: inside one node, and across the run nearest its size."""

    node_busbw_gbs: float | None  # the lowest of the single-node runs; None without one
    cluster_nodes: int | None  # nodes of the multi-node run nearest the job's size; None without one
    cluster_busbw_gbs: float | None
    notes: tuple[str, ...]  # runs not used, and why


def measured_busbw(runs: Iterable[NcclTestsRun], job_nodes: int) -> MeasuredBusbw:
    """Returns the measured intra-node busbw and the (nodes, busbw) of the multi-node run nearest ``job_nodes``.

    Each run's figure is its peak busbw over message sizes (nccl-tests doc/PERFORMANCE.md: the large-size
    busbw is the one to compare with hardware); several single-node runs keep the lowest; among multi-node
    runs the one nearest the job's node count wins, the lower busbw on a tie. A run whose output holds no
    result table is noted and not used.
    """
    node: float | None = None
    widest: tuple[int, float] | None = None
    notes: list[str] = []
    for run in runs:
        try:
            busbw = peak_busbw_gbs(parse_nccl_tests_output(run.raw))
        except InconsistentInput as error:
            notes.append(f"{run.name} not used: {error}")
            continue
        if run.nodes == 1:
            node = busbw if node is None else min(node, busbw)
        elif widest is None or (abs(run.nodes - job_nodes), busbw) < (abs(widest[0] - job_nodes), widest[1]):
            widest = (run.nodes, busbw)
    return MeasuredBusbw(node, widest[0] if widest else None, widest[1] if widest else None, tuple(notes))
