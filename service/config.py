"""Configuration defaults; create_app layers the instance file, the environment and test_config on top."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

ENV_PREFIX = "QUOTECHECK"


def system_clock() -> datetime:
    """Returns the current time, timezone-aware UTC."""
    return datetime.now(UTC)


DEFAULTS: dict[str, Any] = {
    # None: a SQLite file in the instance folder. postgresql://… is served by psycopg 3.
    "DATABASE_URL": None,
    # Requests above this many bytes get 413 before their body is read.
    "MAX_CONTENT_LENGTH": 2 * 1024 * 1024,
    # Bring the schema to the newest migration on start. Off in production where `quotecheck db upgrade`
    # runs once per release; harmless when on, since concurrent starts serialise on an advisory lock.
    "AUTO_MIGRATE": True,
    # A policy JSON file; None uses the bundled default policy.
    "POLICY_FILE": None,
    # Problem "type" URIs are this base + a slug per error class (RFC 9457).
    "PROBLEM_TYPE_BASE": "https://quotecheck.dev/problems/",
    # How long a SQLite writer waits for the write lock before giving up.
    "SQLITE_BUSY_TIMEOUT_S": 30,
    "DEFAULT_PAGE_SIZE": 20,
    "MAX_PAGE_SIZE": 100,
    # The record signing key. Neither file set: an ECDSA P-256 key and a self-signed certificate generated on
    # first use in <instance>/signing/ (under a file lock, so processes starting at once generate one key).
    # Production sets both (PEM; the key readable by the service user only); setting one alone is an error.
    "SIGNING_CERT_FILE": None,
    "SIGNING_KEY_FILE": None,
    # Decrypts an encrypted SIGNING_KEY_FILE. A string: in the environment, JSON-quote values such as "true"
    # or digits, e.g. QUOTECHECK_SIGNING_KEY_PASSWORD='"1234"', or they arrive as JSON numbers or booleans.
    "SIGNING_KEY_PASSWORD": None,
    # Load (or generate) the signing key when the app is created, so a bad configuration stops the start
    # rather than the first approval. False: on first use (for processes that never sign, without the key).
    "SIGNING_KEYS_AT_START": True,
    # The clock the workflow reads (waiver expiry, timestamps); tests replace it to move time.
    "CLOCK": system_clock,
}


def clock_of(config: dict[str, Any]) -> Callable[[], datetime]:
    """Returns the configured clock; falls back to the system clock."""
    return config.get("CLOCK") or system_clock
