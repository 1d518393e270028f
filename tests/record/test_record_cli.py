"""`quotecheck verify`, `sign`, `pdf`, `keys`: exit 0 valid, 1 invalid with the reason, 2 unreadable input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from service.cli import main
from service.record import SigningKeys, record_digest, sign_record


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _write(tmp_path: Path, name: str, data: bytes | str) -> str:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


def test_verify_accepts_a_signed_record(tmp_path: Path, approved: dict[str, Any], instance: Path,
                                        instance_keys: SigningKeys) -> None:
    path = _write(tmp_path, "record.json", json.dumps(sign_record(approved, instance_keys)))

    code, output = _run("verify", path, "--instance", str(instance))

    assert code == 0, output
    assert output.startswith(f"VALID  {path} (record envelope)")
    assert record_digest(approved) in output


def test_verify_refuses_a_changed_value_and_says_why(tmp_path: Path, approved: dict[str, Any], instance: Path,
                                                     instance_keys: SigningKeys) -> None:
    envelope = copy.deepcopy(sign_record(approved, instance_keys))
    envelope["record"]["submission"]["vendor"] = "Someone Else Ltd"
    path = _write(tmp_path, "record.json", json.dumps(envelope))

    code, output = _run("verify", path, "--instance", str(instance))

    assert code == 1
    assert output.startswith("INVALID")
    assert (f"record digest {record_digest(envelope['record'])} does not match signed digest "
            f"{record_digest(approved)}") in output


def test_verify_refuses_a_changed_pdf_byte_and_says_why(tmp_path: Path, signed_pdf: bytes, instance: Path) -> None:
    tampered = bytearray(signed_pdf)
    tampered[len(tampered) // 2] ^= 0x20
    path = _write(tmp_path, "record.pdf", bytes(tampered))

    code, output = _run("verify", path, "--instance", str(instance))

    assert code == 1
    assert output.startswith(f"INVALID  {path} (PDF)")
    assert "  x " in output


def test_verify_accepts_the_pdf_with_the_public_key_alone(tmp_path: Path, signed_pdf: bytes,
                                                          instance_keys: SigningKeys) -> None:
    """A bare public key (no certificate) pins the signer: enough to verify PDF and JSON offline."""
    key = _write(tmp_path, "key.pem", instance_keys.public_key_pem())
    path = _write(tmp_path, "record.pdf", signed_pdf)

    code, output = _run("verify", path, "--key", key)

    assert code == 0, output
    assert "chains to a trusted root" in output and "PAdES B-B" in output


def test_verify_refuses_a_pdf_signed_by_an_untrusted_key(tmp_path: Path, signed_pdf: bytes,
                                                          other_keys: SigningKeys) -> None:
    key = _write(tmp_path, "other.pem", other_keys.certificate_pem())
    path = _write(tmp_path, "record.pdf", signed_pdf)

    code, output = _run("verify", path, "--key", key)

    assert code == 1
    assert "does not chain to a trusted root" in output
    assert "unknown key id" in output


def test_verify_json_output_for_the_api(tmp_path: Path, signed_pdf: bytes, instance: Path) -> None:
    code, output = _run("verify", _write(tmp_path, "r.pdf", signed_pdf), "--instance", str(instance),
                        "--format", "json")

    document = json.loads(output)
    assert code == 0 and document["ok"] is True and document["subject"] == "PDF"
    assert document["reasons"] == [] and document["record_id"]


def test_unreadable_input_exits_2(tmp_path: Path, instance: Path) -> None:
    code, output = _run("verify", _write(tmp_path, "x.txt", b"hello"), "--instance", str(instance))
    assert code == 2 and "neither a PDF nor JSON" in output

    code, output = _run("verify", str(tmp_path / "missing.json"), "--instance", str(instance))
    assert code == 2 and "cannot read" in output


def test_no_trust_root_exits_2(tmp_path: Path, approved: dict[str, Any], keys: SigningKeys) -> None:
    code, output = _run("verify", _write(tmp_path, "r.json", json.dumps(sign_record(approved, keys))))

    assert code == 2
    assert "no trust root" in output


def test_sign_then_verify_and_keys(tmp_path: Path, evaluation: dict[str, Any]) -> None:
    record = _write(tmp_path, "record.json", json.dumps(evaluation))
    instance = tmp_path / "instance"
    signed, attestation = tmp_path / "signed.json", tmp_path / "verdict.dsse.json"

    code, output = _run("sign", record, "--instance", str(instance), "--out", str(signed),
                        "--attestation", str(attestation))
    assert code == 0, output

    assert _run("verify", str(signed), "--instance", str(instance))[0] == 0
    assert _run("verify", str(attestation), "--instance", str(instance))[0] == 0
    code, output = _run("keys", "--instance", str(instance))
    assert code == 0 and json.loads(output)["keys"][0]["key_id"] == SigningKeys.load_or_create(instance).key_id


def test_sign_refuses_what_is_not_a_record(tmp_path: Path, instance: Path) -> None:
    code, output = _run("sign", _write(tmp_path, "x.json", '{"a": 1}'), "--instance", str(instance))

    assert code == 2 and "is not a commissioning record" in output
