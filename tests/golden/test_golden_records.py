"""Every record the suite's fixtures and examples produce stays as it was, unless a commit says why it changed."""

from __future__ import annotations

import pytest
from golden_support import differences, golden_documents, load_golden, record_of

from rules.policy import Policy

GOLDEN = load_golden()
DOCUMENTS = list(golden_documents())


def test_the_golden_file_covers_every_fixture_and_example() -> None:
    names = [name for name, _, _ in DOCUMENTS]
    assert sorted(GOLDEN) == sorted(names), "regenerate: python -m tests.golden.golden_support --update"


@pytest.mark.parametrize(("name", "submission", "policy"), DOCUMENTS, ids=[name for name, _, _ in DOCUMENTS])
def test_the_record_is_unchanged(name: str, submission: dict, policy: Policy | None) -> None:
    found = list(differences(GOLDEN[name], record_of(submission, policy)))
    assert not found, f"{name} differs from its golden record in {len(found)} places:\n" + "\n".join(found[:40])
