"""StepMemoryModel keeps terms across estimates: every estimate and search must be what a fresh one gives.

An evaluation shares one model among its sharding comparison, peak-memory's estimate, the micro-batch search and
the GPU-count search (rules/checks/facts/memory.py), in whatever order the checks ask. Each case below asks a
shared model for all of them in a shuffled order and compares every answer, refusals' messages included, with
the same call on a fresh model; the GPU-count search is also held against a scan of every count, each
asked of a fresh :func:`training_memory`. The cases are
drawn from a seeded generator over shardings, degrees, offload, conventions, batch shapes and GPU sizes.
"""

from __future__ import annotations

import math
import random

import pytest

from rules.errors import InconsistentInput
from rules.estimates.memory import step_memory as memory_module
from rules.estimates.memory.activations import ActivationSaving
from rules.estimates.memory.comm_buffers import CommunicationSettings
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.step_memory import (
    MemorySettings,
    StepMemoryModel,
    TrainingBatch,
    TrainingJob,
    largest_fitting_micro_batch,
    memory_min_gpus,
    no_fit_reason,
    training_memory,
)
from rules.estimates.model.layout import Layout, resized, training_layout
from rules.estimates.model.shapes import ModelShape

LLAMA3_8B = ModelShape(32, 4096, 32, kv_heads=8, ffn_hidden=14336, vocab=128256, mlp="swiglu", norm="rmsnorm",
                       dropout=False)
LLAMA3_70B = ModelShape(80, 8192, 64, kv_heads=8, ffn_hidden=28672, vocab=128256, mlp="swiglu", norm="rmsnorm",
                        dropout=False)
GPT_SMALL = ModelShape(24, 2048, 16, vocab=50257, linear_biases=True, tied_embeddings=True)
TWO_LAYERS = ModelShape(2, 1024, 16)  # no vocabulary: buffers and gathered units unknown
SHARDINGS = ("ddp", "zero1", "zero2", "fsdp-hybrid", "zero3", "fsdp-full")
CASES = 250


def _case(rng: random.Random) -> tuple[TrainingJob, Layout, float, MemorySettings] | None:
    """Returns one drawn job, layout, GPU memory and settings; None when the drawn layout is refused."""
    shape = rng.choice([LLAMA3_8B, LLAMA3_70B, GPT_SMALL, TWO_LAYERS, None])
    parameters = rng.choice([1e9, 8e9, 7e10, 4.05e11])
    model = TrainedModel(parameters, rng.choice([parameters, parameters / 100]),
                         rng.choice(["bf16-mixed", "fp32", "fp8-mixed", "bf16-pure"]),
                         rng.choice(["adamw", "adamw-8bit", "sgd"]))
    tensor, pipeline, context = rng.choice([(1, 1, 1), (8, 1, 1), (2, 4, 1), (4, 2, 2), (1, 1, 8), (1, 8, 1)])
    sharding = rng.choice(SHARDINGS)
    batch = TrainingBatch(rng.choice([None, 2048, 8192, 32768]), rng.choice([None, 1, 1, 2, 8]),
                          rng.choice([None, 64, 256, 4096]))
    saving = ActivationSaving(rng.choice(["none", "selective", "full"]), rng.choice([False, True]),
                              rng.choice([False, True]))
    job = TrainingJob(model, shape, batch, saving, rng.choice([1, 2]) if pipeline > 1 else 1,
                      rng.choice(["none", "optimizer", "optimizer+parameters"]),
                      gradient_as_bucket_view=rng.choice([False, True]))
    settings = MemorySettings(
        convention=rng.choice(["zero-paper", "megatron", "megatron-distributed-optimizer", "deepspeed"]),
        cuda_context_gib=rng.choice([0.0, 1.0]), fragmentation_fraction=rng.choice([0.0, 0.1]),
        headroom_fraction=rng.choice([0.0, 0.1]), gathered_layers=rng.choice([1, 2]),
        activation_convention=rng.choice(["physical", "megatron"]),
        communication=rng.choice([None, CommunicationSettings(32), CommunicationSettings(4)]))
    gpus_per_node = rng.choice([8, 4, 2])
    gpus = math.lcm(gpus_per_node, tensor * pipeline * context) * rng.choice([1, 2, 16])
    shard_group = rng.choice([None, 16, 4]) if sharding == "fsdp-hybrid" else None
    try:
        layout = training_layout(gpus, gpus_per_node, 1, tensor, pipeline, sharding, shard_group, context)
    except InconsistentInput:
        return None
    return job, layout, rng.choice([16.0, 24.0, 80.0, 141.0, 192.0]) * rng.uniform(0.5, 1.5), settings


def _cases(rng: random.Random):
    """Yields the cases of CASES draws from ``rng`` whose layout is valid (:func:`_case`)."""
    for _ in range(CASES):
        drawn = _case(rng)
        if drawn is not None:
            yield drawn


def _answer(call):
    """Returns what ``call()`` returns, or the message of the InconsistentInput it raises."""
    try:
        return call()
    except InconsistentInput as error:
        return f"InconsistentInput: {error}"


