"""training-objective: the training run is defined well enough to size hardware for it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rules.checks.base import Check, Context, Facts, Passing, Rule
from rules.checks.facts.model import architecture_words, counted_architecture
from rules.estimates.model.parameters import active_parameters, parameter_mismatch_fraction, transformer_parameters
from rules.job.given import Given
from rules.job.workload import Training
from rules.status import Status


def plan_inputs(training: Training) -> list[Given[Any]]:
    """Returns the inputs the plan item asks a training run to document, in order.

    The plan item asks to "document the model, trainable parameter set, optimizer, sequence length, global batch
    and desired completion window"; the objective itself decides which of those apply.
    """
    return [training.objective, training.model.parameters, training.optimizer, training.precision,
            training.sequence_length, training.global_batch, training.completion_window_days]


def _defined(e: Mapping[str, Any]) -> str:
    """Returns the run as defined: objective, model, parameters (and, of a mixture of experts, those active per
    token), optimizer, precision, sequence, batch and window."""
    active = (f", {e['active_parameters']:,.0f} active per token" if e.get("active_parameters") is not None else "")
    return (f"{e['objective']} of {e['model_name']} ({e['parameters']:,.0f} parameters{active}, "
            f"{e['trainable_parameters']:,.0f} trainable) with {e['optimizer']} in {e['precision']}, sequence "
            f"{e['sequence_length']}, global batch {e['global_batch']}, within {e['completion_window_days']} days")


class TrainingObjective(Check):
    id = "training-objective"
    title = "Define the training objective"
    plan_item = "Define the training objective"
    headline = "{defined_count}/{required_count} plan inputs; {checks_lacking_inputs} checks lack inputs"
    thresholds = {"max_parameter_mismatch_fraction": "training_objective.max_parameter_mismatch_fraction"}
    gathers_last = True
    rules = (
        Rule(Status.FAIL, "objective-undefined", lambda m: m.missing_count > 0,
             "the training objective is not fully defined; missing: {missing_list}",
             "State {missing_list} in /workload/training: the memory, throughput and schedule checks "
             "rest on them."),
        # Declared before the other warning: a count that contradicts the architecture misstates every
        # model-state figure, which matters more than checks waiting for inputs.
        Rule(Status.WARN, "parameters-disagree-with-architecture",
             lambda m: m.parameter_mismatch_fraction > m.max_parameter_mismatch_fraction,
             "parameters {parameters:,.0f} given, but the architecture ({architecture}) has "
             "{parameters_from_architecture:,.0f}: {parameter_mismatch_fraction:.1%} apart, more than the "
             "{max_parameter_mismatch_fraction:.0%} the policy tolerates",
             "Correct /workload/training/model/parameters or the architecture: the model state (from the "
             "parameters) and the activations and gathered layers (from the architecture) must describe one model."),
        Rule(Status.WARN, "other-checks-lack-inputs", lambda m: m.checks_lacking_inputs > 0,
             lambda e: f"{_defined(e)}; but {e['checks_lacking_inputs']} checks still lack inputs: {e['lacking_list']}",
             "Add the inputs listed for each check; until then those checks cannot pass."),
    )
    passing = Passing("objective-defined", lambda e: f"{_defined(e)}; no check lacks an input")

    def gather(self, ctx: Context) -> Facts:
        if not ctx.job.trains:
            return ctx.not_applicable("the submission has no training workload")
        training = ctx.job.training
        required = plan_inputs(training)
        if ctx.value(training.objective) == "adapter":
            # An adapter run trains a small parameter set; without it optimizer state cannot be sized.
            required.append(training.model.trainable_parameters)
        # Stated, not filled by a default (trainable_parameters defaults to parameters).
        missing = [given.pointer for given in required if ctx.value(given) is None or not given.stated]
        lacking = {check: pointers for check, pointers in ctx.peer_missing.items() if pointers}
        parameters = _shown(ctx, training.model.parameters, 0)
        counted, unjudged = _parameter_count(ctx)
        return Facts(unjudged=unjudged, evidence={
            **counted,
            "objective": _shown(ctx, training.objective, "unspecified objective"),
            "model_name": _shown(ctx, training.model.name, "the model"),
            "parameters": parameters,
            "trainable_parameters": _shown(ctx, training.model.trainable_parameters, parameters),
            "optimizer": _shown(ctx, training.optimizer, "?"),
            "precision": _shown(ctx, training.precision, "?"),
            "sequence_length": _shown(ctx, training.sequence_length, 0),
            "global_batch": _shown(ctx, training.global_batch, 0),
            "completion_window_days": _shown(ctx, training.completion_window_days, 0),
            "required_count": len(required),
            "defined_count": len([given for given in required if given.pointer not in missing]),
            "missing_count": len(missing),
            "missing_list": ", ".join(p.removeprefix(f"{training.pointer}/") for p in missing),
            "missing_inputs": missing,
            "checks_lacking_inputs": len(lacking),
            "lacking_list": "; ".join(f"{check} needs {', '.join(pointers)}" for check, pointers in lacking.items()),
            "missing_by_check": lacking,
        })


def _shown(ctx: Context, given: Given[Any], otherwise: Any) -> Any:
    """Returns ``ctx.value(given)``, or ``otherwise`` (the words of a message) when the job has no value."""
    value = ctx.value(given)
    return otherwise if value is None else value


def _parameter_count(ctx: Context) -> tuple[dict[str, Any], frozenset[str]]:
    """Returns the architecture's parameter count (and a mixture of experts' active count) and its distance from the
    stated count, where both are known.

    Without a stated count or a fully stated architecture there is nothing to compare: the mismatch is then
    declared unjudged, so that the rule comparing it neither fires nor is left undecided.
    """
    shape = counted_architecture(ctx)
    if shape is None:
        return {}, frozenset({"parameter_mismatch_fraction"})
    counted = transformer_parameters(shape)
    evidence: dict[str, Any] = {"parameters_from_architecture": counted, "architecture": architecture_words(shape)}
    if shape.experts is not None:
        # A mixture of experts: the parameters one token runs through (its active experts), beside the total.
        evidence["active_parameters"] = active_parameters(shape)
    stated = ctx.value(ctx.job.training.model.parameters)
    if stated is None:
        return evidence, frozenset({"parameter_mismatch_fraction"})
    return {**evidence, "parameter_mismatch_fraction": parameter_mismatch_fraction(stated, counted)}, frozenset()
