"""Fixtures for the record tests: an approved record with a waiver, keys, and PDFs rendered once per session.

Rendering a record PDF takes about a second, so each PDF is rendered once and shared (read-only) by the
tests that inspect it; tests that tamper with one work on a copy of its bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from record_support import EXAMPLE, approve

from rules.evaluate import evaluate
from service.record import SigningKeys


@pytest.fixture(scope="session")
def evaluation() -> dict[str, Any]:
    """The evaluation record of the H200 example, as the engine issues it (no decision yet)."""
    return evaluate(json.loads(EXAMPLE.read_text()))


@pytest.fixture(scope="session")
def approved(evaluation: dict[str, Any]) -> dict[str, Any]:
    """The approved record, with one check waived (host-ram when the catalogue has it)."""
    ids = [c["id"] for c in evaluation["checks"]]
    return approve(evaluation, waive="host-ram" if "host-ram" in ids else ids[-1])


@pytest.fixture(scope="session")
def keys() -> SigningKeys:
    return SigningKeys.generate()


@pytest.fixture(scope="session")
def other_keys() -> SigningKeys:
    """Keys nobody trusts: a valid signature by them must still be refused."""
    return SigningKeys.generate(subject="someone else")


@pytest.fixture(scope="session")
def instance(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An instance folder whose signing key was generated on first use."""
    folder = tmp_path_factory.mktemp("instance")
    SigningKeys.load_or_create(folder)
    return folder


@pytest.fixture(scope="session")
def instance_keys(instance: Path) -> SigningKeys:
    return SigningKeys.load_or_create(instance)


@pytest.fixture(scope="session")
def signed_pdf(approved: dict[str, Any], instance_keys: SigningKeys) -> bytes:
    from service.record import record_pdf

    return record_pdf(approved, instance_keys)


@pytest.fixture(scope="session")
def draft_pdf(evaluation: dict[str, Any]) -> bytes:
    from service.record import record_pdf

    return record_pdf(evaluation)
