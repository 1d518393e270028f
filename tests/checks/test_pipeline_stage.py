"""peak-memory sizes the most loaded pipeline stage, not an even share of the parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rules.evaluate import evaluate

EXAMPLE = Path(__file__).parents[2] / "examples" / "h200-128node-pretraining.json"


def test_first_stage_holds_the_embedding_on_top_of_its_layers_megatron_theoretical_memory() -> None:
    # Megatron-LM theoretical_memory_usage.py: the first stage holds block/p + embedding (t = 1 here).
    # Llama-3-70B shape: per layer 2h(1.5·ffn + 1) + 2h²(1 + kv/heads) = 855,654,400; block = 80 layers + the
    # final norm (h) = 68,452,360,192; embedding = h·V = 1,050,673,152; untied, so the whole model is
    # block + 2·embedding = 70,553,706,496 (the published count). With p = 4 the first stage holds
    # 68,452,360,192/4 + 1,050,673,152 = 18,163,763,200 against an even 70,553,706,496/4.
    record = evaluate(json.loads(EXAMPLE.read_text()))

    evidence = next(c for c in record["checks"] if c["id"] == "peak-memory")["evidence"]
    assert evidence["first_stage_parameter_factor"] == pytest.approx(18_163_763_200 * 4 / 70_553_706_496, rel=1e-12)


def test_without_a_pipeline_every_gpu_holds_an_even_share() -> None:
    submission = json.loads(EXAMPLE.read_text())
    submission["workload"]["training"]["parallelism"].update(pipeline=1, virtual_stages=1)

    record = evaluate(submission)

    evidence = next(c for c in record["checks"] if c["id"] == "peak-memory")["evidence"]
    assert evidence["first_stage_parameter_factor"] == 1.0
