"""Evaluate a submission: validate it, gather each check's facts, let durable_rules decide, build the record."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from functools import cache, partial
from importlib import metadata
from typing import Any

import schemas
from rules.artifacts import artifact_problems
from rules.catalogue import Catalogue, load_catalogue
from rules.checks import CHECKS
from rules.checks.base import Check, Context, Facts, Stage, Words
from rules.engine import RuleEngine
from rules.errors import EngineError, InconsistentInput, InvalidSubmission, Problem
from rules.job.fp8_recipe import fp8_recipe_problems
from rules.job.inputs import Inputs
from rules.job.models import gpu_model_problems, model_name_problems, server_model_problems
from rules.job.plausibility import unit_problems
from rules.policy import Policy, default_policy
from rules.status import Status
from schemas.canonical_json import digest_of
from schemas.json_reader import (
    MAX_JSON_BYTES,
    MAX_LISTED_PROBLEMS,
    JsonError,
    JsonTooLarge,
    as_doubles,
    read_json,
    strings_numbers_and_tuples,
    unrepresentable_numbers,
)
from schemas.text import hidden_text_problems, holds_hidden_text

RECORD_VERSION = "1"
# Limit on a submission document read by the CLI or posted to the API, before any parsing.
MAX_SUBMISSION_BYTES = MAX_JSON_BYTES
# An over-limit document up to this size is still parsed (never evaluated) to name the fields that bloat it.
OVERSIZE_INSPECT_BYTES = 32 * 1024 * 1024

_engine: RuleEngine | None = None
_engine_lock = threading.Lock()


@cache
def engine_version() -> str:
    """Returns the installed quotecheck version (the record names the engine that decided it)."""
    try:
        return metadata.version("quotecheck")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def default_engine() -> RuleEngine:
    """Returns the process-wide engine holding the rules of every check of CHECKS (built once)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            _engine = RuleEngine(CHECKS)
    return _engine


def load_defaults() -> None:
    """Loads what every evaluation under the defaults reads: the engine, the default policy, the catalogue and
    the submission schema's validators (each built once per process; a server process loads them at start-up)."""
    default_engine()
    default_policy()
    load_catalogue()
    engine_version()
    schemas.validator("submission")
    schemas.fast_validator("submission")
    schemas.count_limits("submission")


def parse_submission(raw: bytes | str, origin: str = "submission") -> dict[str, Any]:
    """Returns the submission in ``raw`` after checking it as JSON (schemas.json_reader, as the API reads a
    body: size, UTF-8, depth, unique member names, no U+0000 or lone surrogate, exact numbers) and its schema.

    The schema's count limits are checked first, on a plain parse (``check_counts``), so a document of 1,024
    node groups is refused before it is read with care. Raises InvalidSubmission with one Problem per
    violation, located by JSON Pointer.
    """
    try:
        document = read_json(raw, origin, max_bytes=MAX_SUBMISSION_BYTES, precheck=partial(check_counts, origin=origin))
    except JsonTooLarge as error:
        raise InvalidSubmission(error.detail, _oversize_problems(raw)) from None
    except JsonError as error:
        raise InvalidSubmission(error.detail, error.problems) from None
    validate_submission(document, origin, counted=True)
    return document


def _oversize_problems(raw: bytes | str) -> list[Problem]:
    """Returns the schema problems of an over-limit document that is still small enough to inspect.

    An oversized submission is refused either way; locating the field that made it so (usually one long
    text, or a list beyond its count limit) tells the user what to cut. Beyond OVERSIZE_INSPECT_BYTES the
    document is not parsed at all.
    """
    try:
        document = read_json(raw, max_bytes=OVERSIZE_INSPECT_BYTES, precheck=check_counts)
    except InvalidSubmission as beyond:
        return beyond.problems
    except JsonError:
        return []
    return schemas.validate("submission", document, at_most=MAX_LISTED_PROBLEMS)


def check_counts(document: Any, origin: str = "submission") -> None:
    """Raises InvalidSubmission for the arrays and objects of ``document`` beyond the submission schema's count
    limits (maxItems, maxProperties); cheap, since what those lists hold is not looked at (schemas/limits.py)."""
    beyond = schemas.count_problems("submission", document)
    if beyond:
        raise InvalidSubmission(f"{origin} does not satisfy the submission schema's count limits "
                                f"({_counted(beyond, True)}); what those lists hold is validated once they are "
                                "within them", beyond[:MAX_LISTED_PROBLEMS])


def _counted(problems: list[Problem], complete: bool) -> str:
    """Returns how many problems there are, and how many of them are listed (MAX_LISTED_PROBLEMS at most)."""
    if not complete:
        return f"more than {MAX_LISTED_PROBLEMS} problems; the first {MAX_LISTED_PROBLEMS} found are listed"
    if len(problems) > MAX_LISTED_PROBLEMS:
        return f"{len(problems):,} problems; the first {MAX_LISTED_PROBLEMS} are listed"
    return f"{len(problems)} problem" + ("" if len(problems) == 1 else "s")


