"""Reads the check fixtures: tests/checks/<check_dir>/<status>_<description>.json, expectations in expected.json.

A fixture is ``{"base": "<name>", "patch": {...}}``: the whole submission tests/checks/bases/<name>.json with
``patch`` applied as a JSON merge patch (RFC 7396: objects merge member by member, ``null`` removes a member,
arrays such as ``node_groups`` and ``racks`` are replaced whole). A fixture may also be a whole submission.
The bases are named for what they describe (``2x-l40s-llama3-8b-serving``), so a renamed submission field is
renamed in the bases and in the few patches that set it. A fixture with a base may name the policy it is evaluated
under: ``"policy": {...}``, a merge patch on the default policy (``{"defaults": {"training": {"dataloader": null}}}``:
a policy that gives no dataloader default); without it, the default policy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rules.advice.compare import merge_patch
from rules.policy import Policy, default_policy, parse_policy

CHECKS_DIR = Path(__file__).resolve().parent
BASES_DIR = CHECKS_DIR / "bases"
EXPECTATIONS = "expected.json"
_BASE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def check_directories() -> list[Path]:
    """Returns the fixture directories, one per check id (those holding an expected.json), sorted."""
    return sorted(p for p in CHECKS_DIR.iterdir() if p.is_dir() and (p / EXPECTATIONS).exists())


def fixture_paths() -> list[Path]:
    """Returns every fixture file of every check directory, sorted (bases and expectations excluded)."""
    return [path for directory in check_directories() for path in sorted(directory.glob("*.json"))
            if path.name != EXPECTATIONS]


def base_paths() -> list[Path]:
    """Returns every base submission file, sorted."""
    return sorted(BASES_DIR.glob("*.json"))


def load_base(name: str) -> dict[str, Any]:
    """Returns the base submission ``name`` (tests/checks/bases/<name>.json)."""
    if not isinstance(name, str) or not _BASE_NAME.fullmatch(name):
        raise ValueError(f"base {name!r} is not a base name (lower-case letters, digits, '-' and '_')")
    path = BASES_DIR / f"{name}.json"
    if not path.exists():
        raise ValueError(f"base {name!r} not found: expected {path.relative_to(CHECKS_DIR)}")
    document = json.loads(path.read_text())
    if "base" in document:
        raise ValueError(f"base {name!r} names a base itself; a base is a whole submission")
    return document


def expand(fixture: dict[str, Any], where: str = "fixture") -> dict[str, Any]:
    """Returns the submission ``fixture`` describes: its base with its patch applied, or itself when whole."""
    if "base" not in fixture:  # a whole submission (the submission schema allows no top-level "base")
        return fixture
    if not {"base", "patch"} <= set(fixture) <= {"base", "patch", "policy"} or not isinstance(fixture["patch"], dict) \
            or not isinstance(fixture.get("policy", {}), dict):
        raise ValueError(f"{where}: a fixture with a base has the members base and patch (an object), and optionally "
                         f"policy (an object), found {sorted(fixture)}")
    try:
        base = load_base(fixture["base"])
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None
    return merge_patch(base, fixture["patch"])


def load_fixture(path: Path) -> dict[str, Any]:
    """Returns the whole submission of the fixture file at ``path``."""
    return expand(json.loads(Path(path).read_text()), str(path))


def load_fixture_policy(path: Path) -> Policy | None:
    """Returns the policy the fixture at ``path`` is evaluated under: the default policy with the fixture's ``policy``
    merge patch applied, or None (the default policy) for a fixture without one."""
    fixture = json.loads(Path(path).read_text())
    patch = fixture.get("policy") if "base" in fixture else None
    if patch is None:
        return None
    document = merge_patch(default_policy().document, patch)
    return parse_policy(json.dumps(document).encode(), origin=f"{Path(path).name}: the default policy patched")
