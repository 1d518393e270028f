"""JSON Schemas of the comparisons over the API: the request of POST /api/v1/comparisons and the tasks' results.

One submission under what-if variants (rules/advice/compare.py) answers with a row per variant; stored quotes for
the same workload (rules/advice/compare_quotes.py) answer with a row per quote, each at its best layout, ranked.
"""

from __future__ import annotations

from typing import Any

from service.api_schemas.searches import SEARCH_LAYOUT

_TEXT = {"type": "string"}
_NULLABLE_TEXT = {"type": ["string", "null"]}
_DIGEST = {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_VERDICT = {"enum": ["pass", "warn", "incomplete", "fail"]}
_STOP: dict[str, Any] = {
    "type": "object", "required": ["id", "status", "message"],
    "properties": {"id": {**_NULLABLE_TEXT, "description": "the check id; null when no check was decided"},
                   "status": {"enum": ["fail", "insufficient-data"]}, "message": _TEXT},
}

VARIANT_NAME_PATTERN = "^[^\\x00-\\x1f\\x7f]{1,64}$"

COMPARISON_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "description": "either `submission` with `variants` (one submission under what-if patches) or `submissions` "
                   "(stored quotes for the same workload, each at its best layout)",
    "minProperties": 1,
    "dependentRequired": {"submission": ["variants"], "variants": ["submission"]},
    "properties": {
        "submission": {"type": "object", "description": "the submission the variants patch (schemas/submission)"},
        "submissions": {"type": "array", "minItems": 2, "uniqueItems": True,
                        "description": "ids of stored submissions for the same workload (at most "
                                       "MAX_COMPARISON_VARIANTS); the current revision of each is compared",
                        "items": {"type": "string", "minLength": 1, "maxLength": 64}},
        "variants": {"type": "array", "minItems": 1, "description": "at most MAX_COMPARISON_VARIANTS (16 by default)",
                     "items": {
                         "type": "object",
                         "additionalProperties": False,
                         "required": ["name", "patch"],
                         "properties": {
                             "name": {"type": "string", "maxLength": 64, "pattern": VARIANT_NAME_PATTERN,
                                      "description": "unique within the comparison: 1-64 characters, no control "
                                                     "characters"},
                             "patch": {"type": "object",
                                       "description": "an RFC 7396 JSON merge patch of the submission; {} for the "
                                                      "submission as it is"}}}},
    },
}

# The documented request: the same, with the submission described by its contract schema.
COMPARISON_REQUEST_DOCUMENTED: dict[str, Any] = {
    **COMPARISON_REQUEST,
    "properties": {**COMPARISON_REQUEST["properties"],
                   "submission": {"$ref": "#/components/schemas/SubmissionDocument"}},
}


COMPARISON_ROW: dict[str, Any] = {
    "type": "object",
    "description": "one variant, evaluated; figures from its time-to-result evidence (null where not applicable)",
    "required": ["name", "submission_digest", "verdict", "failing_checks", "days", "gpus_quoted", "gpus_needed",
                 "quote_total", "cost_per_run_day"],
    "properties": {
        "name": _TEXT, "submission_digest": _DIGEST, "verdict": {"enum": ["pass", "warn", "incomplete", "fail"]},
        "summary": {"type": "object", "additionalProperties": {"type": "integer"}},
        "failing_checks": {"type": "array", "items": _TEXT},
        "warning_checks": {"type": "array", "items": _TEXT},
        "incomplete_checks": {"type": "array", "items": _TEXT},
        "time_to_result": _NULLABLE_TEXT,
        "days": {**_NUMBER_OR_NULL, "description": "expected days to result, failures and restarts included"},
        "days_p50": {**_NUMBER_OR_NULL, "description": "simulated median days to result"},
        "days_p90": {**_NUMBER_OR_NULL, "description": "simulated 90th-percentile days to result"},
        "window_probability": {**_NUMBER_OR_NULL, "description": "share of simulated runs inside the window"},
        "compute_days": {**_NUMBER_OR_NULL, "description": "days without failures"},
        "window_days": _NUMBER_OR_NULL,
        "gpus_quoted": {"type": ["integer", "null"], "description": "Σ nodes × GPUs per node over the node groups"},
        "gpus": {**_NUMBER_OR_NULL, "description": "GPUs the training job uses"},
        "gpus_needed": {**_NUMBER_OR_NULL, "description": "GPUs the completion window needs; null when no GPU count "
                                                          "fits memory (`gpus_needed_reason` says why) or "
                                                          "time-to-result could not be decided"},
        "gpus_needed_reason": {**_NULLABLE_TEXT, "description": "why no GPU count is advised (none fits memory); "
                                                               "null when `gpus_needed` is given"},
        "currency": _NULLABLE_TEXT, "quote_total": _NUMBER_OR_NULL,
        "cost_per_run_day": {**_NUMBER_OR_NULL, "description": (
            "time-to-result's cost_per_day: the full cost of owning the quote per run day, in its currency")},
    },
}