def validate_submission(document: Any, origin: str = "submission", *, counted: bool = False) -> None:
    """Raises InvalidSubmission listing the schema problems of ``document``; returns None when valid.

    The schema's count limits are checked first (``check_counts``; ``counted``: the caller has), so a
    document beyond them is refused for those alone. Validation stops after MAX_LISTED_PROBLEMS + 1
    problems, so a refusal costs little whatever the document holds; the detail says when more are not
    listed. Text that holds invisible or reordering characters (schemas/text.py) is refused with the schema
    problems; a raw diagnostic in ``measurements`` that its parser cannot read (rules/artifacts.py) once the
    schema holds, and then a model that only a name the model catalogue lacks describes (rules/job/models.py) and
    the other catalogue refusals (``_catalogue_problems``).
    """
    if not counted:
        check_counts(document, origin)
    # One walk of the document; the pointers are built only for what it finds.
    texts, odd_numbers, tuples = strings_numbers_and_tuples(document)
    problems = schemas.validate("submission", document, at_most=MAX_LISTED_PROBLEMS + 1, holds_tuple=tuples)
    complete = len(problems) <= MAX_LISTED_PROBLEMS
    problems = (problems + (hidden_text_problems(document) if complete and holds_hidden_text(texts) else [])
                or (unrepresentable_numbers(document) if odd_numbers else []) or artifact_problems(document)
                or _catalogue_problems(document))
    if problems:
        raise InvalidSubmission(f"{origin} does not satisfy the submission schema ({_counted(problems, complete)})",
                                problems[:MAX_LISTED_PROBLEMS])


def _catalogue_problems(document: dict[str, Any]) -> list[Problem]:
    """Returns what the catalogue refuses in a valid document: a model only an unknown name describes, a GPU only an
    unknown id describes, GPUs only an unknown server id describes, a figure in the wrong unit, an fp8 recipe the
    precision or the GPU cannot run (rules/job/models.py, rules/job/plausibility.py, rules/job/fp8_recipe.py)."""
    catalogue = load_catalogue()
    return (model_name_problems(document, catalogue) or gpu_model_problems(document, catalogue)
            or server_model_problems(document, catalogue) or unit_problems(document, catalogue)
            or fp8_recipe_problems(document, catalogue))


def submission_digest(document: dict[str, Any]) -> str:
    """Returns ``sha256:<hex>`` of the RFC 8785 canonical form of a submission."""
    return digest_of(document)


def evaluate(submission: dict[str, Any], policy: Policy | None = None, *,
             catalogue: Catalogue | None = None, engine: RuleEngine | None = None,
             now: datetime | None = None, validated: bool = False) -> dict[str, Any]:
    """Returns the evaluation record (schemas/record.schema.json) of a submission under a policy.

    InvalidSubmission unless the submission is valid; ``validated``: the caller has just checked it with
    ``validate_submission`` (the API's declared body does), so it is not checked twice.
    """
    if not validated:
        validate_submission(submission)
    policy = policy or default_policy()
    engine = engine or default_engine()
    inputs = Inputs(submission, catalogue or load_catalogue(), policy)
    shared: dict[Any, Any] = {}  # fact function (or Job) → its value, shared by the checks
    by_id: dict[str, tuple[type[Check], Facts, dict[str, Any], Context]] = {}
    missing: dict[str, list[str]] = {}
    for check in sorted(engine.checks, key=lambda c: c.gathers_last):
        ctx = Context(inputs, policy, shared, check)
        ctx.peer_missing = missing
        try:
            facts = check().gather(ctx)
            facts = Facts(_representable(facts.evidence), facts.basis, facts.stage, facts.reason, facts.unjudged)
        except InconsistentInput as error:
            # Estimators validate their arguments; a refusal means the submission contradicts itself
            # (e.g. a layout whose GPU count does not divide), which the schema alone cannot express.
            facts = Facts(stage=Stage.INCONSISTENT, reason=str(error))
        except ValueError as error:  # not a refusal: a defect in the check or an estimator
            raise EngineError(f"gathering the facts of {check.id} failed: {error!r}") from error
        except OverflowError as error:
            # Inputs of absurd magnitude (10^300 layers) overflow the arithmetic: refused the same way.
            facts = Facts(stage=Stage.INCONSISTENT, reason=f"a figure derived from the inputs overflows ({error}); "
                                                           "check the magnitudes of the inputs")
        if facts.stage is Stage.DECIDE and ctx.missing:
            facts = ctx.insufficient(facts.reason, **facts.evidence)
        if facts.stage is Stage.INSUFFICIENT_DATA:
            missing[check.id] = list(ctx.missing)
        thresholds = {name: policy.value(path) for name, path in check.thresholds.items()}
        by_id[check.id] = (check, facts, thresholds, ctx)
    gathered = [by_id[check.id] for check in engine.checks]
    decided = engine.decide((check, facts, thresholds) for check, facts, thresholds, _ in gathered)
    results = [_result(check, facts, thresholds, ctx, *decided[check.id]) for check, facts, thresholds, ctx in gathered]
    return _record(submission, policy, inputs, results, now or datetime.now(UTC))


