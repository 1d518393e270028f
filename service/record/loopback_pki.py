"""A real test PKI on loopback: a root CA, its OCSP responder, CRL and time-stamping authority over HTTP.

For development, `make demo-lta` and the tests only (Certomancer is a development dependency). It writes
ECDSA P-256 keys and a Certomancer configuration into a folder, serves Certomancer's WSGI app (the Animator)
from a thread on 127.0.0.1, and writes out what the service needs to sign against it:

- ``root.cert.pem``: the one trust root (it issues the signer, the TSA and the OCSP responder);
- ``signer.chain.pem`` (the signer's certificate, then the root) and ``signer.key.pem``: the service's
  ``SIGNING_CERT_FILE`` and ``SIGNING_KEY_FILE``;
- ``pki.env``: ``QUOTECHECK_TSA_URL`` and ``QUOTECHECK_TSA_TRUST_ROOT_FILE`` for the service.

``python -m service.record.loopback_pki DIR`` serves until it is stopped (SIGTERM or SIGINT).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

ARCH = "quotecheck-test"
KEYS = ("root", "signer", "tsa", "ocsp")
ROOT_CERT, SIGNER_CHAIN, SIGNER_KEY, ENV_FILE = "root.cert.pem", "signer.chain.pem", "signer.key.pem", "pki.env"
# The test PKI's certificates are valid from a day before it starts (so clocks a little apart agree) for ten years.
VALID_BEFORE_START = dt.timedelta(days=1)
VALIDITY = dt.timedelta(days=3650)


def _stamp(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S+0000")


def _key_usage(*uses: str) -> dict[str, Any]:
    return {"id": "key_usage", "critical": True, "smart-value": {"schema": "key-usage", "params": list(uses)}}


def _revocation_pointers() -> list[dict[str, Any]]:
    return [{"id": "crl_distribution_points", "smart-value": {"schema": "crl-dist-url",
                                                              "params": {"crl-repo-names": ["root"]}}},
            {"id": "authority_information_access", "smart-value": {"schema": "aia-urls",
                                                                   "params": {"ocsp-responder-names": ["root"]}}}]


def certomancer_config(url: str, start: dt.datetime) -> dict[str, Any]:
    """Returns the Certomancer configuration of the test PKI served at ``url`` (its keys: ``KEYS`` as PEM files)."""
    validity = {"valid-from": _stamp(start - VALID_BEFORE_START), "valid-to": _stamp(start + VALIDITY)}
    certs = {
        "root": {"subject": "root", "issuer": "root", "validity": validity,
                 "extensions": [{"id": "basic_constraints", "critical": True, "value": {"ca": True}},
                                _key_usage("digital_signature", "key_cert_sign", "crl_sign")]},
        "signer": {"subject": "signer", "issuer": "root", "validity": validity,
                   "extensions": [_key_usage("digital_signature", "non_repudiation"), *_revocation_pointers()]},
        "tsa": {"subject": "tsa", "issuer": "root", "validity": validity,
                "extensions": [_key_usage("digital_signature"),
                               {"id": "extended_key_usage", "critical": True, "value": ["time_stamping"]},
                               *_revocation_pointers()]},
        "ocsp": {"subject": "ocsp", "issuer": "root", "validity": validity,
                 "extensions": [_key_usage("digital_signature"),
                                {"id": "extended_key_usage", "critical": True, "value": ["ocsp_signing"]},
                                {"id": "ocsp_no_check"}]},
    }
    return {
        "external-url-prefix": url,
        "keysets": {ARCH: {"path-prefix": ".", "keys": {name: {"path": f"{name}.key.pem"} for name in KEYS}}},
        "pki-architectures": {ARCH: {
            "keyset": ARCH,
            "entity-defaults": {"country-name": "BE", "organization-name": "quotecheck test PKI"},
            "entities": {"root": {"common-name": "quotecheck test root CA"},
                         "signer": {"common-name": "quotecheck record signing (test)"},
                         "tsa": {"common-name": "quotecheck test time-stamping authority"},
                         "ocsp": {"common-name": "quotecheck test OCSP responder"}},
            "certs": certs,
            "services": {
                "ocsp": {"root": {"for-issuer": "root", "responder-cert": "ocsp", "signing-key": "ocsp"}},
                "crl-repo": {"root": {"for-issuer": "root", "signing-key": "root",
                                      "simulated-update-schedule": "P1D"}},
                "time-stamping": {"tsa": {"signing-key": "tsa", "signing-cert": "tsa"}},
            },
        }},
    }


def _quiet_handler() -> Any:
    from werkzeug.serving import WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:  # one line per OCSP or TSA request is noise
            pass

    return Quiet


class _Dispatch:
    """The WSGI app the server starts with: the Animator once the PKI knows its own URL."""

    def __init__(self) -> None:
        self.app: Any = None

    def __call__(self, environ: Any, start_response: Any) -> Any:
        return self.app(environ, start_response)


class LoopbackPki:
    """The test PKI, served on 127.0.0.1 from a thread while started (a context manager)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.arch: Any = None
        self.animator: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def tsa_url(self) -> str:
        return f"{self.url}/{ARCH}/tsa/tsa"

    @property
    def root_cert_file(self) -> Path:
        return self.folder / ROOT_CERT

    @property
    def signer_chain_file(self) -> Path:
        return self.folder / SIGNER_CHAIN

    @property
    def signer_key_file(self) -> Path:
        return self.folder / SIGNER_KEY

    def settings(self) -> dict[str, str]:
        """Returns the service settings that sign against this PKI (names as in docs/settings.md, no prefix)."""
        return {"SIGNING_CERT_FILE": str(self.signer_chain_file), "SIGNING_KEY_FILE": str(self.signer_key_file),
                "TSA_URL": self.tsa_url, "TSA_TRUST_ROOT_FILE": str(self.root_cert_file)}

    def start(self) -> LoopbackPki:
        from certomancer.integrations.animator import Animator, AnimatorArchStore
        from certomancer.registry import CertomancerConfig
        from werkzeug.serving import make_server

        self.folder.mkdir(parents=True, exist_ok=True)
        for name in KEYS:
            path = self.folder / f"{name}.key.pem"
            if not path.exists():
                key = ec.generate_private_key(ec.SECP256R1())
                path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                   serialization.NoEncryption()))
                path.chmod(0o600)
        dispatch = _Dispatch()
        self._server = make_server("127.0.0.1", 0, dispatch, threaded=True,
                                   request_handler=_quiet_handler())
        config = CertomancerConfig(certomancer_config(self.url, dt.datetime.now(dt.UTC)),
                                   key_search_dir=str(self.folder))
        self.arch = config.get_pki_arch(ARCH)
        self.animator = Animator(AnimatorArchStore(config.pki_archs), with_web_ui=False, allow_time_override=False)
        dispatch.app = self.animator
        self._write_files()
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-pki", daemon=True)
        self._thread.start()
        return self

    def _pem(self, label: str) -> bytes:
        from asn1crypto import pem

        return pem.armor("CERTIFICATE", self.arch.get_cert(label).dump())

    def _write_files(self) -> None:
        self.root_cert_file.write_bytes(self._pem("root"))
        self.signer_chain_file.write_bytes(self._pem("signer") + self._pem("root"))
        (self.folder / "signer.key.pem").chmod(0o600)
        env = "".join(f"QUOTECHECK_{name}={value}\n" for name, value in self.settings().items())
        (self.folder / ENV_FILE).write_text(env, encoding="utf-8")

    def revoke(self, label: str = "signer", at: dt.datetime | None = None) -> dt.datetime:
        """Revokes certificate ``label`` from ``at`` (now): its OCSP answers and CRLs say so from then on."""
        from asn1crypto import crl
        from certomancer.registry.issued.general import RevocationStatus

        moment = at or dt.datetime.now(dt.UTC)
        spec = self.arch.get_cert_spec(label)
        revocation = RevocationStatus(revoked_since=moment, reason=crl.CRLReason("key_compromise"))
        self.arch._cert_specs[label] = dataclasses.replace(spec, revocation=revocation)
        return moment

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LoopbackPki:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    """Serves the test PKI from folder ``argv[0]`` until SIGTERM or SIGINT; prints its settings when ready."""
    if len(argv) != 1:
        print("usage: python -m service.record.loopback_pki DIR", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with LoopbackPki(argv[0]) as pki:
        print(f"test PKI at {pki.url}; trust root {pki.root_cert_file}; settings in {pki.folder / ENV_FILE}",
              flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
