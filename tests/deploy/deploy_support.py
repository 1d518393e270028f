"""What the deployment tests share: the paths of deploy/, its YAML read as the tools read it, docs/settings.md."""

from __future__ import annotations

import copy
import functools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SETTINGS_DOC = ROOT / "docs" / "settings.md"
SCHEMAS = Path(__file__).resolve().parent / "schemas"

# A row of a settings table: | `QUOTECHECK_NAME` | default | value | effect |
_ROW = re.compile(r"^\|\s*`(QUOTECHECK_[A-Z0-9_]+)`\s*\|\s*(.*?)\s*\|")
# The heading of the table of variables only the tests read.
TEST_SUITE_HEADING = "## Test suite"
# A QUOTECHECK_ name as prose, files and manifests spell it (QUOTECHECK_<KEY> and QUOTECHECK_* are not names).
NAME_MENTION = re.compile(r"QUOTECHECK_[A-Z0-9_]*[A-Za-z0-9]")


@dataclass(frozen=True)
class DocumentedSettings:
    """The rows of docs/settings.md: the default cell of each setting, and of each test-suite variable."""

    settings: dict[str, str]
    test_variables: dict[str, str]

    def names(self) -> set[str]:
        return set(self.settings) | set(self.test_variables)


def documented_settings(path: Path = SETTINGS_DOC) -> DocumentedSettings:
    """Returns the settings and test-suite variables that the tables of ``path`` document."""
    settings: dict[str, str] = {}
    test_variables: dict[str, str] = {}
    table = settings
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            table = test_variables if line.strip() == TEST_SUITE_HEADING else settings
        match = _ROW.match(line)
        if match:
            name, default = match.groups()
            assert name not in settings and name not in test_variables, f"{name} has two rows in {path.name}"
            table[name] = default
    return DocumentedSettings(settings, test_variables)


def setting_of(mention: str) -> str:
    """Returns the setting a variable name sets: QUOTECHECK_CELERY__worker_concurrency sets QUOTECHECK_CELERY."""
    return mention.split("__", 1)[0]


# libyaml's loader when PyYAML has it: the tests read the same few files many times.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.cache
def _parsed(path: Path) -> list[dict[str, Any]]:
    documents = yaml.load_all(path.read_text(encoding="utf-8"), Loader=_LOADER)
    return [document for document in documents if document is not None]


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    """Returns the documents of a YAML file (anchors and merge keys resolved, as Compose and kubectl do).

    Each call gets its own copy, which a test may change.
    """
    return copy.deepcopy(_parsed(path))


def compose_file() -> dict[str, Any]:
    """Returns deploy/compose.yaml as Compose reads it before interpolation."""
    (document,) = yaml_documents(DEPLOY / "compose.yaml")
    return document


def kubernetes_manifests() -> dict[str, list[dict[str, Any]]]:
    """Returns the objects of each manifest under deploy/kubernetes/ by file name (not the kustomization)."""
    return {path.name: yaml_documents(path) for path in sorted(KUBERNETES.glob("*.yaml"))
            if path.name != "kustomization.yaml"}


def project_version() -> str:
    """Returns the version in pyproject.toml, which the image tag carries."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["project"]["version"]
