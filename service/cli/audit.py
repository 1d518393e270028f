"""`quotecheck audit verify`: the audit log's hash chain, and optionally what a signed record anchored in it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NamedTuple

import click

from rules.errors import QuotecheckError
from service.app.audit_chain import Anchor, anchor_of, check_head_timestamps, timestamp_head, verify_chain
from service.cli.common import EXIT_FAILED, EXIT_INVALID, EXIT_OK, fail_input, service_app
from service.record import TrustedKeys, signing_keys, verify_document


@click.group()
def audit() -> None:
    """The append-only audit log and its hash chain."""


AUDIT_VERIFY_EXIT_CODES = """\b
Exit codes:
  0  every link of the chain holds, the chain still holds every head the TSA timestamped (and, with
     --against, what RECORD anchored)
  1  a broken link; a head the TSA timestamped that the chain no longer holds (its tail deleted: the
     missing events are named; or rewritten), or a head timestamp that does not verify; with --against:
     the chain was cut or rewritten before RECORD's anchor, or RECORD does not verify
  2  bad input: RECORD cannot be read, holds no signed record, or carries no audit anchor"""


@audit.command("verify", epilog=AUDIT_VERIFY_EXIT_CODES)
@click.option("--against", "record_file", type=click.Path(dir_okay=False),
              help="a signed record (its JSON envelope or its PDF): check that the chain still holds the events "
                   "the record anchored")
@click.option("--key", "key_files", multiple=True, type=click.Path(dir_okay=False),
              help="with --against: trust this public key or certificate (PEM; repeatable) instead of the "
                   "instance's signing key")
def audit_verify(record_file: str | None, key_files: tuple[str, ...]) -> None:
    """Recompute every event's hash and link; report OK with the count, or the first broken event.

    With --against RECORD, first verify RECORD's signature, then check the chain against the anchor the
    record carries (audit_anchor: the chain's length N and head hash when it was issued): event N must still
    have that hash and event N + 1 must be the one that issued the record. This catches a tail that was
    deleted, or rewritten and re-hashed wholesale, which the chain alone cannot show.
    """
    app = service_app()
    if key_files and not record_file:
        click.echo("error: --key is used with --against RECORD only", err=True)
        sys.exit(EXIT_INVALID)
    signed = _anchored_record(app, record_file, key_files) if record_file else None
    result, held = (verify_chain(app, signed.anchor, signed.record["record_id"], signed.digest) if signed
                    else verify_chain(app))
    if result.ok:
        click.echo(f"audit chain OK: {result.count} events, head {result.head_hash}")
    else:
        click.echo(f"audit chain BROKEN at event {result.broken_at}: {result.problem} "
                   f"({result.count} events before it verified)")
    if signed is not None and held is not None:
        what = (f"record {signed.record['record_id']} (issue {signed.record.get('issue', 1)}) anchors event "
                f"{signed.anchor.events}")
        if held.ok:
            click.echo(f"anchor OK: {what}; the chain still holds it")
        else:
            click.echo(f"anchor BROKEN: {what}; the chain no longer holds it")
        click.echo("\n".join([*(f"  x {problem}" for problem in held.problems),
                               *(f"  ok {finding}" for finding in held.findings)]))
    heads = _check_heads(app)
    sys.exit(EXIT_OK if result.ok and (held is None or held.ok) and heads else EXIT_FAILED)


def _check_heads(app: Any) -> bool:
    """Prints what the TSA-timestamped chain heads show; returns True when the chain holds them all."""
    keys = signing_keys(app)
    checked = check_head_timestamps(app, keys.tsa.asn1_roots() if keys.tsa else [])
    if not checked.checked:
        click.echo("head timestamps: none stored" + ("" if keys.tsa else " (no TSA_URL configured)"))
        return True
    if not checked.problems:
        click.echo(f"head timestamps OK: {checked.checked}; the latest: {checked.latest}")
        return True
    click.echo(f"head timestamps BROKEN: {len(checked.problems)} of {checked.checked} no longer hold")
    click.echo("\n".join(f"  x {problem}" for problem in checked.problems))
    return False


AUDIT_TIMESTAMP_EXIT_CODES = """\b
Exit codes:
  0  the head was timestamped
  1  the TSA gave no timestamp
  2  no TSA is configured (TSA_URL)"""


@audit.command("timestamp", epilog=AUDIT_TIMESTAMP_EXIT_CODES)
def audit_timestamp() -> None:
    """Have the TSA timestamp the chain's head now (run it on a schedule, e.g. hourly from cron).

    Decisions timestamp the head too; a scheduled run covers the events between them, so a tail deleted
    before the latest timestamp shows in `quotecheck audit verify`.
    """
    from datetime import UTC, datetime

    app = service_app()
    keys = signing_keys(app)
    if keys.tsa is None:
        fail_input(QuotecheckError("no TSA is configured: set TSA_URL and TSA_TRUST_ROOT_FILE"))
    try:
        with app.app_context():
            row = timestamp_head(keys, "schedule", datetime.now(UTC))
    except QuotecheckError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(EXIT_FAILED)
    click.echo(f"head timestamped: event {row.events}, {row.head_hash}")  # type: ignore[union-attr]


class AnchoredRecord(NamedTuple):
    """A record whose signature verified, the audit anchor it carries, and its digest."""
    record: dict[str, Any]
    anchor: Anchor
    digest: str | None


def _anchored_record(app: Any, path: str, key_files: tuple[str, ...]) -> AnchoredRecord:
    """Returns the record signed in ``path`` (JSON envelope or PDF) with its audit anchor and digest.

    Exits 1 when the signature does not verify (its anchor is then no evidence), 2 when the file cannot be
    read, holds no record, or the record carries no anchor.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        fail_input(QuotecheckError(f"cannot read {path}: {error.strerror}"))
    try:
        trusted = TrustedKeys.from_files(key_files) if key_files else signing_keys(app).trusted()
        verification = verify_document(data, trusted, origin=path)
    except QuotecheckError as error:
        fail_input(error)
    except Exception as error:  # whatever the file holds, the answer is an exit code, not a traceback
        fail_input(QuotecheckError(f"{path} cannot be verified: {type(error).__name__}: {error}"))
    record = verification.record
    if isinstance(record, dict) and isinstance(record.get("addendum_id"), str):
        # An as-built addendum is anchored like a record, under its own id (record_id names the record it is of).
        record = {**record, "record_id": record["addendum_id"]}
    if not isinstance(record, dict) or not isinstance(record.get("record_id"), str):
        fail_input(QuotecheckError(f"{path} holds no commissioning record with a record_id ({verification.subject}); "
                                    "give the signed record JSON or its PDF"))
    if not verification.ok:
        click.echo(f"record {record['record_id']} in {path} does NOT verify, so its audit anchor is no evidence:")
        click.echo("\n".join(f"  x {reason}" for reason in verification.all_reasons()))
        sys.exit(EXIT_FAILED)
    try:
        anchor = anchor_of(record)
    except ValueError as error:
        fail_input(QuotecheckError(f"{path}: {error}"))
    if anchor is None:
        fail_input(QuotecheckError(f"record {record['record_id']} in {path} carries no audit_anchor: only records "
                                    "the service issues (at approval or a purchase-order link) carry one, and only "
                                    "since anchoring was introduced"))
    return AnchoredRecord(record, anchor, verification.record_digest)

