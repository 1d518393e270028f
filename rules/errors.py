"""The one error hierarchy of quotecheck: each error says what went wrong and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.problem import Problem

__all__ = ["EngineError", "InvalidPolicy", "InvalidSubmission", "Problem", "QuotecheckError"]


@dataclass
class QuotecheckError(Exception):
    """Base class. ``title`` is stable per class; ``detail`` is specific to this occurrence.

    ``type_slug`` names the kind of error (the API's problem type is a URI ending in it). No error carries
    an HTTP status: the HTTP layer maps error classes to status codes (service/errors.py).
    """

    detail: str
    problems: list[Problem] = field(default_factory=list)

    title = "quotecheck error"
    type_slug = "error"

    def __str__(self) -> str:
        lines = [self.detail]
        lines += [f"  {p.pointer or '/'}: {p.message}" for p in self.problems]
        return "\n".join(lines)


class InvalidSubmission(QuotecheckError):
    """The submission does not parse or does not satisfy its schema; nothing was evaluated or stored."""

    title = "Invalid submission"
    type_slug = "invalid-submission"


class InvalidPolicy(QuotecheckError):
    """A policy file does not satisfy the policy schema."""

    title = "Invalid policy"
    type_slug = "invalid-policy"


class EngineError(QuotecheckError):
    """The rules engine could not decide a check (a rule raised, none matched, or several did)."""

    title = "Rules engine error"
    type_slug = "engine-error"


class InconsistentInput(ValueError):
    """An estimator refused its arguments: inputs the schema admits describe no realisable configuration.

    Raised by the estimators (rules/estimates) for values outside their domain (a negative size, a GPU count
    that does not divide by the tensor-parallel degree, a trainable count above the parameter count). It
    never leaves an evaluation: ``rules.evaluate`` turns it into the check's ``inconsistent`` failure, with
    its message as the reason. Any other ValueError raised while gathering facts is a defect of quotecheck
    and is reported as an EngineError. A ValueError subclass, so that callers who only need to know that an
    argument was refused can keep catching ValueError.
    """
