"""``fio --output-format=json``: read and write bandwidth per job and for the run, with the job options.

fio writes, for each job (or each reporting group under ``group_reporting``), a ``read`` and a
``write`` object whose ``bw_bytes`` is bytes per second and ``bw`` KiB per second: fio ``stat.c``
(``add_ddir_status_json``) computes ``bw_bytes = 1000 * io_bytes / runtime_ms`` and
``bw = bw_bytes / 1024``, and the HOWTO's terse-output field list gives ``bandwidth (KiB/sec)``.
Releases before 3.3 print ``bw`` only, so bytes per second are ``bw_bytes`` where present, else
``bw x 1024``. GB/s here is 10^9 bytes per second.

Jobs in one reporting group (``groupid``) run at the same time and their bandwidths add up; groups
separated by ``stonewall`` run one after the other (HOWTO, ``stonewall`` and ``group_reporting``), so
the run's figure for a direction is the highest group total, which is what a job file that reads in
one group and writes in the next measures for each.

Options come from ``job options`` over ``global options`` (a job section overrides the global one).
Text fio prints before the JSON document (``fio: terminating on signal 2``, normal output when
``--output-format=normal,json``) is skipped.
"""

from __future__ import annotations

import json
import re
from typing import Any

from parsers.errors import ParseError

BYTES_PER_KIB = 1024
BYTES_PER_GB = 1e9
_OPTIONS = ("rw", "bs", "numjobs", "iodepth")
_INT_OPTIONS = ("numjobs", "iodepth")


def parse(text: str) -> dict[str, Any]:
    """Return the fio version, each job's options and read/write GB/s, and the run's read/write GB/s.

    Shape: ``{"fio_version", "jobs": [{"name", "groupid", "error", "rw", "bs", "numjobs", "iodepth",
    "read_gbs", "write_gbs"}], "groups": [{"groupid", "read_gbs", "write_gbs"}], "read_gbs",
    "write_gbs"}``. An option fio was not given is None (fio's defaults then apply: ``rw=read``,
    ``bs=4k``, ``numjobs=1``, ``iodepth=1``). ``error`` is the job's errno as fio reports it; a
    non-zero one means its figures cover a failed run. Raises ParseError naming the line for text
    that is not a fio JSON document, or a document without jobs or without their read/write figures.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected the fio output as str, got {type(text).__name__}")
    start = re.search(r"^\s*\{", text, re.MULTILINE)
    if start is None:
        raise ParseError(text.count("\n") + 1, "expected a fio JSON document ('{' at the start of a line), found none")
    offset_lines = text.count("\n", 0, start.start())
    try:
        document, end = json.JSONDecoder().raw_decode(text, start.start() + len(start.group(0)) - 1)
    except json.JSONDecodeError as error:
        raise ParseError(error.lineno, f"expected fio JSON, found invalid JSON ({error.msg})") from None
    if re.search(r"^\s*\{", text[end:], re.MULTILINE):
        raise ParseError(text.count("\n", 0, end) + 1, "expected one fio JSON document, found a second one")
    if not isinstance(document, dict) or not isinstance(document.get("jobs"), list) or not document["jobs"]:
        raise ParseError(offset_lines + 1, "expected a fio JSON document with a non-empty 'jobs' list")
    global_options = document.get("global options") or {}
    jobs = [_job(job, global_options, text) for job in document["jobs"]]
    groups: dict[int, dict[str, Any]] = {}
    for job in jobs:
        group = groups.setdefault(job["groupid"], {"groupid": job["groupid"], "read_gbs": 0.0, "write_gbs": 0.0})
        group["read_gbs"] += job["read_gbs"]
        group["write_gbs"] += job["write_gbs"]
    return {
        "fio_version": document.get("fio version"),
        "jobs": jobs,
        "groups": list(groups.values()),
        "read_gbs": max(g["read_gbs"] for g in groups.values()),
        "write_gbs": max(g["write_gbs"] for g in groups.values()),
    }


def _line_of(text: str, job_name: object) -> int:
    match = re.search(r'"jobname"\s*:\s*' + re.escape(json.dumps(job_name)), text)
    return text.count("\n", 0, match.start()) + 1 if match else 1


def _bytes_per_s(job: dict[str, Any], direction: str, line: int) -> float:
    figures = job.get(direction)
    if not isinstance(figures, dict):
        raise ParseError(line, f"expected a '{direction}' object in job {job.get('jobname')!r}, found none")
    if isinstance(figures.get("bw_bytes"), int | float):
        return float(figures["bw_bytes"])
    if isinstance(figures.get("bw"), int | float):
        return float(figures["bw"]) * BYTES_PER_KIB
    raise ParseError(line, f"expected 'bw_bytes' or 'bw' in the {direction} figures of job {job.get('jobname')!r}")


def _job(job: object, global_options: dict[str, Any], text: str) -> dict[str, Any]:
    if not isinstance(job, dict):
        raise ParseError(1, f"expected each fio job as an object, found {type(job).__name__}")
    line = _line_of(text, job.get("jobname"))
    options = {**global_options, **(job.get("job options") or {})}
    entry: dict[str, Any] = {
        "name": job.get("jobname"),
        "groupid": job.get("groupid", 0),
        "error": job.get("error", 0),
    }
    for name in _OPTIONS:
        value = options.get(name)
        if name in _INT_OPTIONS and value is not None:
            if not str(value).isdigit():
                raise ParseError(line, f"expected {name} as an integer in job {job.get('jobname')!r}, found {value!r}")
            value = int(value)
        entry[name] = value
    entry["read_gbs"] = _bytes_per_s(job, "read", line) / BYTES_PER_GB
    entry["write_gbs"] = _bytes_per_s(job, "write", line) / BYTES_PER_GB
    return entry
