"""The small result vocabulary of an acceptance check."""

from enum import StrEnum


class Status(StrEnum):
    PASS = "pass"  # the quote meets the requirement with the policy's margin
    WARN = "warn"  # it meets it, but a margin or a rule of thumb says look again
    FAIL = "fail"  # it does not meet the requirement
    INSUFFICIENT_DATA = "insufficient-data"  # an input the check needs is missing
    NOT_APPLICABLE = "not-applicable"  # the workload does not exercise this check (e.g. no training)
    WAIVED = "waived"  # set by the approval workflow only, never by a check


class Basis(StrEnum):
    MEASURED = "measured"  # a measurement in the submission decided the check
    ESTIMATED = "estimated"  # arithmetic from the quote, the catalogue and assumptions decided it


class Source(StrEnum):
    ASSUMPTION = "assumption"  # a bare number, or one the submission says is assumed
    MEASUREMENT = "measurement"
    VENDOR_LIMIT = "vendor_limit"  # the vendor's figure; the catalogue's for what it fills in
    FACILITY_DESIGN = "facility_design"
    DEFAULT = "default"  # the policy's cited default for a member the submission leaves out (never submitted)


class FigureFrom:
    """Where a figure of a check's evidence came from, as its ``*_from`` and ``*_basis`` members name it.

    The checks write these names and rules/advice/as_built.py and the remedies read them (plain strings, so the
    records hold the same text), so that rewording a check's message changes neither what as-built compares nor
    a remedy.
    """

    QUOTED = "quoted"
    MEASURED = "measured"
    NAMEPLATE_MAXIMUM = "nameplate maximum"
    MEASURED_SUSTAINED_DRAW = "measured sustained draw"
    TYPICAL_SUSTAINED_SHARE = "typical sustained share of nameplate"  # policy cost.sustained_power_fraction
    RESTORE_TEST = "restore test"
    SUBMISSION = "submission"
    POLICY_DEFAULT = "policy default"
