"""CSV series: scaling runs (gpus, tokens_per_s) and power readings (timestamp, watts).

Both read a header row then one row per sample; the delimiter is a comma, semicolon or tab, and
blanks after a delimiter are ignored. Column names are matched without case, and a unit in brackets
(``power.draw [W]``) is dropped from the name.

Power CSVs come from ``nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv -l 1`` (the
query fields of ``nvidia-smi --help-query-gpu``: ``power.draw`` in W, printed as ``345.67 W``
unless ``nounits``; ``timestamp`` as ``2024/05/01 12:00:00.123``), from DCGM exports (a GPU column and a
power column in W) or from a BMC/IPMI export of node input power (one node, or a node/host column).
The entity column says whether readings are per GPU or per node; without one the file is a single
series whose scope is unknown. Sustained figures over the window are the mean, the 95th percentile by
the nearest-rank method (the smallest reading with at least 95% of readings at or below it) and the
maximum.
"""

from __future__ import annotations

import csv
import math
import re
from datetime import UTC, datetime
from typing import Any

from parsers._text import clean_lines
from parsers.errors import ParseError

SUSTAINED_PERCENTILE = 95
_GPU_COLUMNS = ("gpus", "gpu_count", "num_gpus", "n_gpus", "world_size")
_THROUGHPUT_COLUMNS = ("tokens_per_s", "tokens_per_sec", "tokens_per_second", "tokens/s", "throughput_tokens_per_s")
_WATT_COLUMNS = ("watts", "power_w", "power.draw", "power_draw", "power_draw_w", "power_usage", "power", "w")
_TIME_COLUMNS = ("timestamp", "time", "datetime", "date", "ts")
_GPU_ENTITY_COLUMNS = ("gpu", "index", "gpu_index", "gpu_id", "gpuid", "device")
_NODE_ENTITY_COLUMNS = ("node", "host", "hostname", "server")
_TIME_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")  # nvidia-smi's timestamp field


def parse_scaling(text: str) -> dict[str, Any]:
    """Return the scaling points of a CSV with a GPU-count and a tokens-per-second column.

    Shape: ``{"points": [{"gpus", "tokens_per_s"}]}`` in file order, the shape of the submission's
    ``measurements.scaling``. Raises ParseError naming the line for a missing column, a row with the
    wrong number of fields, a GPU count that is not a positive integer, a throughput that is not a
    positive number, or a GPU count given twice.
    """
    header_line, header, rows = _table(text)
    gpus_at = _column(header, _GPU_COLUMNS, header_line, "a GPU count column (gpus)")
    tps_at = _column(header, _THROUGHPUT_COLUMNS, header_line, "a throughput column (tokens_per_s)")
    points: list[dict[str, Any]] = []
    seen: dict[int, int] = {}
    for line_no, fields in rows:
        gpus_text, tps_text = fields[gpus_at], fields[tps_at]
        if not gpus_text.isdigit() or int(gpus_text) == 0:
            raise ParseError(line_no, f"expected {header[gpus_at]} as a positive integer, found '{gpus_text}'")
        gpus = int(gpus_text)
        if gpus in seen:
            raise ParseError(line_no, f"expected each GPU count once, found {gpus} again (first on line {seen[gpus]})")
        seen[gpus] = line_no
        tps = _positive(tps_text, header[tps_at], line_no)
        points.append({"gpus": gpus, "tokens_per_s": tps})
    return {"points": points}


def parse_power(text: str) -> dict[str, Any]:
    """Return sustained power per entity (GPU or node as given): mean, p95 and max watts over the window.

    Shape: ``{"scope": "gpu" | "node" | None, "entities": [{"name", "samples", "mean_w", "p95_w",
    "max_w", "start", "end", "window_s"}]}``, entities in order of first appearance; ``name`` is the
    entity column's value (``"all"`` without one); ``start``/``end`` are the first and last timestamps
    as written and ``window_s`` the seconds between them (None without a timestamp column). Raises
    ParseError naming the line for a missing power column, a row with the wrong number of fields, a
    reading that is not a number of watts (``[N/A]``, ``[Not Supported]``) or a timestamp that does
    not parse.
    """
    header_line, header, rows = _table(text)
    watts_at = _column(header, _WATT_COLUMNS, header_line, "a power column in W (watts, power.draw)")
    time_at = _optional_column(header, _TIME_COLUMNS)
    gpu_at = _optional_column(header, _GPU_ENTITY_COLUMNS)
    node_at = _optional_column(header, _NODE_ENTITY_COLUMNS)
    entity_at = gpu_at if gpu_at is not None else node_at
    scope = "gpu" if gpu_at is not None else "node" if node_at is not None else None
    series: dict[str, dict[str, Any]] = {}
    for line_no, fields in rows:
        watts = _watts(fields[watts_at], header[watts_at], line_no)
        name = fields[entity_at] if entity_at is not None else "all"
        entry = series.setdefault(name, {"watts": [], "times": []})
        entry["watts"].append(watts)
        if time_at is not None:
            entry["times"].append((fields[time_at], _seconds(fields[time_at], line_no)))
    return {"scope": scope, "entities": [_sustained(name, entry) for name, entry in series.items()]}


