"""nccl-tests text output (``all_reduce_perf``, ``all_gather_perf``, ``alltoall_perf``, ... and rccl-tests).

Layout (nccl-tests ``src/common.cu``; ``doc/PERFORMANCE.md`` defines the columns):

- a header of ``#`` comments: ``# nThread 1 nGpus 8 minBytes ...`` (``nThread: 1 nGpus: 1`` in
  rccl-tests), ``# Using devices``, and one ``#  Rank  0 Group  0 Pid 1234 on host device  0
  [0x18] NVIDIA H100`` line per rank (releases before 2.11 print no ``Group``);
- the column header ``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``
  for the out-of-place then the in-place run; releases before 2.10 print no ``root`` column and a
  float ``error`` instead of ``#wrong`` (and binaries without a reduction, e.g. the old
  ``all_gather_perf``, no ``redop``); ``#wrong`` is ``N/A`` where a run is not checked (in-place
  alltoall);
- one row per message size: size (B), count (elements), type, [redop], [root], then time (us),
  algbw (GB/s), busbw (GB/s), #wrong, twice;
- ``# Out of bounds values : 0 OK`` and ``# Avg bus bandwidth    : 70.742``, the mean busbw over every
  row and both runs.

Launcher prefixes (``[1,0]<stdout>:`` from ``mpirun --tag-output``, ``0: `` from ``srun --label``)
are stripped; other lines (NCCL INFO logs, shell prompts, the command line) are skipped, except that
the command line names the collective: the ``*_perf`` binary.
"""

from __future__ import annotations

import re
from typing import Any

from parsers._text import clean_lines
from parsers.errors import ParseError

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S+\s+device\s+\d+\s+\[[^\]]*\]")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
# the benchmark binaries of nccl-tests (src/*.cu) and rccl-tests (which adds alltoallv)
COLLECTIVES: tuple[str, ...] = (
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "alltoallv", "broadcast", "reduce",
    "sendrecv", "gather", "scatter", "hypercube",
)
_BINARY = re.compile(r"(?<![\w-])(" + "|".join(sorted(COLLECTIVES, key=len, reverse=True)) + r")_perf\b")
_INT = re.compile(r"^-?\d+$")
# #wrong is a count, N/A when unchecked; before 2.10 a float max error, starred past the threshold
_WRONG = re.compile(r"^(?:\d+|N/A|-?\d+(?:\.\d+)?(?:e[+-]?\d+)?\*?)$", re.IGNORECASE)


def parse(text: str, collective: str | None = None) -> dict[str, Any]:
    """Return the collective, rank count, result rows and bus bandwidths of one nccl-tests run.

    Shape: ``{"collective", "nranks", "rows": [{"size_bytes", "count", "type", "redop",
    "out_of_place": {"time_us", "algbw_gbs", "busbw_gbs"}, "in_place": {...}}], "avg_busbw_gbs",
    "peak_busbw_gbs"}``. ``collective`` is the binary's name without ``_perf`` (``all_reduce``), taken
    from the output or from the argument (they must agree), None when neither names it; ``nranks`` is
    the number of ``# Rank`` lines, None when the header is absent; ``redop`` is None where the binary
    prints no reduction column. ``avg_busbw_gbs`` is nccl-tests' own average line; ``peak_busbw_gbs``
    the highest busbw of any row, out-of-place or in-place (PERFORMANCE.md: the large-size busbw is
    the figure to compare with the hardware). Raises ParseError naming the line for a row with the
    wrong number or kind of columns, no result row, a second run, or a missing average line (the
    output was cut short).
    """
    lines = [_PREFIX.sub("", line, count=1) for line in clean_lines(text)]
    named = _collective(lines, collective)
    ranks: set[int] = set()
    layout: list[str] | None = None
    rows: list[dict[str, Any]] = []
    avg: float | None = None
    for index, raw in enumerate(lines):
        line_no = index + 1
        line = raw.strip()
        if avg is not None and (_is_row(line) or _AVG.match(line)):
            raise ParseError(line_no, "expected one nccl-tests run, found more after '# Avg bus bandwidth'")
        if match := _RANK.match(line):
            ranks.add(int(match.group(1)))
        elif match := _AVG.match(line):
            avg = _number(match.group(1), line_no, "the average bus bandwidth")
        elif line.startswith("#") and " size " in f" {line[1:]} " and "busbw" in line:
            layout = line[1:].split()
        elif _is_row(line):
            rows.append(_row(line.split(), layout, line_no))
    if not rows:
        raise ParseError(len(lines), "expected nccl-tests result rows (size count type ... busbw #wrong), found none")
    if avg is None:
        raise ParseError(len(lines), "expected '# Avg bus bandwidth' after the last row, found end of input")
    peak = max(max(r["out_of_place"]["busbw_gbs"], r["in_place"]["busbw_gbs"]) for r in rows)
    return {
        "collective": named,
        "nranks": len(ranks) or None,
        "rows": rows,
        "avg_busbw_gbs": avg,
        "peak_busbw_gbs": peak,
    }


