"""The acceptance policy: thresholds and conventions as data, validated by schemas/policy.schema.json."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import schemas
from rules.errors import InvalidPolicy, Problem

DEFAULT_POLICY_RESOURCE = "data/policy.default.json"
# Settings that held a default before the policy's ``defaults`` section did, and the member of the training workload
# each fills: read as an uncited default from a policy that still has the old key and no default of its own for the
# member (a policy copied before the section existed keeps working as it did).
SUPERSEDED_DEFAULTS = {"restart.default_restart_min": ("reliability", "restart_min"),
                       "data_feed.tokens_per_s_per_core": ("data", "tokens_per_s_per_core")}


@dataclass(frozen=True)
class CitedDefault:
    """A value the policy gives for a member of the training workload a first quote rarely states, with its source.

    ``member`` is the member's path below the training workload (``("reliability", "node_mtbf_h")``), ``setting`` the
    dotted policy path it is read from. ``narrow`` is (vocabulary, value): the value for a model whose vocabulary is
    below that size (the token id dtype of bytes_per_token), or None.
    """

    member: tuple[str, ...]
    value: float
    source: str
    setting: str
    narrow: tuple[int, float] | None = None


@dataclass(frozen=True)
class Policy:
    """A validated policy document with its identity (id, version, sha256 of the bytes it was read from)."""

    document: dict[str, Any]
    sha256: str
    origin: str
    # Dotted path → value, as ``value`` found it: an evaluation reads some 70 policy values, most of them several
    # times. The document is never changed once read (``sha256`` names the bytes it was read from).
    _values: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def policy_id(self) -> str:
        return self.document["policy_id"]

    @property
    def version(self) -> str:
        return self.document["policy_version"]

    def value(self, path: str) -> Any:
        """Returns the value at a dotted path such as ``memory.headroom_fraction``; KeyError names the path."""
        try:
            return self._values[path]
        except KeyError:
            found = self._values[path] = self._look_up(path)
            return found

    def _look_up(self, path: str) -> Any:
        node: Any = self.document
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                raise KeyError(f"policy {self.policy_id} has no value at {path!r}")
            node = node[part]
        return node

    @cached_property
    def cited_defaults(self) -> tuple[CitedDefault, ...]:
        """Returns the defaults this policy gives for the training workload, in the policy's order: those of its
        ``defaults`` section, then a superseded setting's (SUPERSEDED_DEFAULTS) for a member the section leaves out."""
        training = self.document.get("defaults", {}).get("training", {})
        cited = [CitedDefault((section, member), given["value"], given["source"],
                              f"defaults.training.{section}.{member}", _narrow(given))
                 for section, members in training.items() for member, given in members.items()]
        given = {default.member for default in cited}
        for setting, member in SUPERSEDED_DEFAULTS.items():
            try:
                value = self.value(setting)
            except KeyError:
                continue
            if member not in given:
                cited.append(CitedDefault(member, value, f"policy {setting} (superseded by "
                                          f"defaults.training.{'.'.join(member)}; no citation given)", setting))
        return tuple(cited)

    def identity(self) -> dict[str, str]:
        return {"id": self.policy_id, "version": self.version, "digest": f"sha256:{self.sha256}",
                "origin": self.origin}


def _narrow(given: dict[str, Any]) -> tuple[int, float] | None:
    narrow = given.get("when_vocab_below")
    return None if narrow is None else (narrow["vocab"], narrow["value"])


def parse_policy(raw: bytes, origin: str) -> Policy:
    """Returns the Policy in ``raw`` (JSON bytes); InvalidPolicy lists every problem by JSON Pointer."""
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidPolicy(f"{origin} is not valid JSON: {error}") from None
    problems = schemas.validate("policy", document)
    if problems:
        raise InvalidPolicy(f"{origin} does not satisfy the policy schema", problems)
    return Policy(document=document, sha256=hashlib.sha256(raw).hexdigest(), origin=origin)


def load_policy(path: str | Path | None = None) -> Policy:
    """Returns the policy at ``path``, or the bundled default policy when ``path`` is None."""
    if path is None:
        raw = resources.files("rules").joinpath(DEFAULT_POLICY_RESOURCE).read_bytes()
        return parse_policy(raw, origin="bundled:" + DEFAULT_POLICY_RESOURCE)
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise InvalidPolicy(f"cannot read policy file {path}: {error.strerror}",
                            [Problem("", "pass a readable JSON file to --policy")]) from None
    return parse_policy(raw, origin=str(path))


_DEFAULT: Policy | None = None


def default_policy() -> Policy:
    """Returns the bundled default policy, parsed once per process."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_policy()
    return _DEFAULT