COMPARISON: dict[str, Any] = {
    "type": "object",
    "required": ["key", "submission_digest", "engine_version", "policy", "variants"],
    "properties": {
        "key": {**_DIGEST, "description": "identifies the comparison: submission, variants, engine and policy"},
        "submission_digest": _DIGEST, "engine_version": _TEXT, "policy": {"type": "object"},
        "variants": {"type": "array", "items": {"$ref": "#/components/schemas/ComparisonRow"}},
    },
}

QUOTE_ROW: dict[str, Any] = {
    "type": "object",
    "description": "one stored quote, evaluated at the best layout of its quoted GPUs (`layout`: best) or, when "
                   "none can be searched, as submitted; figures from time-to-result at that layout",
    "required": ["rank", "name", "submission_digest", "layout", "verdict", "verdict_as_submitted",
                 "failing_checks", "days", "days_p50", "days_p90", "gpus_quoted", "quote_total"],
    "properties": {
        "rank": {"type": "integer", "minimum": 1, "description": "1 is fastest: by days_p50, days_p90, quote_total"},
        "name": {**_TEXT, "description": "the submission id"}, "submission_digest": _DIGEST,
        "vendor": _NULLABLE_TEXT, "quote_id": _NULLABLE_TEXT,
        "layout": {"enum": ["best", "submitted"]},
        "best_layout": {"oneOf": [{"type": "null"}, SEARCH_LAYOUT]},
        "submitted_vs_best": _TEXT,
        "verdict": {**_VERDICT, "description": "at the layout compared"},
        "verdict_as_submitted": _VERDICT,
        "failing_checks": {"type": "array", "items": _TEXT},
        "days": {**_NUMBER_OR_NULL, "description": "expected days to result (first-order goodput)"},
        "days_p50": {**_NUMBER_OR_NULL, "description": "simulated median days to result, where evaluated"},
        "days_p90": {**_NUMBER_OR_NULL, "description": "simulated 90th-percentile days to result, where evaluated"},
        "window_days": _NUMBER_OR_NULL,
        "gpus_quoted": {"type": ["integer", "null"]},
        "currency": _NULLABLE_TEXT, "quote_total": _NUMBER_OR_NULL, "cost_per_run_day": _NUMBER_OR_NULL,
        "assumed_layout": {"oneOf": [{"type": "null"}, SEARCH_LAYOUT],
                           "description": "the layout the row's figures assume: `best_layout`, or the submitted "
                                          "layout as the search describes it (compared as submitted); null when "
                                          "nothing could be searched"},
        "verdict_after_waivers": {**_VERDICT, "description": "`verdict` once the waived checks are"},
        "passes": {"type": "boolean", "description": "ranked: no failed or incomplete check that no waiver covers"},
        "stopped_by": {"type": "array", "items": _STOP,
                       "description": "the checks that stop the quote being ranked; [] when it passes"},
        "waived_checks": {"type": "array", "items": _TEXT,
                          "description": "the failed or incomplete checks an active waiver covers"},
        "throughput_from": {**_NULLABLE_TEXT, "description": "where the training rate came from: modelled, or the "
                                                             "stated member (tokens_per_s_per_gpu, mfu, "
                                                             "hardware_tflops_per_gpu), which is kept"},
        "days_range": {"oneOf": [{"type": "null"}, {"type": "array", "items": {"type": "number"}, "minItems": 2,
                                                    "maxItems": 2}],
                       "description": "expected days at the fast and slow ends of the modelled rate's band; null "
                                      "for a stated rate"},
        "cost_per_run": {**_NUMBER_OR_NULL, "description": "time-to-result's cost_per_run: the full cost of owning "
                                                           "the quote for the run's expected days, in `currency`"},
        "cost_per_million_tokens": {**_NUMBER_OR_NULL, "description": "cost_per_run per million training tokens"},
        "cost_note": {**_NULLABLE_TEXT, "description": "why there is no cost per run (null when there is)"},
    },
}

