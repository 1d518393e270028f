"""docs/settings.md against the code: every setting the service and the workers read is documented, with its
default, and nothing is documented that the code no longer reads.

The settings are found in the code, not listed here: the keys of ``service.config.DEFAULTS`` (but the
callables, which the environment cannot set), every configuration key the code reads (``config["KEY"]``,
``config.get("KEY")``) and every ``QUOTECHECK_*`` variable read from ``os.environ`` in service/, workers/
and deploy/ (``create_app``, deploy/gunicorn.conf.py). Variables the tests read belong in the page's
"Test suite" table.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deploy_support import NAME_MENTION, ROOT, documented_settings, setting_of

from service.config import DEFAULTS, ENV_PREFIX

SOURCE_DIRS = ("service", "workers", "deploy")
# Files whose QUOTECHECK_ names must all be documented ones.
MENTIONING_FILES = ("README.md", "docs/*.md", "deploy/*.md", "deploy/*.example", "deploy/*.service",
                    "deploy/*.yaml", "deploy/Dockerfile", "deploy/kubernetes/*.yaml")
CONFIG_KEY_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
NOT_LITERAL = object()


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return NOT_LITERAL


def _string(node: ast.expr) -> str | None:
    """Returns the string ``node`` spells, with ENV_PREFIX substituted in f-strings; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue) and getattr(value.value, "id", None) == "ENV_PREFIX":
                parts.append(ENV_PREFIX)
            else:
                return None
        return "".join(parts)
    return None


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and getattr(node.value, "id", None) == "os"


def _is_config(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "config") or (
        isinstance(node, ast.Attribute) and node.attr == "config")


def _is_config_key(key: str | None) -> bool:
    return bool(key) and key[0].isalpha() and set(key) <= CONFIG_KEY_CHARACTERS


def reads(tree: ast.AST) -> Iterator[tuple[str, Any]]:
    """Yields (variable name, default) for each QUOTECHECK_ variable or configuration key read in ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            name, target = _string(node.args[0]), node.func.value
            default = _literal(node.args[1]) if len(node.args) > 1 else None
            environ_read = (node.func.attr == "get" and _is_environ(target)) or (
                node.func.attr == "getenv" and getattr(target, "id", None) == "os")
            if environ_read and name and name.startswith(f"{ENV_PREFIX}_"):
                yield name, default
            elif node.func.attr == "get" and _is_config(target) and _is_config_key(name):
                yield f"{ENV_PREFIX}_{name}", DEFAULTS.get(name, default)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            name = _string(node.slice)
            if _is_environ(node.value) and name and name.startswith(f"{ENV_PREFIX}_"):
                yield name, None
            elif _is_config(node.value) and _is_config_key(name):
                yield f"{ENV_PREFIX}_{name}", DEFAULTS.get(name)


def _python_files(*folders: str) -> Iterator[Path]:
    for folder in folders:
        yield from sorted((ROOT / folder).rglob("*.py"))


@functools.cache
def code_settings() -> dict[str, Any]:
    """Returns every setting the service, the workers and gunicorn read, with its default."""
    settings = {f"{ENV_PREFIX}_{key}": value for key, value in DEFAULTS.items() if not callable(value)}
    for path in _python_files(*SOURCE_DIRS):
        for name, default in reads(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not callable(DEFAULTS.get(name.removeprefix(f"{ENV_PREFIX}_"))):
                settings.setdefault(name, default)
    return settings


def variables_the_tests_read() -> dict[str, Any]:
    """Returns the QUOTECHECK_ variables the tests read from the environment, with their defaults."""
    found: dict[str, Any] = {}
    for path in _python_files("tests"):
        for name, default in reads(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if name not in code_settings():
                found.setdefault(name, default)
    return found


def _documented_default(cell: str) -> Any:
    """Returns the JSON value a default cell starts with (`120`, `"quotecheck"`, `null`), or NOT_LITERAL."""
    if not cell.startswith("`"):
        return NOT_LITERAL
    token = cell[1:cell.index("`", 1)]
    try:
        return json.loads(token)
    except ValueError:
        return NOT_LITERAL


def test_the_scan_finds_the_settings_of_every_place_that_defines_them():
    settings = code_settings()

    # DEFAULTS, the instance folder create_app reads from the environment, gunicorn's own variables
    assert {"QUOTECHECK_DATABASE_URL", "QUOTECHECK_CELERY", "QUOTECHECK_SIGNING_KEY_PASSWORD"} <= set(settings)
    assert settings["QUOTECHECK_INSTANCE_PATH"] is None
    assert settings["QUOTECHECK_BIND"] == "127.0.0.1:8000" and settings["QUOTECHECK_WORKERS"] is NOT_LITERAL
    assert "QUOTECHECK_CLOCK" not in settings  # a function; the environment cannot set it


def test_the_scan_reads_configuration_keys_and_environment_variables_in_any_spelling():
    source = """
import os
a = os.environ.get("QUOTECHECK_A", 3)
b = os.environ[f"{ENV_PREFIX}_B"]
c = os.getenv("QUOTECHECK_C")
d = current_app.config["NEW_KEY"]
e = config.get("OTHER_KEY", "x")
f = config.attributes["connection"]
g = os.environ.get("HOME")
"""
    assert dict(reads(ast.parse(source))) == {
        "QUOTECHECK_A": 3, "QUOTECHECK_B": None, "QUOTECHECK_C": None,
        "QUOTECHECK_NEW_KEY": None, "QUOTECHECK_OTHER_KEY": "x"}


def test_every_setting_is_documented_and_every_documented_setting_exists():
    documented = documented_settings().settings
    settings = code_settings()

    undocumented = sorted(set(settings) - set(documented))
    stale = sorted(set(documented) - set(settings))

    assert not undocumented, f"settings missing from docs/settings.md: {undocumented}"
    assert not stale, f"docs/settings.md documents settings the code no longer reads: {stale}"


def test_documented_defaults_are_the_defaults_of_the_code():
    documented = documented_settings().settings

    wrong = {name: (documented[name], default) for name, default in code_settings().items()
             if default is not NOT_LITERAL and name in documented
             and _documented_default(documented[name]) != default}

    assert not wrong, f"docs/settings.md default (cell, code): {wrong}"


def test_the_variables_the_tests_read_are_in_the_test_suite_table():
    documented = documented_settings().test_variables
    variables = variables_the_tests_read()

    assert set(variables) == set(documented), "docs/settings.md, Test suite"
    assert all(_documented_default(documented[name]) == default for name, default in variables.items())


def test_every_quotecheck_name_in_the_docs_and_deployment_files_is_a_documented_one():
    names = documented_settings().names()

    unknown = {}
    for pattern in MENTIONING_FILES:
        for path in sorted(ROOT.glob(pattern)):
            mentions = {setting_of(m) for m in NAME_MENTION.findall(path.read_text(encoding="utf-8"))}
            if mentions - names:
                unknown[str(path.relative_to(ROOT))] = sorted(mentions - names)

    assert not unknown, f"QUOTECHECK_ names that docs/settings.md does not document: {unknown}"
