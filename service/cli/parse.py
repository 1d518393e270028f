"""`quotecheck parse KIND FILE`: one diagnostic tool's output read by `parsers` and printed as JSON."""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import click

import parsers
from service.cli.common import EXIT_INVALID

PARSE_EXIT_CODES = """\b
Exit codes:
  0  parsed; the JSON is on standard output
  2  the input is invalid (unreadable file, not UTF-8, output the parser cannot read: the message
     names the line and what was expected)"""

# Tool output larger than this is not a paste of one run (a submission holds at most 2 MiB in all).
MAX_INPUT_BYTES = 8 * 1024 * 1024


@click.command(epilog=PARSE_EXIT_CODES)
@click.argument("kind", type=click.Choice(parsers.KINDS))
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--collective", help="nccl only: the nccl-tests binary (all_reduce, all_gather_perf, ...) for "
                                   "output that does not name it")
def parse(kind: str, file: str, collective: str | None) -> None:
    """Read FILE (`-` for standard input) as the output of KIND and print its parsed form as JSON.

    \b
    topo          nvidia-smi topo -m
    nccl          nccl-tests / rccl-tests *_perf output
    fio           fio --output-format=json
    torch-memory  torch.cuda.max_memory_allocated/reserved lines or a memory_stats() dump
    scaling-csv   CSV of scaling runs: gpus, tokens_per_s
    power-csv     CSV of power readings: timestamp, watts (DCGM, nvidia-smi or IPMI export)

    The shapes are documented in docs/parsers.md; the same parsers read these outputs inside a submission's
    measurements.
    """
    if collective is not None and kind != "nccl":
        _fail(f"--collective applies to nccl output only, not to {kind}")
    text = _read(file)
    name = "standard input" if file == "-" else file
    options = {"collective": collective} if collective is not None else {}
    try:
        result = parsers.parse(kind, text, **options)
    except parsers.ParseError as error:
        _fail(f"{name}: {error}")
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))


def _read(file: str) -> str:
    """Returns the text of ``file`` (standard input for ``-``); exits 2 when it cannot be read as UTF-8 text."""
    try:
        if file == "-":
            raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        else:
            with open(file, "rb") as handle:
                raw = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as error:
        _fail(f"cannot read {file}: {error.strerror}")
    if len(raw) > MAX_INPUT_BYTES:
        _fail(f"{file} is larger than {MAX_INPUT_BYTES:,} bytes; paste the output of one run")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        _fail(f"{file} is not UTF-8 text (byte {error.start:,}: {error.reason})")


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_INVALID)
