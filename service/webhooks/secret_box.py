"""Webhook signing secrets at rest: AES-256-GCM under a key from the configuration, the key's id beside each secret.

The service signs every delivery with its subscription's secret, so it must read the secret back: it cannot keep a
hash. It keeps the secret encrypted instead (``webhook_subscription.secret``), and the id of the key that encrypted
it (``secret_key_id``), so that a new key can encrypt new secrets while the old one still opens the secrets it
sealed (rotation: WEBHOOK_SECRET_PREVIOUS_KEYS, then ``quotecheck webhook rekey``).

Where the key comes from:

- ``WEBHOOK_SECRET_KEY``: 32 random bytes in base64 (``openssl rand -base64 32``). Required where a broker is
  configured: secrets are then read by worker processes, perhaps on other machines, which share no instance folder.
- otherwise (one process, ``make demo``, the tests): a key generated on first use in the instance folder,
  ``<instance>/webhooks/secret-key`` (mode 0600, under a file lock), as the record signing key is. No key is in
  the repository.

A secret is sealed as ``v1:`` and the base64 of a random 96-bit nonce, the ciphertext and GCM's tag; the key id
(``sha256:`` and 16 hex digits of a hash of the key, which says nothing about the key) is the associated data, so a
secret moved under another id does not open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from flask import Flask, current_app

from service.errors import ConfigurationError, InvalidRequest
from service.file_lock import locked

KEY_BYTES, NONCE_BYTES = 32, 12
SEALED_PREFIX = "v1:"  # AES-256-GCM, 96-bit nonce, base64 of nonce + ciphertext + tag
KEY_DIR, KEY_FILE = "webhooks", "secret-key"
EXTENSION = "quotecheck.webhook_secrets"
MAKE_A_KEY = "make one with `openssl rand -base64 32`"


def key_id_of(key: bytes) -> str:
    """Returns the id stored beside each secret a key sealed: ``sha256:`` and 16 hex digits of a hash of the key."""
    return "sha256:" + hashlib.sha256(b"quotecheck webhook secret key\0" + key).hexdigest()[:16]


def parse_key(value: Any, setting: str) -> bytes:
    """Returns the 32 bytes a base64 key setting holds; InvalidRequest saying what is wrong (never the value)."""
    if not isinstance(value, str):
        raise InvalidRequest(f"{setting} must be a string: 32 random bytes in base64 ({MAKE_A_KEY}), "
                             f"found {type(value).__name__}")
    try:
        key = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest(f"{setting} is not base64: it must be 32 random bytes in base64 ({MAKE_A_KEY})") from None
    if len(key) != KEY_BYTES:
        raise InvalidRequest(f"{setting} must be {KEY_BYTES} bytes in base64 ({MAKE_A_KEY}), found {len(key)} bytes")
    return key


@dataclass(frozen=True)
class SecretBox:
    """The keys that open webhook secrets, by id; the current one (``current_id``) seals new ones."""

    current_id: str
    keys: Mapping[str, bytes]
    origin: str

    @classmethod
    def of(cls, current: bytes, previous: Sequence[bytes] = (), origin: str = "memory") -> SecretBox:
        keys = {key_id_of(current): current} | {key_id_of(key): key for key in previous}
        return cls(key_id_of(current), keys, origin)

    def seal(self, secret: str) -> tuple[str, str]:
        """Returns (key id, sealed secret) of ``secret`` under the current key."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = AESGCM(self.keys[self.current_id]).encrypt(nonce, secret.encode(), self.current_id.encode())
        return self.current_id, SEALED_PREFIX + base64.b64encode(nonce + sealed).decode()

    def open(self, key_id: str, sealed: str, what: str = "a webhook secret") -> str:
        """Returns the secret ``sealed`` holds; ConfigurationError saying which key it needs, or that it was altered."""
        key = self.keys.get(key_id)
        if key is None:
            raise ConfigurationError(
                f"{what} was encrypted with key {key_id}, which is not configured (the configured keys: "
                f"{', '.join(self.keys)}; the current one from {self.origin}): set WEBHOOK_SECRET_KEY to that key, "
                "or list it in WEBHOOK_SECRET_PREVIOUS_KEYS")
        if not sealed.startswith(SEALED_PREFIX):
            raise ConfigurationError(f"{what} is not in the sealed form {SEALED_PREFIX}… (found {len(sealed)} "
                                     "characters of something else): was the database written by another program?")
        try:
            raw = base64.b64decode(sealed.removeprefix(SEALED_PREFIX), validate=True)
            return AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], key_id.encode()).decode()
        except (binascii.Error, ValueError, InvalidTag):
            raise ConfigurationError(f"{what} does not decrypt with key {key_id}: the stored ciphertext was altered "
                                     "or moved from another row") from None


