"""The service's signing key and certificate, and the explicit sets of keys a verifier trusts.

One key signs everything the service issues: the record envelope, the DSSE envelope of the in-toto
statement, and (through a self-signed X.509 certificate over the same key) the PAdES signature of the PDF.
So one trust root — the certificate, or just its public key — verifies all three.

The key lives in the instance folder, never in the repository: ``<instance>/signing/`` holds
``record-signing.key.pem`` (PKCS#8, mode 0600), ``record-signing.pub.pem`` and ``record-signing.cert.pem``,
generated on first use (ECDSA P-256). Production configures its own certificate and key instead
(``SigningKeys.from_files``). A key id is ``sha256:`` + the hex SHA-256 of the DER SubjectPublicKeyInfo.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

from service.file_lock import locked
from service.record.errors import SigningError
from service.record.timestamps import TimestampAuthority

ECDSA_P256_SHA256 = "ecdsa-p256-sha256"  # ECDSA over P-256 with SHA-256; signature DER-encoded (as in X.509/CMS)
ED25519 = "ed25519"  # Ed25519 (RFC 8032), 64-byte signature

KEY_FILE, PUBLIC_KEY_FILE, CERT_FILE = "record-signing.key.pem", "record-signing.pub.pem", "record-signing.cert.pem"
SIGNING_DIR = "signing"
CERT_VALIDITY = dt.timedelta(days=3650)
CERT_SUBJECT = "quotecheck record signing"

PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
PublicKey = ec.EllipticCurvePublicKey | ed25519.Ed25519PublicKey


def key_id_of(public_key: PublicKey) -> str:
    """Returns ``sha256:<hex>`` of the DER SubjectPublicKeyInfo of ``public_key``."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(der).hexdigest()


def algorithm_of(key: PublicKey | PrivateKey) -> str:
    """Returns the signature algorithm name of a key; SigningError for any key other than P-256 or Ed25519."""
    if isinstance(key, ed25519.Ed25519PublicKey | ed25519.Ed25519PrivateKey):
        return ED25519
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        if isinstance(key.curve, ec.SECP256R1):
            return ECDSA_P256_SHA256
        raise SigningError(f"unsupported ECDSA curve {key.curve.name}; use P-256 (secp256r1)")
    raise SigningError(f"unsupported signing key type {type(key).__name__}; use ECDSA P-256 or Ed25519")


def verify_signature(public_key: PublicKey, signature: bytes, data: bytes) -> bool:
    """Returns True when ``signature`` is a valid signature of ``data`` under ``public_key``."""
    try:
        if isinstance(public_key, ed25519.Ed25519PublicKey):
            public_key.verify(signature, data)
        else:
            public_key.verify(signature, data, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def _public_pem(public_key: PublicKey) -> str:
    return public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


@dataclass(frozen=True)
class TrustedKey:
    """One public key a verifier trusts, with the certificate that carries it when one was given."""

    public_key: PublicKey
    certificate: x509.Certificate | None = None

    @property
    def key_id(self) -> str:
        return key_id_of(self.public_key)

    @property
    def algorithm(self) -> str:
        return algorithm_of(self.public_key)


@dataclass(frozen=True)
class TrustedKeys:
    """The explicit trust roots of a verification, by key id. Nothing else is trusted: no system store."""

    keys: dict[str, TrustedKey] = field(default_factory=dict)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, key_id: str) -> TrustedKey | None:
        return self.keys.get(key_id)

    @property
    def certificates(self) -> list[x509.Certificate]:
        return [k.certificate for k in self.keys.values() if k.certificate is not None]

    def describe(self) -> str:
        """Returns the trusted key ids, comma-separated, for messages."""
        return ", ".join(self.keys) or "none"

    @classmethod
    def of(cls, entries: Iterable[TrustedKey]) -> TrustedKeys:
        return cls({entry.key_id: entry for entry in entries})

    def merged(self, other: TrustedKeys) -> TrustedKeys:
        """Returns the union of two trust sets; an entry with a certificate wins over a bare key."""
        keys = dict(self.keys)
        for key_id, entry in other.keys.items():
            if key_id not in keys or keys[key_id].certificate is None:
                keys[key_id] = entry
        return TrustedKeys(keys)

    @classmethod
    def from_pem(cls, data: bytes, origin: str = "PEM") -> TrustedKeys:
        """Returns the keys in PEM ``data``: any mix of PUBLIC KEY and CERTIFICATE blocks.

        Raises SigningError when ``data`` holds no key, or a private key (refused so that a private key is
        never passed around as a trust root by mistake).
        """
        if b"PRIVATE KEY-----" in data:
            raise SigningError(f"{origin} holds a private key; give the public key or the certificate")
        entries: list[TrustedKey] = []
        for block in _pem_blocks(data):
            try:
                if block.startswith(b"-----BEGIN CERTIFICATE-----"):
                    cert = x509.load_pem_x509_certificate(block)
                    public_key = cert.public_key()
                    algorithm_of(public_key)  # type: ignore[arg-type]
                    entries.append(TrustedKey(public_key, cert))  # type: ignore[arg-type]
                elif block.startswith(b"-----BEGIN PUBLIC KEY-----"):
                    public_key = serialization.load_pem_public_key(block)
                    algorithm_of(public_key)  # type: ignore[arg-type]
                    entries.append(TrustedKey(public_key))  # type: ignore[arg-type]
            except ValueError as error:
                raise SigningError(f"{origin}: a PEM block cannot be read: {error}") from None
        if not entries:
            raise SigningError(f"{origin} holds no PUBLIC KEY or CERTIFICATE block")
        return cls.of(entries)

    @classmethod
    def from_files(cls, paths: Iterable[str | Path]) -> TrustedKeys:
        """Returns the union of the keys in the PEM files ``paths``."""
        trusted = cls()
        for path in paths:
            try:
                data = Path(path).read_bytes()
            except OSError as error:
                raise SigningError(f"cannot read trusted key {path}: {error.strerror}") from None
            trusted = trusted.merged(cls.from_pem(data, str(path)))
        return trusted

    @classmethod
    def from_instance(cls, instance_dir: str | Path) -> TrustedKeys:
        """Returns the public key and certificate of an instance folder's signing key (its private key is not read)."""
        folder = Path(instance_dir) / SIGNING_DIR
        cert, public = folder / CERT_FILE, folder / PUBLIC_KEY_FILE
        if cert.exists():
            return cls.from_files([cert])
        if public.exists():
            return cls.from_files([public])
        raise SigningError(f"{folder} holds no {CERT_FILE} or {PUBLIC_KEY_FILE}; has this instance signed anything?")


