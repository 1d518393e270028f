"""An evaluation as a SARIF 2.1.0 log: one run, one result per check, located by JSON Pointer in the submission.

SARIF has no field for a JSON Pointer; the specification's own example of a JSON document (§3.33.7,
logicalLocation ``kind``) names locations in JSON by pointer in ``fullyQualifiedName``, with the kinds
``object``, ``array``, ``property`` and ``value``, which is what this log does. Each location also has a
physical location in the submission file, with the line and column region of the pointer's member when
the file's text is known (the command line reads it). docs/exports.md gives the mapping of statuses.
"""

from __future__ import annotations

import json
from typing import Any

from rules.checks import CHECKS
from rules.checks.base import Check, Exemption, Passing, Rule
from rules.evaluate import engine_version
from service.exports.model import Export, effective_status, headline
from service.exports.positions import Positions, nearest_present, resolve, unescape_token

SARIF_VERSION = "2.1.0"
# The OASIS standard's schema (errata 01), which tests/data/sarif holds a copy of.
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
TOOL_NAME = "quotecheck"

# A check status as SARIF's (kind, level): kind ``fail`` carries the severity in ``level``; any other kind
# has level ``none`` (SARIF §3.27.10). insufficient-data is ``open``: "the tool concluded that there was
# insufficient information to decide whether a problem exists" (§3.27.9).
STATUS_KIND_LEVEL = {
    "fail": ("fail", "error"),
    "warn": ("fail", "warning"),
    "pass": ("pass", "none"),
    "insufficient-data": ("open", "none"),
    "not-applicable": ("notApplicable", "none"),
}
_RULE_LEVEL = {"fail": "error", "warn": "warning"}
_CHECKS: dict[str, type[Check]] = {check.id: check for check in CHECKS}


def rule_id(check: dict[str, Any]) -> str:
    """Returns the SARIF rule id: ``<check id>/<rule name>`` (``peak-memory/exceeds-usable-memory``)."""
    return f"{check['id']}/{check['rule']}"


def _outcome(check: dict[str, Any]) -> Rule | Exemption | Passing | None:
    declared = _CHECKS.get(check["id"])
    if declared is None:
        return None
    try:
        return declared.outcome(check["rule"])
    except KeyError:  # the engine's own outcomes: insufficient-data, not-applicable, inconsistent inputs
        return None


def _descriptor(check: dict[str, Any]) -> dict[str, Any]:
    """Returns the reportingDescriptor of the rule that decided ``check``."""
    outcome = _outcome(check)
    concludes = outcome.status.value if outcome is not None else check["status"]
    title = check.get("title") or check["id"]
    declared = _CHECKS.get(check["id"])
    descriptor: dict[str, Any] = {
        "id": rule_id(check),
        "name": check["rule"],
        "shortDescription": {"text": f"{title}: {check['rule'].replace('-', ' ')}"},
        "defaultConfiguration": {"level": _RULE_LEVEL.get(concludes, "none")},
        "properties": {"check_id": check["id"], "concludes": concludes, "tags": [TOOL_NAME, check["id"]]},
    }
    plan_item = check.get("plan_item")
    if plan_item:
        source = f" of “{declared.plan_source}”" if declared is not None else ""
        descriptor["fullDescription"] = {"text": f"{title}: implements “{plan_item}”{source}."}
    return descriptor