def nearest_rank_percentile(values: list[float], percentile: float) -> float:
    """Return the smallest value with at least ``percentile`` % of ``values`` at or below it.

    The nearest-rank definition: the value at rank ceil(p/100 x n) of the sorted values (n >= 1).
    """
    ordered = sorted(values)
    rank = max(1, math.ceil(percentile / 100 * len(ordered)))
    return ordered[rank - 1]


def _sustained(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    watts: list[float] = entry["watts"]
    times: list[tuple[str, float]] = entry["times"]
    first = min(times, key=lambda t: t[1]) if times else None
    last = max(times, key=lambda t: t[1]) if times else None
    return {
        "name": name,
        "samples": len(watts),
        "mean_w": sum(watts) / len(watts),
        "p95_w": nearest_rank_percentile(watts, SUSTAINED_PERCENTILE),
        "max_w": max(watts),
        "start": first[0] if first else None,
        "end": last[0] if last else None,
        "window_s": last[1] - first[1] if first and last else None,
    }


def _normalise(name: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", name.strip()).strip().lower()


def _table(text: str) -> tuple[int, list[str], list[tuple[int, list[str]]]]:
    lines = clean_lines(text)
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    if not numbered:
        raise ParseError(len(lines), "expected a CSV header row, found empty input")
    header_line, header_text = numbered[0]
    delimiter = max(",;\t", key=header_text.count)
    header = [_normalise(name) for name in next(csv.reader([header_text], delimiter=delimiter, skipinitialspace=True))]
    rows = []
    for line_no, line in numbered[1:]:
        fields = [f.strip() for f in next(csv.reader([line], delimiter=delimiter, skipinitialspace=True))]
        if len(fields) != len(header):
            raise ParseError(line_no, f"expected {len(header)} fields ({', '.join(header)}), found {len(fields)}")
        rows.append((line_no, fields))
    if not rows:
        raise ParseError(header_line + 1, f"expected rows after the header ({', '.join(header)}), found none")
    return header_line, header, rows


def _optional_column(header: list[str], names: tuple[str, ...]) -> int | None:
    return next((header.index(name) for name in names if name in header), None)


def _column(header: list[str], names: tuple[str, ...], line_no: int, what: str) -> int:
    found = _optional_column(header, names)
    if found is None:
        raise ParseError(line_no, f"expected {what}, found columns {', '.join(header)}")
    return found


def _positive(text: str, column: str, line_no: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ParseError(line_no, f"expected {column} as a positive number, found '{text}'")
    return value


def _watts(text: str, column: str, line_no: int) -> float:
    number = re.sub(r"\s*W$", "", text)
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ParseError(line_no, f"expected {column} as watts (a number, optionally with ' W'), found '{text}'")
    return value


def _utc(moment: datetime) -> datetime:
    # a time without zone is read as UTC, so a daylight-saving change cannot bend the window
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _seconds(text: str, line_no: int) -> float:
    try:
        return float(text)  # epoch seconds
    except ValueError:
        pass
    for pattern in _TIME_FORMATS:
        try:
            return _utc(datetime.strptime(text, pattern)).timestamp()
        except ValueError:
            continue
    try:
        return _utc(datetime.fromisoformat(text)).timestamp()
    except ValueError:
        raise ParseError(
            line_no, f"expected a timestamp (epoch seconds, ISO 8601 or YYYY/MM/DD HH:MM:SS.fff), found '{text}'"
        ) from None