def validate_settings(config: Mapping[str, Any]) -> None:
    """Checks the key settings that are set, so a malformed key stops the start rather than the first webhook."""
    if config.get("WEBHOOK_SECRET_KEY") is not None:
        parse_key(config["WEBHOOK_SECRET_KEY"], "WEBHOOK_SECRET_KEY")
    previous = config.get("WEBHOOK_SECRET_PREVIOUS_KEYS") or []
    if isinstance(previous, str) or not isinstance(previous, list):
        raise InvalidRequest("WEBHOOK_SECRET_PREVIOUS_KEYS must be a JSON list of base64 keys, found "
                             f"{type(previous).__name__}")
    for index, value in enumerate(previous):
        parse_key(value, f"WEBHOOK_SECRET_PREVIOUS_KEYS[{index}]")


def box_of(config: Mapping[str, Any], instance_path: str) -> SecretBox:
    """Returns the keys of a configuration: WEBHOOK_SECRET_KEY (and the previous keys), else the instance folder's.

    ConfigurationError where a broker is configured and WEBHOOK_SECRET_KEY is not: the workers that read the
    secrets share no instance folder with the API, so a generated key would not open them there.
    """
    validate_settings(config)
    previous = [parse_key(value, "WEBHOOK_SECRET_PREVIOUS_KEYS") for value in config.get(
        "WEBHOOK_SECRET_PREVIOUS_KEYS") or []]
    if config.get("WEBHOOK_SECRET_KEY") is not None:
        return SecretBox.of(parse_key(config["WEBHOOK_SECRET_KEY"], "WEBHOOK_SECRET_KEY"), previous,
                            "WEBHOOK_SECRET_KEY")
    if config.get("CELERY_BROKER_URL"):
        raise ConfigurationError(
            "webhook signing secrets are stored encrypted with WEBHOOK_SECRET_KEY, which is not set: with a broker "
            "(CELERY_BROKER_URL) the workers that sign deliveries need the same key as the API. Set "
            f"QUOTECHECK_WEBHOOK_SECRET_KEY for the API, the workers and the migration ({MAKE_A_KEY}); keep it "
            "out of the repository")
    folder = Path(instance_path) / KEY_DIR
    return SecretBox.of(_instance_key(folder), previous, str(folder / KEY_FILE))


def secret_box(app: Flask | None = None) -> SecretBox:
    """Returns the app's SecretBox (``app`` or the current app), loaded or generated on first use, then kept."""
    app = app or current_app
    box = app.extensions.get(EXTENSION)
    if box is None:
        box = app.extensions[EXTENSION] = box_of(app.config, app.instance_path)
    return box


def _instance_key(folder: Path) -> bytes:
    """Returns the key in ``folder``, generated (mode 0600, under a lock) when there is none yet."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / KEY_FILE
    with locked(folder / ".lock"):
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as file:
                file.write(base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode() + "\n")
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ConfigurationError(f"{path} may be read by group or others (mode {mode:04o}); run `chmod 600 {path}`")
        try:
            return parse_key(path.read_text().strip(), str(path))
        except InvalidRequest as error:
            raise ConfigurationError(error.detail) from None


