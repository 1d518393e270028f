"""Commands for signed records: verify, sign, pdf, keys (registered on the ``quotecheck`` group)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from rules.errors import QuotecheckError

EXIT_VALID, EXIT_INVALID, EXIT_UNREADABLE = 0, 1, 2

VERIFY_EXIT_CODES = """\b
Exit codes:
  0  valid: every signature verifies with a trusted key and every digest matches
  1  invalid: the output says what was found and what was expected
  2  unreadable input: the file cannot be read, is neither JSON nor PDF, or no trust root was given
The second line gives the signature's level (a PDF: PAdES B-B, B-T, B-LT or B-LTA; an envelope: B-T with a
timestamp, else B-B) and the signing time from the TSA's timestamp. Verification is offline: the
PDF's own validation data and the trust roots given (--key: the CA's or TSA's root certificate).
A record that is not approved (no approval decision, e.g. signed with `quotecheck sign` from
`evaluate --out`) is reported first, "NOT APPROVED: ...", and the exit code still says whether its
signature is valid. An as-built addendum (signed in the same envelope) is reported first as
"AS-BUILT ADDENDUM of record ...", naming the record it belongs to."""

SIGN_EXIT_CODES = """\b
Exit codes:
  0  written
  2  bad input (unreadable file, not a record, unusable key)"""


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_UNREADABLE)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        _fail(f"cannot read {path}: {error.strerror}")
        raise  # unreachable; keeps type checkers content


def _read_record(path: str) -> dict[str, Any]:
    """Returns the record in ``path``: a bare record, or the record of a signed envelope; exits 2 otherwise."""
    import schemas
    from service.record.verify import parse_json

    try:
        document = parse_json(_read(path), path)
    except QuotecheckError as error:
        _fail(str(error))
    if isinstance(document, dict) and set(document) == {"record", "signature"}:
        document = document["record"]
    problems = schemas.validate("record", document)
    if problems:
        details = "; ".join(f"{p.pointer or '/'}: {p.message}" for p in problems[:5])
        _fail(f"{path} is not a commissioning record ({len(problems)} schema problems): {details}")
    return document


def _trust(key_files: tuple[str, ...], instance_dir: str | None) -> Any:
    from service.record.keys import TrustedKeys

    if not key_files and not instance_dir:
        _fail("no trust root: give --key PUBKEY.pem (or the certificate) or --instance DIR; nothing is trusted "
              "implicitly")
    try:
        trusted = TrustedKeys.from_files(key_files)
        if instance_dir:
            trusted = trusted.merged(TrustedKeys.from_instance(instance_dir))
    except QuotecheckError as error:
        _fail(str(error))
    return trusted


def _keys(instance_dir: str) -> Any:
    from service.record.keys import SigningKeys

    try:
        return SigningKeys.load_or_create(instance_dir)
    except QuotecheckError as error:
        _fail(str(error))


@click.command(epilog=VERIFY_EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--key", "key_files", multiple=True, type=click.Path(dir_okay=False),
              help="a trusted public key or certificate (PEM); repeatable")
@click.option("--instance", "instance_dir", type=click.Path(file_okay=False),
              help="trust the signing key of this instance folder (its public key and certificate)")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def verify(file: str, key_files: tuple[str, ...], instance_dir: str | None, fmt: str) -> None:
    """Verify a signed record JSON, an as-built addendum JSON, a DSSE verdict attestation, or a record PDF."""
    from service.record.verify import verify_document

    trusted = _trust(key_files, instance_dir)
    try:
        result = verify_document(_read(file), trusted, origin=file)
    except QuotecheckError as error:
        _fail(str(error))
    if fmt == "json":
        click.echo(json.dumps(result.as_dict(), indent=2))
    else:
        click.echo(render_verification(file, result))
    sys.exit(EXIT_VALID if result.ok else EXIT_INVALID)


def render_verification(file: str, result: Any) -> str:
    """Returns a verification as text: NOT APPROVED first when the record is no approval, VALID or INVALID,
    the reasons, then what held."""
    from service.record.canonical import not_approved_reason
    from service.record.verification import addendum_of

    lines = []
    named = addendum_of(result.record)
    if named is not None:
        lines.append(f"AS-BUILT ADDENDUM of record {named['record_id']} ({named['digest']}): the service attaches "
                     "addenda to approved records only; verify that record for its approval")
    elif result.record is not None and (why := not_approved_reason(result.record)):
        lines.append(f"NOT APPROVED: {why}")
    lines.append(f"{'VALID' if result.ok else 'INVALID'}  {file} ({result.subject})")
    if result.level is not None:
        when = (f"signing time {result.as_dict()['signing_time']} (the TSA's timestamp)" if result.signing_time
                else "no trusted signing time (no timestamp: the time in it is the signer's own claim)")
        lines.append(f"  level {result.level}, {when}")
    if not result.ok:
        lines += [f"  x {reason}" for reason in result.all_reasons()]
    for part in [result, *result.parts]:
        prefix = "" if part is result else f"{part.subject}: "
        lines += [f"  ok {prefix}{finding}" for finding in part.findings]
    record = result.record or {}
    if named is not None:
        lines.append(f"  addendum {record.get('addendum_id', '(no id)')}, as-built verdict "
                     f"{str(record.get('verdict')).upper()}, digest {result.record_digest}")
    elif record:
        lines.append(f"  record {record.get('record_id', '(no id)')}, verdict {str(record.get('verdict')).upper()}, "
                     f"digest {result.record_digest}")
    return "\n".join(lines)


@click.command(epilog=SIGN_EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--instance", "instance_dir", required=True, type=click.Path(file_okay=False),
              help="instance folder holding the signing key (generated there on first use)")
@click.option("--out", type=click.Path(dir_okay=False), help="write the envelope here (default: stdout)")
@click.option("--attestation", type=click.Path(dir_okay=False),
              help="also write the verdict as a DSSE-signed in-toto statement here")
def sign(file: str, instance_dir: str, out: str | None, attestation: str | None) -> None:
    """Sign the record in FILE; print or write the envelope {record, signature}.

    A record that is not approved (an evaluation from `quotecheck evaluate --out` has no decisions) is
    signed as it is, and its signed content says so: `quotecheck verify` prints "NOT APPROVED: ..." first.
    Only the service's approval workflow issues approved records.
    """
    from service.record import sign_dsse, sign_record, verdict_statement
    from service.record.canonical import not_approved_reason

    record = _read_record(file)
    keys = _keys(instance_dir)
    if why := not_approved_reason(record):
        click.echo(f"warning: NOT APPROVED: {why}. Signing it as it is; `quotecheck verify` will report it "
                   "NOT APPROVED first", err=True)
    envelope = json.dumps(sign_record(record, keys), indent=2, ensure_ascii=False)
    if out:
        Path(out).write_text(envelope + "\n", encoding="utf-8")
        click.echo(f"signed {file} with key {keys.key_id} -> {out}", err=True)
    else:
        click.echo(envelope)
    if attestation:
        Path(attestation).write_text(json.dumps(sign_dsse(verdict_statement(record), keys), indent=2) + "\n",
                                     encoding="utf-8")


@click.command(epilog=SIGN_EXIT_CODES)
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="the PDF to write")
@click.option("--instance", "instance_dir", type=click.Path(file_okay=False),
              help="instance folder holding the signing key; without it the PDF is a DRAFT")
@click.option("--draft", is_flag=True, help="render a DRAFT even when the record is approved")
def pdf(file: str, out: str, instance_dir: str | None, draft: bool) -> None:
    """Render the record in FILE as PDF: signed when approved and --instance is given, else a DRAFT."""
    from service.record import is_approved
    from service.record.render import draft_pdf, signed_pdf

    record = _read_record(file)
    signed = bool(instance_dir) and not draft and is_approved(record)
    try:
        data = signed_pdf(record, _keys(instance_dir)) if signed else draft_pdf(record)  # type: ignore[arg-type]
    except QuotecheckError as error:
        _fail(str(error))
    Path(out).write_bytes(data)
    why = "" if signed else (" (not approved)" if not is_approved(record) else " (no --instance)" if not instance_dir
                             else " (--draft)")
    click.echo(f"{'signed' if signed else 'DRAFT'} PDF{why} -> {out} ({len(data):,} bytes)", err=True)


@click.command(epilog=SIGN_EXIT_CODES)
@click.option("--instance", "instance_dir", required=True, type=click.Path(file_okay=False),
              help="instance folder holding the signing key (generated there on first use)")
def keys(instance_dir: str) -> None:
    """Print the public signing keys as JSON (the body of GET /api/v1/keys)."""
    from service.record.keys import public_keys_document

    click.echo(json.dumps(public_keys_document(_keys(instance_dir)), indent=2))
