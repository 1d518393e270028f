"""Property: for any valid training submission, evaluate() decides every check without raising, and no
estimate in the evidence is NaN, infinite or negative (spare fractions excepted: they are negative exactly
when a need exceeds what is available)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules.catalogue import load_catalogue
from rules.checks import CHECKS
from rules.checks.base import Context
from rules.checks.facts.batch import accumulation
from rules.checks.facts.communication import communication
from rules.checks.facts.layout import layout
from rules.checks.facts.memory import _memory_estimate, memory_estimate
from rules.errors import InconsistentInput
from rules.estimates.memory.sharding import SHARDING_ORDER
from rules.evaluate import evaluate, validate_submission
from rules.job.inputs import Inputs
from rules.policy import default_policy

SERVERS = load_catalogue().server_models()
# Signed by design: need vs available (negative = short), and the log-symmetric interval deviation.
SIGNED = ("spare_fraction",)


@st.composite
def training_submissions(draw: st.DrawFn) -> dict[str, Any]:
    heads = draw(st.sampled_from([8, 16, 32, 64, 96]))
    head_dim = draw(st.sampled_from([64, 128]))
    tensor = draw(st.sampled_from([1, 2, 4, 8]))
    pipeline = draw(st.sampled_from([1, 1, 2, 4]))
    nodes = draw(st.integers(1, 64))
    gpus = nodes * 8
    architecture = {"layers": draw(st.sampled_from([8, 24, 32, 48, 80, 96])), "hidden": heads * head_dim,
                    "heads": heads, "kv_heads": draw(st.sampled_from([h for h in (1, 8, heads) if h <= heads])),
                    "ffn_hidden": draw(st.sampled_from([2, 3, 4])) * heads * head_dim,
                    "vocab": draw(st.sampled_from([32000, 50257, 128256])),
                    "tied_embeddings": draw(st.booleans()), "mlp": draw(st.sampled_from(["gelu", "swiglu"]))}
    parameters = 10 ** draw(st.floats(8, 11.5))
    training: dict[str, Any] = {
        "objective": draw(st.sampled_from(["pretraining", "full-fine-tune", "adapter", "continued-pretraining"])),
        "model": {"name": "m", "parameters": parameters,
                  "trainable_parameters": parameters * draw(st.sampled_from([0.01, 1.0])),
                  "architecture": architecture},
        "precision": draw(st.sampled_from(["bf16-mixed", "fp16-mixed", "fp32", "bf16-pure"])),
        "optimizer": draw(st.sampled_from(["adamw", "adam", "adamw-8bit", "sgd-momentum", "sgd", "adafactor"])),
        "parallelism": {"sharding": draw(st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp-full",
                                                           "fsdp-hybrid"])),
                        "tensor": tensor, "pipeline": pipeline,
                        "sequence_parallel": draw(st.booleans()),
                        "offload": draw(st.sampled_from(["none", "optimizer", "optimizer+parameters"]))},
        "activation_checkpointing": draw(st.sampled_from(["none", "selective", "full"])),
        "flash_attention": draw(st.booleans()),
        "sequence_length": draw(st.sampled_from([512, 2048, 8192, 32768])),
        "micro_batch": draw(st.integers(1, 16)),
        "global_batch": draw(st.integers(1, 4096)),
        "gpus": gpus,
        "dataset_tokens": 10 ** draw(st.floats(6, 13)),
        "epochs": draw(st.floats(0.1, 10)),
        "completion_window_days": draw(st.floats(0.1, 365)),
        "throughput": draw(st.one_of(st.fixed_dictionaries({"mfu": st.floats(0.01, 1)}),
                                     st.fixed_dictionaries({"tokens_per_s_per_gpu": st.floats(1, 1e6)}))),
        "checkpoint": {"interval_min": draw(st.floats(1, 1440)), "max_save_s": draw(st.floats(1, 3600))},
        "reliability": {"node_mtbf_h": draw(st.floats(1, 1e6)), "restart_min": draw(st.floats(0, 120))},
        "data": {"bytes_per_token": draw(st.floats(0.5, 1e5))},
        "dataloader": {"workers_per_gpu": draw(st.integers(0, 16)), "worker_rss_gib": draw(st.floats(0, 64)),
                       "pinned_gib_per_gpu": draw(st.floats(0, 64))},
    }
    return {"schema_version": "1",
            "quote": {"vendor": "Property", "quote_id": "P-2",
                      "node_groups": [{"name": "gpu", "count": nodes, "server_model": draw(st.sampled_from(SERVERS))}],
                      "storage": {"kind": "parallel-fs", "read_gbs": draw(st.floats(0.1, 2000)),
                                  "write_gbs": draw(st.floats(0.1, 1000))},
                      "racks": [{"name": "r", "count": nodes, "power_budget_kw": draw(st.floats(1, 200)),
                                 "pdus": [{"count": 2, "rating_kw": draw(st.floats(1, 60))}],
                                 "redundancy": draw(st.sampled_from(["N", "N+1", "2N"])),
                                 "node_groups": {"gpu": 1}}]},
            "workload": {"training": training}}


def _numbers(key: str, value: Any) -> list[tuple[str, float]]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [(key, value)]
    if isinstance(value, dict):
        return [n for k, v in value.items() for n in _numbers(k, v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(key, v)]
    return []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_submissions())
def test_no_training_estimate_raises_or_is_nan_or_negative(submission: dict[str, Any]) -> None:
    validate_submission(submission)

    record = evaluate(submission)

    assert record["verdict"] in ("pass", "warn", "incomplete", "fail")
    for check in record["checks"]:
        for key, number in _numbers(check["id"], check["evidence"]):
            assert math.isfinite(number), (check["id"], key, number)
            if not key.endswith(SIGNED):
                assert number >= 0, (check["id"], key, number)


def _outcome(compute: Any) -> Any:
    try:
        return compute()
    except InconsistentInput as error:
        return ("refused", str(error))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_submissions())
def test_the_shared_collectives_and_memory_estimate_are_those_computed_directly(submission: dict[str, Any]) -> None:
    # communication() sizes the submitted layout's collectives once per strategy from inputs read once, and the
    # submitted memory estimate is made once: each must be what the estimators give on the inputs read directly.
    inputs, policy = Inputs(submission), default_policy()
    shared: dict[str, Any] = {}
    ctx = Context(inputs, policy, shared, CHECKS[0])
    direct = Context(inputs, policy, {}, CHECKS[0])
    plan, split = _outcome(lambda: layout(direct)), _outcome(lambda: accumulation(direct))
    for strategy in (None, *SHARDING_ORDER):
        shared_step = _outcome(lambda s=strategy: communication(ctx, sharding=s))
        if isinstance(plan, tuple) or plan is None or split is None or isinstance(split, tuple):
            assert shared_step is None or isinstance(shared_step, tuple)
            continue
        assert shared_step == _outcome(lambda s=strategy: communication(direct, sharding=s, plan=plan, split=split))
    assert _outcome(lambda: memory_estimate(ctx)) == _outcome(
        lambda: _memory_estimate(Context(inputs, policy, {}, CHECKS[0]), None, None, None))
