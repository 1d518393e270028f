"""An evaluation as JUnit XML: one test suite, one test case per check, as CI dashboards read test results.

A check's status becomes what a JUnit reader counts (docs/exports.md): ``fail`` a ``<failure>``;
``insufficient-data`` an ``<error>`` (the check could not reach a decision for want of inputs, which blocks
approval as a failure does, but is not one); ``not-applicable`` and a waived result ``<skipped>``;
``pass`` and ``warn`` pass, a warning with its words in ``<system-out>``.
"""

from __future__ import annotations

import re
from typing import Any
from xml.etree import ElementTree

from service.exports.model import Export, effective_status, headline

SUITE_NAME = "quotecheck"
# Characters XML 1.0 cannot hold at all (C0 controls but tab, newline and carriage return; lone surrogates;
# U+FFFE and U+FFFF): a message is shown with U+FFFD in their place rather than written as broken XML.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: Any) -> str:
    return _NOT_XML.sub("\ufffd", "" if value is None else str(value))


def _details(check: dict[str, Any]) -> str:
    """Returns the body of a failure, error or output: deciding figure, remediation and the inputs read."""
    evidence = check.get("evidence") or {}
    lines = [f"{check['id']} ({check.get('title') or ''}): {check['status']} by rule {check.get('rule')}, "
             f"{check.get('basis')}", f"deciding figure: {headline(check)}"]
    if check.get("remediation"):
        lines.append(f"remediation: {check['remediation']}")
    if evidence.get("missing"):
        lines.append("missing inputs: " + ", ".join(evidence["missing"]))
    if evidence.get("inputs"):
        lines.append("inputs: " + ", ".join(evidence["inputs"]))
    return "\n".join(lines)


def _testcase(suite: ElementTree.Element, check: dict[str, Any]) -> str:
    """Adds the test case of ``check`` to ``suite``; returns what it counts as (passed, failure, error, skipped)."""
    case = ElementTree.SubElement(suite, "testcase", name=_text(check["id"]), classname=SUITE_NAME, time="0")
    message = _text(check.get("message") or check["status"])
    status, after_waivers = check["status"], effective_status(check)
    if after_waivers == "waived":
        waiver = check.get("waiver") or {}
        reason = f"waived ({status}): {waiver.get('justification') or 'a valid waiver covers the result'}"
        if waiver.get("author"):
            reason += f" (by {waiver['author']}" + (f", expires {waiver['expires']})" if waiver.get("expires")
                                                     else ")")
        ElementTree.SubElement(case, "skipped", message=_text(reason))
        counted = "skipped"
    elif status == "fail":
        element = ElementTree.SubElement(case, "failure", message=message, type=_text(check.get("rule")))
        element.text = _text(_details(check))
        counted = "failure"
    elif status == "insufficient-data":
        element = ElementTree.SubElement(case, "error", message=message, type="insufficient-data")
        element.text = _text(_details(check))
        counted = "error"
    elif status == "not-applicable":
        ElementTree.SubElement(case, "skipped", message=message)
        counted = "skipped"
    else:
        # pass and warn pass; what they say (a warning's words above all) goes to the case's output.
        output = ElementTree.SubElement(case, "system-out")
        output.text = _text(f"{status.upper()}: {check.get('message') or ''}\n{_details(check)}")
        counted = "passed"
    return counted


def junit_tree(export: Export) -> ElementTree.Element:
    """Returns the ``<testsuites>`` element holding the one suite of ``export``."""
    record = export.record
    quote = record.get("submission") or {}
    named = " ".join(str(part) for part in (quote.get("vendor"), quote.get("quote_id")) if part)
    root = ElementTree.Element("testsuites", name=SUITE_NAME)
    suite = ElementTree.SubElement(root, "testsuite", name=_text(f"{SUITE_NAME}: {named}" if named else SUITE_NAME))
    properties = ElementTree.SubElement(suite, "properties")
    policy = record.get("policy") or {}
    facts = {"verdict": export.verdict, "verdict_after_waivers": export.verdict_after_waivers,
             "policy": f"{policy.get('id')} {policy.get('version')}", "policy_digest": policy.get("digest"),
             "submission_digest": quote.get("digest"), "submission": export.artifact.uri,
             **{f"submission_{k}": v for k, v in export.subject.items()}}
    for name, value in facts.items():
        if value is not None:
            ElementTree.SubElement(properties, "property", name=name, value=_text(value))
    counts = {"passed": 0, "failure": 0, "error": 0, "skipped": 0}
    for check in export.checks:
        counts[_testcase(suite, check)] += 1
    totals = {"tests": str(len(export.checks)), "failures": str(counts["failure"]), "errors": str(counts["error"]),
              "skipped": str(counts["skipped"]), "time": "0"}
    for element in (root, suite):
        for name, value in totals.items():
            if element is suite or name != "skipped":  # <testsuites> counts no skipped in the common schema
                element.set(name, value)
    if record.get("evaluated_at"):
        # The Ant/Jenkins schema's timestamp is an ISO 8601 date and time without a zone (UTC here).
        suite.set("timestamp", str(record["evaluated_at"]).rstrip("Z").split("+")[0])
    return root


def render(export: Export) -> str:
    """Returns the JUnit XML of ``export`` (UTF-8, with its declaration)."""
    root = junit_tree(export)
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
