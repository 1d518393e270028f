"""Signing keys: generated on first use into the instance folder (0600), reloaded, configured, published."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from flask import Flask

from service.record import SigningError, SigningKeys, TrustedKeys, key_id_of, public_keys_document, signing_keys
from service.record.keys import CERT_FILE, KEY_FILE, PUBLIC_KEY_FILE, SIGNING_DIR


def test_first_use_generates_a_private_key_only_the_owner_can_read(tmp_path: Path) -> None:
    keys = SigningKeys.load_or_create(tmp_path)

    folder = tmp_path / SIGNING_DIR
    assert stat.S_IMODE((folder / KEY_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert (folder / PUBLIC_KEY_FILE).read_text() == keys.public_key_pem()
    assert (folder / CERT_FILE).read_text() == keys.certificate_pem()
    assert keys.algorithm == "ecdsa-p256-sha256"


def test_second_use_loads_the_same_key(tmp_path: Path) -> None:
    first = SigningKeys.load_or_create(tmp_path)

    second = SigningKeys.load_or_create(tmp_path)

    assert second.key_id == first.key_id
    assert second.certificate == first.certificate


def test_a_key_others_may_read_is_refused(tmp_path: Path) -> None:
    SigningKeys.load_or_create(tmp_path)
    (tmp_path / SIGNING_DIR / KEY_FILE).chmod(0o644)

    with pytest.raises(SigningError, match="may be read by group or others .*chmod 600"):
        SigningKeys.load_or_create(tmp_path)


def test_certificate_is_self_signed_for_document_signing(keys: SigningKeys) -> None:
    cert = keys.certificate

    assert cert.issuer == cert.subject
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.content_commitment and not usage.key_cert_sign
    cert.verify_directly_issued_by(cert)


def test_configured_certificate_and_key_are_used(tmp_path: Path, keys: SigningKeys) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_text(keys.certificate_pem())
    key.write_bytes(keys.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.BestAvailableEncryption(b"s3cret")))
    app = Flask("t", instance_path=str(tmp_path / "instance"))
    app.config.update(SIGNING_CERT_FILE=str(cert), SIGNING_KEY_FILE=str(key), SIGNING_KEY_PASSWORD="s3cret")

    assert signing_keys(app).key_id == keys.key_id
    assert not (tmp_path / "instance" / SIGNING_DIR).exists()  # nothing generated beside a configured key


def test_a_certificate_for_another_key_is_refused(keys: SigningKeys, other_keys: SigningKeys) -> None:
    with pytest.raises(SigningError, match="certificate does not certify the signing key"):
        SigningKeys(keys.private_key, other_keys.certificate)


def test_half_a_configuration_is_an_error(tmp_path: Path) -> None:
    app = Flask("t", instance_path=str(tmp_path))
    app.config["SIGNING_CERT_FILE"] = str(tmp_path / "cert.pem")

    with pytest.raises(SigningError, match="both SIGNING_CERT_FILE and SIGNING_KEY_FILE"):
        signing_keys(app)


def test_app_keys_default_to_the_instance_folder(tmp_path: Path) -> None:
    app = Flask("t", instance_path=str(tmp_path))

    with app.app_context():
        keys = signing_keys()

    assert keys.key_id == SigningKeys.load_or_create(tmp_path).key_id
    assert signing_keys(app) is keys  # loaded once per app


def test_public_keys_document_for_the_keys_endpoint(keys: SigningKeys) -> None:
    document = public_keys_document(keys)

    (entry,) = document["keys"]
    assert entry["key_id"] == keys.key_id
    assert entry["algorithm"] == "ecdsa-p256-sha256"
    assert entry["public_key_pem"].startswith("-----BEGIN PUBLIC KEY-----")
    assert x509.load_pem_x509_certificate(entry["certificate_pem"].encode()) == keys.certificate
    assert entry["certificate_sha256"].startswith("sha256:") and entry["not_after"].endswith("Z")
    assert "PRIVATE" not in str(document)


def test_trusted_keys_from_pem_take_keys_and_certificates(keys: SigningKeys, other_keys: SigningKeys) -> None:
    pem = (keys.public_key_pem() + other_keys.certificate_pem()).encode()

    trusted = TrustedKeys.from_pem(pem)

    assert set(trusted.keys) == {keys.key_id, other_keys.key_id}
    assert trusted.get(keys.key_id).certificate is None
    assert trusted.get(other_keys.key_id).certificate == other_keys.certificate
    assert key_id_of(keys.public_key) == keys.key_id


def test_a_private_key_is_never_a_trust_root(keys: SigningKeys) -> None:
    pem = keys.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())

    with pytest.raises(SigningError, match="holds a private key"):
        TrustedKeys.from_pem(pem)


def test_instance_trust_reads_only_public_files(instance: Path, instance_keys: SigningKeys) -> None:
    trusted = TrustedKeys.from_instance(instance)

    assert list(trusted.keys) == [instance_keys.key_id]
    assert trusted.get(instance_keys.key_id).certificate == instance_keys.certificate