def _representable(value: Any, name: str = "evidence") -> Any:
    """Returns evidence with integers beyond ±(2^53 - 1) as floats; InconsistentInput for a number JSON cannot carry.

    Huge inputs (a node count of 10^20) give huge derived integers, which RFC 8785 cannot canonicalise,
    or infinities, which no JSON can hold.
    """
    return as_doubles(value, name, InconsistentInput, "; check the magnitudes of the inputs it derives from")


def _result(check: type[Check], facts: Facts, thresholds: dict[str, Any], ctx: Context,
            status: Status, rule_name: str) -> dict[str, Any]:
    # The record's evidence is the facts' own: ``evaluate`` built this dict (_representable's copy, or the Facts of
    # a refusal), so the inputs read are appended to it, once the words are filled from the evidence alone.
    evidence = facts.evidence
    if facts.stage is Stage.DECIDE:
        rule = check.outcome(rule_name)
        values = _Evidence(facts.evidence)
        values.update(thresholds)
        message = _render(rule.message, values, check.id, rule_name)
        remediation = _render(rule.remediation, values, check.id, rule_name)
    elif facts.stage is Stage.INSUFFICIENT_DATA:
        needed = ", ".join(ctx.missing) or "an input"
        message = f"needs {needed}" + (f": {facts.reason}" if facts.reason else "")
        remediation = check.insufficient_remediation
    elif facts.stage is Stage.INCONSISTENT:
        message = f"the inputs contradict each other: {facts.reason}"
        remediation = "Correct the inputs named in the message so that they describe one realisable configuration."
    else:
        message, remediation = facts.reason, ""
    evidence["inputs"] = ctx.reader.pointers
    if facts.stage is Stage.INSUFFICIENT_DATA:
        evidence["missing"] = list(ctx.missing)
    return {
        "id": check.id,
        "title": check.title,
        "plan_item": check.plan_item,
        "status": status._value_,  # .value itself, read without the enum property's call
        "basis": facts.basis._value_,
        "rule": rule_name,
        "evidence": evidence,
        "thresholds": thresholds,
        "assumptions": ctx.reader.assumptions(),
        "message": message,
        "remediation": remediation,
    }


# The statuses a record's summary counts, in Status's order (a waiver is recorded after the evaluation).
_SUMMARISED = tuple(status.value for status in Status if status is not Status.WAIVED)


class _Evidence(dict):
    def __missing__(self, key: str) -> Any:
        raise KeyError(key)


def _render(template: Words, values: _Evidence, check_id: str, rule_name: str) -> str:
    """Returns ``template`` filled from the evidence (or called on a copy of it); EngineError names a field it
    needs."""
    try:
        if callable(template):
            return template(_Evidence(values))
        return template.format_map(values)
    except (KeyError, ValueError, TypeError) as error:
        raise EngineError(f"message of rule {rule_name} of {check_id} cannot be filled: {error!r}") from None


def verdict_of(statuses: list[str]) -> str:
    """Returns the overall verdict: fail | incomplete | warn | pass.

    Fails closed: an empty plan, or one in which no check was decided (all not-applicable or lacking
    data), is a failure, never a pass.
    """
    decided = [s for s in statuses if s not in (Status.NOT_APPLICABLE, Status.INSUFFICIENT_DATA)]
    if Status.FAIL in statuses or not decided:
        return "fail"
    if Status.INSUFFICIENT_DATA in statuses:
        return "incomplete"
    if Status.WARN in statuses:
        return "warn"
    return "pass"


def _record(submission: dict[str, Any], policy: Policy, inputs: Inputs, results: list[dict[str, Any]],
            now: datetime) -> dict[str, Any]:
    statuses = [r["status"] for r in results]
    quote = submission.get("quote", {})
    return {
        "record_version": RECORD_VERSION,
        "engine": {"name": "quotecheck", "version": engine_version(), "catalogue": inputs.catalogue.version},
        "evaluated_at": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "submission": {"digest": submission_digest(submission), "schema_version": submission["schema_version"],
                       "vendor": quote.get("vendor"), "quote_id": quote.get("quote_id"),
                       # free text the record shows literally (escaped) on its cover
                       **({"notes": quote["notes"]} if "notes" in quote else {})},
        "policy": {**policy.identity(), "conventions": policy.document["conventions"]},
        "verdict": verdict_of(statuses),
        "summary": {status: statuses.count(status) for status in _SUMMARISED},
        "checks": results,
        "inputs": inputs.provenance(),
        "catalogue_fills": [q.as_dict() for q in inputs.fills],
        "default_fills": [q.as_dict() for q in inputs.default_fills],
        "waivers": [],
        "decisions": [],
        "purchase_orders": [],
    }