def _pem_blocks(data: bytes) -> Iterator[bytes]:
    marker = b"-----BEGIN "
    start = data.find(marker)
    while start != -1:
        end_marker = data.find(b"-----END ", start)
        if end_marker == -1:
            return
        end = data.find(b"-----", end_marker + 9)
        if end == -1:
            return
        yield data[start:end + 5]
        start = data.find(marker, end + 5)


@dataclass(frozen=True)
class SigningKeys:
    """The private key the service signs with, its certificate and the certificate's chain (issuers up to the
    root, empty for a self-signed one), the TSA that timestamps its signatures (None: no timestamps, B-B), and
    what verifiers need to trust it."""

    private_key: PrivateKey
    certificate: x509.Certificate
    origin: str = "memory"
    chain: tuple[x509.Certificate, ...] = ()
    tsa: TimestampAuthority | None = None

    def __post_init__(self) -> None:
        if key_id_of(self.certificate.public_key()) != key_id_of(self.private_key.public_key()):  # type: ignore[arg-type]
            raise SigningError(f"{self.origin}: the certificate does not certify the signing key "
                               f"(certificate key {key_id_of(self.certificate.public_key())}, "  # type: ignore[arg-type]
                               f"signing key {key_id_of(self.private_key.public_key())})")

    @property
    def public_key(self) -> PublicKey:
        return self.private_key.public_key()

    @property
    def key_id(self) -> str:
        return key_id_of(self.public_key)

    @property
    def algorithm(self) -> str:
        return algorithm_of(self.private_key)

    def sign(self, data: bytes) -> bytes:
        """Returns the signature of ``data`` (ECDSA P-256/SHA-256 DER, or Ed25519)."""
        if isinstance(self.private_key, ed25519.Ed25519PrivateKey):
            return self.private_key.sign(data)
        return self.private_key.sign(data, ec.ECDSA(hashes.SHA256()))

    def trusted(self) -> TrustedKeys:
        """Returns the trust set that verifies what these keys sign: the certificate and its key, and the roots of
        its chain and of the TSA (those of a key type the verifier reads)."""
        entries = [TrustedKey(self.public_key, self.certificate)]
        for root in self.chain[-1:] + (self.tsa.trust_roots if self.tsa else ()):
            with contextlib.suppress(SigningError):
                algorithm_of(root.public_key())  # type: ignore[arg-type]
                entries.append(TrustedKey(root.public_key(), root))  # type: ignore[arg-type]
        return TrustedKeys.of(entries)

    def with_tsa(self, tsa: TimestampAuthority | None) -> SigningKeys:
        """Returns these keys timestamping with ``tsa``."""
        return dataclasses.replace(self, tsa=tsa)

    def public_key_pem(self) -> str:
        return _public_pem(self.public_key)

    def certificate_pem(self) -> str:
        return self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    # --- loading -------------------------------------------------------------------------------------

    @classmethod
    def generate(cls, *, now: dt.datetime | None = None, subject: str = CERT_SUBJECT) -> SigningKeys:
        """Returns a new ECDSA P-256 key with a self-signed certificate (kept in memory only)."""
        key = ec.generate_private_key(ec.SECP256R1())
        return cls(key, self_signed_certificate(key, subject=subject, now=now), origin="generated")

    @classmethod
    def from_files(cls, cert_file: str | Path, key_file: str | Path, password: bytes | None = None) -> SigningKeys:
        """Returns the configured certificate and private key (PEM) of a production deployment.

        ``cert_file`` holds the signer's certificate first, then any of its chain (issuer first, up to the root),
        which the PDF signature and the envelope carry and the PDF's validation data cover.
        """
        try:
            cert, *chain = x509.load_pem_x509_certificates(Path(cert_file).read_bytes())
            key = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=password)
        except OSError as error:
            raise SigningError(f"cannot read signing material: {error.filename}: {error.strerror}") from None
        except (ValueError, TypeError) as error:
            raise SigningError(f"cannot load signing material {cert_file} / {key_file}: {error}") from None
        algorithm_of(key)  # type: ignore[arg-type]
        return cls(key, cert, origin=f"{cert_file} + {key_file}", chain=tuple(chain))  # type: ignore[arg-type]

    @classmethod
    def load_or_create(cls, instance_dir: str | Path, *, now: dt.datetime | None = None) -> SigningKeys:
        """Returns the instance folder's signing key and certificate, generating both on first use.

        Concurrent first starts (several API or worker processes) serialise on a lock file, so exactly one
        key is generated. Refuses (SigningError) a private key file that group or others may read.
        """
        folder = Path(instance_dir) / SIGNING_DIR
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with locked(folder / ".lock"):
            key_path, cert_path = folder / KEY_FILE, folder / CERT_FILE
            if not key_path.exists():
                keys = cls.generate(now=now)
                _write_private(key_path, keys.private_key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
                _write_public(folder / PUBLIC_KEY_FILE, keys.public_key_pem().encode())
                _write_public(cert_path, keys.certificate_pem().encode())
                return keys._with_origin(str(folder))
            mode = stat.S_IMODE(key_path.stat().st_mode)
            if mode & 0o077:
                raise SigningError(f"{key_path} may be read by group or others (mode {mode:04o}); "
                                   f"run `chmod 600 {key_path}`")
            keys = cls.from_files(cert_path, key_path)
            return keys._with_origin(str(folder))

    def _with_origin(self, origin: str) -> SigningKeys:
        return dataclasses.replace(self, origin=origin)


def self_signed_certificate(key: PrivateKey, *, subject: str = CERT_SUBJECT,
                            now: dt.datetime | None = None) -> x509.Certificate:
    """Returns a self-signed X.509 certificate for document signing over ``key`` (valid ten years)."""
    now = now or dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "quotecheck")])
    public_key = key.public_key()
    builder = (x509.CertificateBuilder()
               .subject_name(name).issuer_name(name).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + CERT_VALIDITY)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=True, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False))
    algorithm = None if isinstance(key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(key, algorithm)


def _write_private(path: Path, data: bytes) -> None:
    # O_EXCL: never overwrite a key; 0600 from the start, so the key is never readable by others even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    tmp.chmod(0o644)
    tmp.replace(path)


def public_keys_document(keys: SigningKeys | Iterable[SigningKeys | TrustedKey]) -> dict[str, Any]:
    """Returns the public half of the service's keys as JSON for ``GET /api/v1/keys``.

    ``{"keys": [{"key_id", "algorithm", "public_key_pem", "certificate_pem", "certificate_sha256",
    "not_before", "not_after", "uses"}]}``; a verifier pins ``key_id`` or the certificate. A certificate a CA issued
    also gives ``chain_pem`` (its issuers up to the root, whose last is what ``quotecheck verify --key`` trusts), and
    keys that timestamp give ``tsa_trust_roots_pem`` (the roots the TSA's timestamps chain to).
    """
    entries = [keys] if isinstance(keys, SigningKeys) else list(keys)
    documents = []
    for entry in entries:
        public_key = entry.public_key
        cert = entry.certificate
        document: dict[str, Any] = {
            "key_id": key_id_of(public_key),
            "algorithm": algorithm_of(public_key),
            "public_key_pem": _public_pem(public_key),
            "uses": ["record-envelope", "dsse", "pades"],
        }
        if cert is not None:
            document.update({
                "certificate_pem": _certificate_pem(cert),
                "certificate_sha256": "sha256:" + cert.fingerprint(hashes.SHA256()).hex(),
                "not_before": _iso(cert.not_valid_before_utc),
                "not_after": _iso(cert.not_valid_after_utc),
            })
        if isinstance(entry, SigningKeys) and entry.chain:
            document["chain_pem"] = [_certificate_pem(issuer) for issuer in entry.chain]
        if isinstance(entry, SigningKeys) and entry.tsa is not None:
            document["tsa_trust_roots_pem"] = [_certificate_pem(root) for root in entry.tsa.trust_roots]
        documents.append(document)
    return {"keys": documents}


def _certificate_pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def b64encode(data: bytes) -> str:
    """Returns standard base64 with padding (RFC 4648 §4), the encoding of every signature value here."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Returns the bytes of strict standard base64; ValueError on any other character or bad padding."""
    return base64.b64decode(text.encode("ascii"), validate=True)