# A quote that passes, ranked among those that do (`rank` 1 soonest), or one that does not (`rank` null).
PASSING_QUOTE_ROW: dict[str, Any] = {
    "allOf": [{"$ref": "#/components/schemas/QuoteRow"}],
    "description": "a quote that passes, `rank` among those that pass (1 soonest: days_p50, days_p90, quote_total)",
    "properties": {"passes": {"const": True}},
}
NOT_RANKED_QUOTE_ROW: dict[str, Any] = {
    "type": "object",
    "description": "a quote that does not pass: `rank` null, `stopped_by` its checks (the other members of QuoteRow)",
    "required": ["name", "rank", "passes", "stopped_by"],
    "properties": {"rank": {"type": "null"}, "passes": {"const": False},
                   "stopped_by": {"type": "array", "items": _STOP, "minItems": 1}},
}
_NAMED_QUOTE: dict[str, Any] = {
    "oneOf": [{"type": "null"}, {
        "type": "object",
        "required": ["name", "rank"],
        "properties": {"name": _TEXT, "vendor": _NULLABLE_TEXT, "quote_id": _NULLABLE_TEXT,
                       "rank": {"type": "integer", "minimum": 1}, "days": _NUMBER_OR_NULL,
                       "days_p50": _NUMBER_OR_NULL, "days_p90": _NUMBER_OR_NULL, "currency": _NULLABLE_TEXT,
                       "quote_total": _NUMBER_OR_NULL, "cost_per_run": _NUMBER_OR_NULL,
                       "cost_per_million_tokens": _NUMBER_OR_NULL}}],
}

QUOTE_COMPARISON: dict[str, Any] = {
    "type": "object",
    "required": ["key", "engine_version", "policy", "ranked_by", "quotes"],
    "properties": {
        "key": {**_DIGEST, "description": "identifies the comparison: the quotes' ids and digests, engine and policy"},
        "engine_version": _TEXT, "policy": {"type": "object"},
        "ranked_by": {"type": "array", "items": _TEXT},
        "quotes": {"type": "array", "items": {"$ref": "#/components/schemas/QuoteRow"},
                   "description": "every quote, ordered by ranked_by whatever its checks say (the first version's "
                                  "ranking); `passing` and `not_ranked` decide"},
        "waived": {"type": "object", "additionalProperties": {"type": "array", "items": _TEXT},
                   "description": "submission id → the checks an active waiver covered when the comparison was "
                                  "asked for"},
        "passing": {"type": "array", "items": {"$ref": "#/components/schemas/PassingQuoteRow"},
                    "description": "the quotes whose checks pass (after waivers), ranked by ranked_by"},
        "not_ranked": {"type": "array", "items": {"$ref": "#/components/schemas/NotRankedQuoteRow"},
                       "description": "the quotes that do not pass, each with the checks that stop it"},
        "soonest": {**_NAMED_QUOTE, "description": "the soonest quote that passes (rank 1, its days known)"},
        "cheapest": {**_NAMED_QUOTE, "description": "the passing quote of the lowest cost_per_run; on a tie, the "
                                                    "lower rank; null when none is priced, or when they are priced "
                                                    "in different currencies (`cheapest_note`)"},
        "cheapest_by": {"type": "array", "items": _TEXT},
        "cheapest_note": {**_NULLABLE_TEXT, "description": "why no quote is named cheapest"},
    },
}