def _scanned_memory_min_gpus(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings,
                             max_gpus: int) -> int | None:
    """The fewest fitting count by asking a fresh :func:`training_memory` on every multiple up to ``max_gpus``."""
    unit = layout.whole_unit_gpus
    for multiple in range(1, max(1, max_gpus // unit) + 1):
        try:
            if training_memory(job, resized(layout, multiple * unit), gpu_memory_gib, settings).fits:
                return multiple * unit
        except InconsistentInput:
            continue
    return None


def _fresh_answers(job: TrainingJob, layout: Layout, gpu_memory_gib: float, settings: MemorySettings) -> dict:
    """Returns every call an evaluation may make of the job, each answered by a fresh model."""
    answers = {("search",): _answer(lambda: memory_min_gpus(job, layout, gpu_memory_gib, settings)),
               ("reason",): _answer(lambda: no_fit_reason(job, layout, gpu_memory_gib, settings)),
               ("largest",): _answer(lambda: largest_fitting_micro_batch(job, layout, gpu_memory_gib, settings, 64))}
    for sharding in (*SHARDINGS, None):
        for micro_batch in (None, 3):
            answers["estimate", sharding, micro_batch] = _answer(lambda s=sharding, m=micro_batch: training_memory(
                job, layout, gpu_memory_gib, settings, sharding=s, micro_batch=m))
    return answers


def _shared_answer(model: StepMemoryModel, layout: Layout, key: tuple) -> object:
    """Returns the answer of ``model`` to the call ``key`` of :func:`_fresh_answers`."""
    if key[0] == "estimate":
        return _answer(lambda: model.estimate(layout, sharding=key[1], micro_batch=key[2]))
    if key[0] == "search":
        return _answer(lambda: model.memory_min_gpus(layout))
    if key[0] == "reason":
        return _answer(lambda: model.no_fit_reason(layout))
    return _answer(lambda: model.largest_fitting_micro_batch(layout, 64))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_shared_model_answers_every_estimate_and_search_as_a_fresh_one_does(seed):
    rng = random.Random(seed)
    compared = 0
    for job, layout, gpu_memory_gib, settings in _cases(rng):
        # Given every call an evaluation may make, each answered by a fresh model,
        expected = _fresh_answers(job, layout, gpu_memory_gib, settings)
        # when one model answers them all, in a shuffled order,
        shared = StepMemoryModel(job, gpu_memory_gib, settings)
        order = list(expected)
        rng.shuffle(order)
        for key in order:
            # then each answer is the fresh one, to the bit (dataclass equality compares every float).
            assert _shared_answer(shared, layout, key) == expected[key], (key, layout, job, settings)
            compared += 1
    assert compared > CASES * 10  # most drawn layouts are valid


@pytest.mark.parametrize("seed", [3, 4])
def test_the_gpu_count_search_is_the_scan_of_every_count(seed, monkeypatch):
    # Given the searches stopped at 1,024 GPUs, so that every count can be asked,
    monkeypatch.setattr(memory_module, "MAX_SEARCH_GPUS", 1_024)
    rng = random.Random(seed)
    found = 0
    for job, layout, gpu_memory_gib, settings in _cases(rng):
        # then the search answers the fewest count that fits of all, and gives a reason exactly when none does.
        scanned = _scanned_memory_min_gpus(job, layout, gpu_memory_gib, settings, 1_024)
        assert memory_min_gpus(job, layout, gpu_memory_gib, settings) == scanned, (layout, job, settings)
        reason = no_fit_reason(job, layout, gpu_memory_gib, settings)
        assert reason is None or scanned is None
        found += scanned is not None
    assert found > 10  # the draw reaches counts that fit, not only refusals and unknown activations


def test_the_search_finds_the_fewest_where_the_step_is_not_monotone_in_the_gpu_count():
    # Given fsdp-hybrid over two-GPU nodes with context parallel 8: the state is sharded within a node only, so
    # more nodes shard nothing further, and a second replica adds the replicate group's NCCL communicator,
    job = TrainingJob(TrainedModel(7e10, 7e10, "bf16-pure", "sgd"), TWO_LAYERS, TrainingBatch(4096, 1, 256),
                      ActivationSaving("full", False, True), 1, "none", gradient_as_bucket_view=True)
    settings = MemorySettings(convention="megatron", cuda_context_gib=0.0, fragmentation_fraction=0.0,
                              headroom_fraction=0.1, gathered_layers=2, activation_convention="megatron",
                              communication=CommunicationSettings(32))
    layout = training_layout(32, 2, 16, sharding="fsdp-hybrid", context=8)
    steps = [training_memory(job, resized(layout, gpus), 146.9, settings) for gpus in (8, 16, 131_072)]
    assert [step.communication.communicators for step in steps] == [3, 4, 4]
    assert [step.fits for step in steps] == [True, False, False]
    # then the search answers 8 GPUs (the plain bisection from the largest count answered None), with no reason.
    assert memory_min_gpus(job, layout, 146.9, settings) == 8
    assert no_fit_reason(job, layout, 146.9, settings) is None
    assert StepMemoryModel(job, 146.9, settings).memory_min_gpus(layout) == 8