def _kind(value: Any, parent: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return "value" if isinstance(parent, list) else "property"


def _pointers(check: dict[str, Any]) -> list[str]:
    """Returns the pointers a result is located at: the missing inputs first, then every input the check read."""
    evidence = check.get("evidence") or {}
    pointers = [*(evidence.get("missing") or []), *(evidence.get("inputs") or [])]
    return list(dict.fromkeys(p for p in pointers if isinstance(p, str)))


def _location(export: Export, positions: Positions | None, pointer: str, values: dict[str, dict[str, Any]],
              filled: set[str]) -> dict[str, Any]:
    """Returns the location of one input: its member in the file, its pointer, and the value the check used."""
    document = export.artifact.document
    present, value = resolve(document, pointer)
    parent_present, parent = resolve(document, pointer.rpartition("/")[0]) if pointer else (False, None)
    physical: dict[str, Any] = {"artifactLocation": {"uri": export.artifact.uri, "index": 0}}
    if positions is not None:
        region = positions.region(nearest_present(pointer, positions))
        if region is not None:
            physical["region"] = region.as_sarif()
    logical: dict[str, Any] = {"fullyQualifiedName": pointer, "kind": _kind(value, parent) if present else (
        "value" if parent_present and isinstance(parent, list) else "property")}
    if pointer:
        logical["name"] = unescape_token(pointer.rpartition("/")[2])
    location: dict[str, Any] = {"physicalLocation": physical, "logicalLocations": [logical]}
    known = values.get(pointer)
    value_words = (f"{json.dumps(known.get('value'), ensure_ascii=False)} ({known.get('source', 'assumption')})"
                   if known is not None else None)
    if present:
        text = f"{pointer} = {value_words}" if value_words else None
    elif known is not None and pointer in filled:
        text = f"{pointer} is not in the submission; the catalogue fills it: {value_words}"
    elif known is not None and known.get("source") == "default":
        text = f"{pointer} is not in the submission; the policy's cited default fills it: {value_words}"
    elif known is not None:
        text = f"{pointer} is not in the submission; the check assumed {value_words}"
    else:
        text = f"{pointer} is not in the submission"
    if text:
        location["message"] = {"text": text}
    return location


def _input_values(record: dict[str, Any], check: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Returns the value and source of each input the check used, by pointer (the record's inputs, its fills)."""
    entries = [*(record.get("inputs") or []), *(record.get("catalogue_fills") or []),
               *(record.get("default_fills") or []), *(check.get("assumptions") or [])]
    return {entry["pointer"]: entry for entry in entries if isinstance(entry, dict) and "pointer" in entry}


def _result(export: Export, check: dict[str, Any], rule_index: int, positions: Positions | None) -> dict[str, Any]:
    status = check.get("original_status") or check["status"]
    kind, level = STATUS_KIND_LEVEL.get(status, ("fail", "warning"))
    values = _input_values(export.record, check)
    filled = {entry.get("pointer") for entry in export.record.get("catalogue_fills") or [] if isinstance(entry, dict)}
    pointers = _pointers(check) or [""]
    properties: dict[str, Any] = {
        "check_id": check["id"], "title": check.get("title"), "status": check["status"],
        "effective_status": effective_status(check), "basis": check.get("basis"),
        "deciding_figure": headline(check), "remediation": check.get("remediation") or "",
        "evidence": check.get("evidence") or {}, "thresholds": check.get("thresholds") or {},
    }
    if check.get("digest"):
        properties["result_digest"] = check["digest"]
    result: dict[str, Any] = {
        "ruleId": rule_id(check), "ruleIndex": rule_index, "kind": kind, "level": level,
        "message": {"text": check.get("message") or check["status"]},
        "locations": [_location(export, positions, pointer, values, filled) for pointer in pointers],
        "properties": properties,
    }
    waiver = check.get("waiver")
    if effective_status(check) == "waived" and isinstance(waiver, dict):
        # A valid waiver is a suppression kept outside the submission (SARIF §3.35): accepted, with its reason.
        result["suppressions"] = [{"kind": "external", "status": "accepted",
                                   "justification": waiver.get("justification") or "",
                                   "properties": {k: waiver.get(k) for k in ("id", "author", "expires", "created_at")}}]
    return result


def sarif_log(export: Export) -> dict[str, Any]:
    """Returns the SARIF 2.1.0 log of ``export``: one run whose driver lists the rules its results name."""
    record, artifact = export.record, export.artifact
    positions = Positions(artifact.text) if artifact.text is not None else None
    descriptors: dict[str, dict[str, Any]] = {}
    for check in export.checks:
        descriptors.setdefault(rule_id(check), _descriptor(check))
    index = {rule: position for position, rule in enumerate(descriptors)}
    results = [_result(export, check, index[rule_id(check)], positions) for check in export.checks]
    described: dict[str, Any] = {"location": {"uri": artifact.uri}, "mimeType": "application/json"}
    if artifact.sha256:
        described["hashes"] = {"sha-256": artifact.sha256}
    if artifact.description:
        described["description"] = {"text": artifact.description}
    engine = record.get("engine") or {}
    invocation: dict[str, Any] = {"executionSuccessful": True}
    if record.get("evaluated_at"):
        invocation["endTimeUtc"] = record["evaluated_at"]
    properties: dict[str, Any] = {
        "verdict": export.verdict, "summary": record.get("summary") or {},
        "policy": {k: (record.get("policy") or {}).get(k) for k in ("id", "version", "digest")},
        "submission_digest": (record.get("submission") or {}).get("digest"),
    }
    if export.verdict_after_waivers is not None:
        properties["verdict_after_waivers"] = export.verdict_after_waivers
    if export.subject:
        properties["submission"] = export.subject
    run = {
        "tool": {"driver": {"name": TOOL_NAME, "version": engine.get("version") or engine_version(),
                            "rules": list(descriptors.values())}},
        "invocations": [invocation],
        "artifacts": [described],
        # Columns count Unicode code points, as Python indexes text (SARIF's default counts UTF-16 code units).
        "columnKind": "unicodeCodePoints",
        "results": results,
        "properties": properties,
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def render(export: Export) -> str:
    """Returns the SARIF log of ``export`` as JSON text."""
    return json.dumps(sarif_log(export), indent=2, ensure_ascii=False)