def _collective(lines: list[str], given: str | None) -> str | None:
    found: dict[str, int] = {}
    for index, line in enumerate(lines):
        for match in _BINARY.finditer(line):
            found.setdefault(match.group(1), index + 1)
    if len(found) > 1:
        names = ", ".join(f"{name}_perf (line {line})" for name, line in found.items())
        raise ParseError(max(found.values()), f"expected the output of one nccl-tests binary, found {names}")
    if given is not None:
        given = given.replace("-", "_").removesuffix("_perf")
        if found and given not in found:
            name, line = next(iter(found.items()))
            raise ParseError(line, f"expected the output of {given}_perf, found {name}_perf")
        return given
    return next(iter(found), None)


def _is_row(line: str) -> bool:
    # a result row starts with two integers (size, count); a row cut short may hold only the size
    tokens = line.split()
    return bool(tokens) and tokens[0].isdigit() and (len(tokens) == 1 or tokens[1].isdigit())


def _number(token: str, line_no: int, what: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise ParseError(line_no, f"expected {what} as a number, found '{token}'") from None


def _row(tokens: list[str], layout: list[str] | None, line_no: int) -> dict[str, Any]:
    if layout is not None:
        expected = len(layout)
        names = " ".join(layout)
        middle = layout[3:-8]
    else:
        # no column header: size count type, up to two of redop/root, then 2 x (time algbw busbw #wrong)
        expected = len(tokens) if 11 <= len(tokens) <= 13 else 13
        names = "size count type redop root time algbw busbw #wrong time algbw busbw #wrong"
        middle = None
    if len(tokens) != expected:
        raise ParseError(line_no, f"expected {expected} columns ({names}), found {len(tokens)}")
    extra = tokens[3:-8]
    if middle is None:
        middle = ["root" if _INT.match(t) else "redop" for t in extra]
    for name, token in zip(middle, extra, strict=True):
        if name == "root" and not _INT.match(token):
            raise ParseError(line_no, f"expected the root rank as an integer, found '{token}'")
    redop = next((t for name, t in zip(middle, extra, strict=True) if name == "redop"), None)
    blocks = []
    for measures, run in ((tokens[-8:-4], "out-of-place"), (tokens[-4:], "in-place")):
        time_, algbw, busbw, wrong = measures
        if not _WRONG.match(wrong):
            raise ParseError(line_no, f"expected #wrong (a count or N/A) for the {run} run, found '{wrong}'")
        blocks.append(
            {
                "time_us": _number(time_, line_no, f"the {run} time (us)"),
                "algbw_gbs": _number(algbw, line_no, f"the {run} algbw (GB/s)"),
                "busbw_gbs": _number(busbw, line_no, f"the {run} busbw (GB/s)"),
            }
        )
    if not tokens[1].isdigit():
        raise ParseError(line_no, f"expected the element count as an integer, found '{tokens[1]}'")
    return {
        "size_bytes": int(tokens[0]),
        "count": int(tokens[1]),
        "type": tokens[2],
        "redop": redop,
        "out_of_place": blocks[0],
        "in_place": blocks[1],
    }
