"""Models by name: the model catalogue (rules/data/catalogue.json ``models``), how a name finds its entry, what a
name alone fills in, and the refusal of a name the catalogue lacks (CLI; the API's is in tests/api)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import schemas
from rules.catalogue import load_catalogue, model_key
from rules.errors import InvalidSubmission
from rules.estimates.model.parameters import active_parameters, transformer_parameters
from rules.estimates.model.shapes import Experts, ModelShape
from rules.evaluate import evaluate, validate_submission
from rules.job.inputs import Inputs
from rules.job.parse import parse_job
from service.cli import main
from tests.checks.fixture_support import load_fixture

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "dgx-h100-70b-finetune.json"
SERVING = ROOT / "examples" / "l40s-8b-serving.json"
MODELS = load_catalogue().document["models"]
AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
TRAINING_MODEL = "/workload/training/model"


def shape(architecture: dict[str, Any]) -> ModelShape:
    """Returns the shape of a catalogue architecture with the job's documented defaults (workload.py)."""
    mlp = architecture["mlp"]
    experts = Experts(**architecture["experts"]) if "experts" in architecture else None
    return ModelShape(layers=architecture["layers"], hidden=architecture["hidden"], heads=architecture["heads"],
                      kv_heads=architecture["kv_heads"], ffn_hidden=architecture["ffn_hidden"],
                      vocab=architecture["vocab"], head_dim=architecture.get("head_dim"), mlp=mlp,
                      norm=architecture.get("norm", "rmsnorm" if mlp == "swiglu" else "layernorm"),
                      dropout=architecture.get("dropout", mlp == "gelu"),
                      tied_embeddings=architecture.get("tied_embeddings", False), experts=experts)


def named(model: dict[str, Any], document: Path = EXAMPLE) -> dict[str, Any]:
    """Returns the example submission with its training model replaced by ``model``."""
    submission = json.loads(document.read_text())
    submission["workload"]["training"]["model"] = model
    return submission


def check(record: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(result for result in record["checks"] if result["id"] == check_id)


# --- the catalogue --------------------------------------------------------------------------------------


def test_the_catalogue_holds_the_models_the_issue_names() -> None:
    assert set(MODELS) == {
        "Llama-2-7B", "Llama-2-13B", "Llama-2-70B", "Llama-3-8B", "Llama-3-70B", "Llama-3.1-8B", "Llama-3.1-70B",
        "Llama-3.1-405B", "GPT-3-175B", "Nemotron-4-340B", "Qwen2.5-7B", "Qwen2.5-14B", "Qwen2.5-32B",
        "Qwen2.5-72B", "Qwen3-8B", "Qwen3-14B", "Qwen3-32B", "Mistral-7B-v0.1", "Mistral-7B-v0.3",
        "Mistral-Nemo-12B", "Mistral-Large-2", "Mixtral-8x7B", "Mixtral-8x22B", "Qwen3-30B-A3B", "Qwen3-235B-A22B",
        "Qwen2-57B-A14B", "OLMoE-1B-7B"}
    assert set(load_catalogue().document["refused_models"]) == {"DeepSeek-V3"}


# The published sizes of the mixture-of-experts models (total, active per token), as their publishers round them.
# Mixtral 8x7B: Mistral AI's announcement, 46.7B total and 12.9B per token (the paper, arXiv 2401.04088: 47B and 13B);
# Mixtral 8x22B: the announcement, 39B active of 141B; Qwen3: the model cards, 235B / 22B and 30.5B / 3.3B (technical
# report arXiv 2505.09388); Qwen2-57B-A14B: the model card, 57B / 14B; OLMoE-1B-7B: arXiv 2409.02060 Table 1, 6.9B and
# 1.3B.
PUBLISHED_MOE = {"Mixtral-8x7B": (46.7e9, 12.9e9), "Mixtral-8x22B": (141e9, 39e9), "Qwen3-235B-A22B": (235e9, 22e9),
                 "Qwen3-30B-A3B": (30.5e9, 3.3e9), "Qwen2-57B-A14B": (57e9, 14e9), "OLMoE-1B-7B": (6.9e9, 1.3e9)}


@pytest.mark.parametrize("name", ["Mixtral-8x7B", "Qwen3-235B-A22B", "Mixtral-8x22B", "Qwen3-30B-A3B", "OLMoE-1B-7B"])
def test_a_mixture_of_experts_total_is_its_published_size_within_one_percent(name: str) -> None:
    total, _ = PUBLISHED_MOE[name]
    counted = transformer_parameters(shape(MODELS[name]["architecture"]))
    assert abs(counted - total) / total <= 0.01, f"{name}: {counted:,}"


@pytest.mark.parametrize("name", ["Mixtral-8x7B", "Qwen3-235B-A22B", "Mixtral-8x22B"])
def test_a_mixture_of_experts_active_count_is_its_published_one_within_one_percent(name: str) -> None:
    _, active = PUBLISHED_MOE[name]
    counted = active_parameters(shape(MODELS[name]["architecture"]))
    assert abs(counted - active) / active <= 0.01, f"{name}: {counted:,}"


def test_mixtral_8x7b_and_qwen3_235b_count_as_their_configs_give_them() -> None:
    # Mixtral 8x7B by hand: per layer q 4096² + k, v 2 × 4096 × 1024 + o 4096² = 41,943,040; 8 experts × 3 × 4096 ×
    # 14336 = 1,409,286,144; router 4096 × 8; two norms 2 × 4096: 1,451,270,144 × 32 + final norm 4096 + 2 × 32000 ×
    # 4096 = 46,702,792,704 total (46.7B); with 2 of the 8 experts 12,879,925,248 (12.9B).
    mixtral = shape(MODELS["Mixtral-8x7B"]["architecture"])
    assert (transformer_parameters(mixtral), active_parameters(mixtral)) == (46_702_792_704, 12_879_925_248)
    # Qwen3-235B-A22B: q 4096 × 8192 + k, v 2 × 4096 × 512 + o 8192 × 4096 = 71,303,168; 128 × 3 × 4096 × 1536 =
    # 2,415,919,104; router 524,288; norms 8192: 2,487,754,752 × 94 + 4096 + 2 × 151936 × 4096 = 235,093,610,496
    # (235B); with 8 experts 22,190,739,456 (22B, 0.9 % apart).
    qwen = shape(MODELS["Qwen3-235B-A22B"]["architecture"])
    assert (transformer_parameters(qwen), active_parameters(qwen)) == (235_093_610_496, 22_190_739_456)


@pytest.mark.parametrize("name", ["Qwen3-30B-A3B", "Qwen2-57B-A14B", "OLMoE-1B-7B"])
def test_the_other_active_counts_are_their_published_ones_within_two_percent(name: str) -> None:
    # Rounded to two digits by their publishers, the counts lie 1.6 % (Qwen3-30B-A3B: 3.35B counted, both embedding
    # matrices included as Megatron-LM's num_active_parameters counts them, against "3.3B"), 1.8 % (Qwen2-57B-A14B:
    # 14.25B against "14B") and 1.4 % (OLMoE: 1.28B against "1.3B") apart.
    _, active = PUBLISHED_MOE[name]
    counted = active_parameters(shape(MODELS[name]["architecture"]))
    assert abs(counted - active) / active <= 0.02, f"{name}: {counted:,}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_architecture_counts_the_published_size_within_two_percent(name: str) -> None:
    entry = MODELS[name]
    counted = transformer_parameters(shape(entry["architecture"]))
    assert abs(counted - entry["parameters"]) / entry["parameters"] <= 0.02, f"{name}: {counted:,}"


@pytest.mark.parametrize(("name", "billions"), [
    ("Llama-2-7B", 6.74), ("Llama-2-13B", 13.02), ("Llama-3-8B", 8.03), ("Llama-3-70B", 70.55),
    ("Llama-3.1-405B", 405.85), ("Qwen2.5-7B", 7.62), ("Qwen3-8B", 8.19), ("Mistral-7B-v0.1", 7.24),
    ("Mistral-Nemo-12B", 12.25)])
def test_the_count_reproduces_the_safetensors_total_where_hugging_face_lists_one(name: str, billions: float) -> None:
    # Hugging Face's totals: 6,738,415,616; 13,015,864,320; 8,030,261,248; 70,553,706,496; 405,853,388,800;
    # 7,615,616,512 (Qwen2.5's q/k/v biases, 129,024, uncounted); 8,190,735,360 (Qwen3's q/k norms, 9,216,
    # uncounted); 7,241,732,096; 12,247,782,400.
    assert round(transformer_parameters(shape(MODELS[name]["architecture"])) / 1e9, 2) == billions


def test_every_architecture_member_is_a_member_of_the_submission_schema() -> None:
    architecture = schemas.load_schema("submission")["$defs"]["model"]["properties"]["architecture"]["properties"]
    experts = set(architecture["experts"]["properties"])
    for name, entry in MODELS.items():
        assert set(entry["architecture"]) <= set(architecture), name
        assert set(entry["architecture"].get("experts", {})) <= experts, name


def test_every_model_cites_its_config_and_its_size() -> None:
    for name, entry in MODELS.items():
        refs = entry["refs"]
        assert "https://" in refs["architecture"] and "https://" in refs["parameters"], name
        assert ("config.json" in refs["architecture"]) or name in ("GPT-3-175B", "Nemotron-4-340B"), name


def test_two_models_whose_names_share_a_look_up_key_are_refused() -> None:
    from rules.catalogue import Catalogue

    document = copy.deepcopy(load_catalogue().document)
    document["models"]["Llama-3-8B"]["aliases"] = ["Llama-3.1-8B"]
    with pytest.raises(ValueError, match="share the look-up key 'llama3.18b'"):
        Catalogue(document).model("Llama-3-8B")


# --- names ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("spelling", "name"), [
    ("Llama-3-8B", "Llama-3-8B"), ("llama-3-8b", "Llama-3-8B"), ("meta-llama/Meta-Llama-3-8B", "Llama-3-8B"),
    ("llama3-8b", "Llama-3-8B"), ("Meta-Llama-3-8B-Instruct", "Llama-3-8B"), ("Llama 3 8B", "Llama-3-8B"),
    ("meta-llama/Llama-3.1-405B-Instruct", "Llama-3.1-405B"), ("llama3.1-70b", "Llama-3.1-70B"),
    ("meta-llama/Llama-2-7b-chat-hf", "Llama-2-7B"), ("Llama2-13B", "Llama-2-13B"), ("GPT-3 175B", "GPT-3-175B"),
    ("nvidia/Nemotron-4-340B-Instruct", "Nemotron-4-340B"), ("Qwen/Qwen2.5-72B-Instruct", "Qwen2.5-72B"),
    ("qwen2.5-7b", "Qwen2.5-7B"), ("Qwen/Qwen3-32B", "Qwen3-32B"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "Mistral-7B-v0.3"),
    ("mistralai/Mistral-Nemo-Instruct-2407", "Mistral-Nemo-12B"), ("Mistral-Nemo", "Mistral-Nemo-12B"),
    ("mistralai/Mistral-Large-Instruct-2407", "Mistral-Large-2")])
def test_a_name_is_found_whatever_its_usual_spelling(spelling: str, name: str) -> None:
    assert load_catalogue().model(spelling) is MODELS[name]


@pytest.mark.parametrize("spelling", ["Llama-3-9B", "Llama-3.2-3B", "Mistral-7B", "70B", "", "   "])
def test_a_name_the_catalogue_lacks_finds_nothing(spelling: str) -> None:
    assert load_catalogue().model(spelling) is None


def test_the_look_up_key_keeps_the_dot_of_a_version() -> None:
    assert model_key("Llama-3.1-8B") == "llama3.18b" != model_key("Llama-3-18B")


def test_the_closest_names_are_offered_for_a_near_miss() -> None:
    assert load_catalogue().closest_models("Llama-3-9B")[0] == "Llama-3-8B"
    assert load_catalogue().closest_models("Mistral-7B")[:2] == ["Mistral-7B-v0.3", "Mistral-7B-v0.1"]


# --- a name alone ---------------------------------------------------------------------------------------


def test_a_name_alone_fills_parameters_and_architecture_from_the_catalogue() -> None:
    record = evaluate(named({"name": "meta-llama/Meta-Llama-3-8B"}), now=AT)

    evidence = check(record, "training-objective")["evidence"]
    assert evidence["parameters"] == 8_030_261_248 == evidence["parameters_from_architecture"]
    assert evidence["architecture"].startswith("32 layers, hidden 4096, 32 heads, 8 kv heads")
    fills = {fill["pointer"]: fill for fill in record["catalogue_fills"] if fill["pointer"].startswith(TRAINING_MODEL)}
    assert sorted(fills) == sorted([f"{TRAINING_MODEL}/parameters"] + [
        f"{TRAINING_MODEL}/architecture/{member}" for member in MODELS["Llama-3-8B"]["architecture"]])
    assert {fill["source"] for fill in fills.values()} == {"vendor_limit"}
    assert "Meta-Llama-3-8B/blob/main/config.json" in fills[f"{TRAINING_MODEL}/architecture/layers"]["ref"]
    # A catalogue figure is not an assumption of the submission.
    assert not [a for a in check(record, "training-objective")["assumptions"] if "/model/" in a["pointer"]]


def test_the_architecture_members_given_win_over_the_catalogue() -> None:
    inputs = Inputs(named({"name": "Qwen3-32B", "architecture": {"vocab": 152064, "layers": {"value": 60,
                                                                   "source": "measurement", "ref": "our fork"}}}))
    architecture = parse_job(inputs).training.model.architecture

    assert (architecture.vocab.value, architecture.vocab.source) == (152064, "assumption")
    assert (architecture.layers.value, architecture.layers.source) == (60, "measurement")
    assert (architecture.head_dim.value, architecture.head_dim.source) == (128, "vendor_limit")
    assert parse_job(inputs).training.model.parameters.value == 32_800_000_000
    filled = {fill.pointer for fill in inputs.fills}
    assert not {f"{TRAINING_MODEL}/architecture/vocab", f"{TRAINING_MODEL}/architecture/layers"} & filled


def test_a_served_model_is_filled_by_name_too() -> None:
    submission = json.loads(SERVING.read_text())
    submission["workload"]["inference"]["model"] = {"name": "Llama-3.1-8B-Instruct"}
    serving = parse_job(Inputs(submission)).serving.model

    assert serving.parameters.value == 8_030_261_248 and serving.parameters.source == "vendor_limit"
    assert (serving.architecture.kv_heads.value, serving.architecture.vocab.value) == (8, 128256)
    assert evaluate(submission, now=AT)["verdict"] in ("pass", "warn", "fail", "incomplete")


def test_a_name_given_with_parameters_is_a_label_and_fills_nothing() -> None:
    # The fixture names Llama-2-7B and states parameters without an architecture: the checks that need the
    # architecture still lack it, as its record always said.
    fixture = load_fixture(ROOT / "tests" / "checks" / "sharding" / "insufficient_data_no_architecture.json")
    record = evaluate(fixture, now=AT)

    assert not [fill for fill in record["catalogue_fills"] if "/model/" in fill["pointer"]]
    assert check(record, "sharding")["status"] == "insufficient-data"


@pytest.mark.parametrize("model", [
    {"name": "our-model-v2", "parameters": 7e9},
    {"name": "our-model-v2", "architecture": {"layers": 32, "hidden": 4096, "heads": 32}}])
def test_a_name_the_catalogue_lacks_is_a_label_beside_parameters_or_an_architecture(model: dict) -> None:
    validate_submission(named(model))


def test_a_name_the_catalogue_lacks_alone_is_refused_naming_its_pointer_and_the_closest_names() -> None:
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(named({"name": "Llama-3-9B"}))

    [problem] = refused.value.problems
    assert problem.pointer == f"{TRAINING_MODEL}/name"
    assert "'Llama-3-9B' is not in the model catalogue" in problem.message
    assert "did you mean Llama-3-8B, Llama-3-70B" in problem.message
    assert f"{TRAINING_MODEL}/parameters" in problem.message


def test_a_model_with_neither_name_nor_parameters_is_refused_by_the_schema() -> None:
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(named({"architecture": {"layers": 32, "hidden": 4096, "heads": 32}}))

    assert {p.pointer for p in refused.value.problems} == {f"{TRAINING_MODEL}/parameters", f"{TRAINING_MODEL}/name"}


# --- the command line -----------------------------------------------------------------------------------


def _evaluate(tmp_path: Path, submission: dict[str, Any]) -> tuple[int, str]:
    path = tmp_path / "submission.json"
    path.write_text(json.dumps(submission))
    result = CliRunner().invoke(main, ["evaluate", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def test_the_cli_refuses_an_unknown_name_alone_with_exit_2_and_did_you_mean(tmp_path: Path) -> None:
    code, output = _evaluate(tmp_path, named({"name": "Qwen2.5-70B"}))

    assert code == 2
    assert f"{TRAINING_MODEL}/name: model 'Qwen2.5-70B' is not in the model catalogue" in output
    assert "did you mean Qwen2.5-7B, Qwen2.5-72B, Qwen2.5-32B?" in output


def test_the_cli_evaluates_a_model_given_by_name_alone(tmp_path: Path) -> None:
    code, output = _evaluate(tmp_path, named({"name": "Llama-3-70B"}))

    assert code in (0, 1) and "training-objective" in output


# --- mixture of experts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("spelling", "name"), [
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"), ("mixtral-8x7b", "Mixtral-8x7B"),
    ("mistralai/Mixtral-8x22B-v0.1", "Mixtral-8x22B"), ("Qwen/Qwen3-235B-A22B", "Qwen3-235B-A22B"),
    ("qwen3-30b-a3b", "Qwen3-30B-A3B"), ("Qwen/Qwen2-57B-A14B-Instruct", "Qwen2-57B-A14B"),
    ("allenai/OLMoE-1B-7B-0924", "OLMoE-1B-7B")])
def test_a_mixture_of_experts_is_found_by_its_usual_spellings(spelling: str, name: str) -> None:
    assert load_catalogue().model(spelling) is MODELS[name]


def test_a_mixture_of_experts_by_name_fills_its_experts_member_by_member_with_the_config_cited() -> None:
    inputs = Inputs(named({"name": "Qwen/Qwen2-57B-A14B", "architecture": {"experts": {"active": 4}}}))
    experts = parse_job(inputs).training.model.architecture.experts

    assert (experts.count.value, experts.ffn_hidden.value, experts.shared.value, experts.shared_ffn_hidden.value) == (
        64, 2560, 1, 20480)
    assert (experts.count.source, experts.active.value, experts.active.source) == ("vendor_limit", 4, "assumption")
    assert experts.dense_layers.value == 0 and not experts.dense_layers.stated  # the schema's default
    filled = {fill.pointer: fill for fill in inputs.fills}
    assert f"{TRAINING_MODEL}/architecture/experts/active" not in filled
    assert "Qwen2-57B-A14B/blob/main/config.json" in filled[f"{TRAINING_MODEL}/architecture/experts/count"].ref


def test_training_objective_shows_the_total_and_the_active_parameters_of_mixtral_by_name() -> None:
    record = evaluate(named({"name": "Mixtral-8x7B"}), now=AT)

    evidence = check(record, "training-objective")["evidence"]
    # The announcement's 46.7B total fills parameters; the architecture counts 46,702,792,704 and 12,879,925,248.
    assert evidence["parameters"] == 46_700_000_000
    assert (evidence["parameters_from_architecture"], evidence["active_parameters"]) == (46_702_792_704,
                                                                                        12_879_925_248)
    assert evidence["architecture"].endswith("8 experts (2 active) of ffn 14336")
    assert "12,879,925,248 active per token" in check(record, "training-objective")["message"]


def test_a_stated_size_far_from_the_experts_total_warns_as_for_a_dense_model() -> None:
    # Mixtral stated at its active size: 12.9e9 against the 46.7B the architecture counts is 72 % apart.
    architecture = copy.deepcopy(MODELS["Mixtral-8x7B"]["architecture"])
    result = check(evaluate(named({"name": "Mixtral-8x7B", "parameters": 12.9e9, "architecture": architecture}),
                            now=AT), "training-objective")

    assert result["rule"] == "parameters-disagree-with-architecture"
    assert result["evidence"]["parameter_mismatch_fraction"] == pytest.approx(1 - 12.9e9 / 46_702_792_704)


@pytest.mark.parametrize("model", [{"name": "deepseek-ai/DeepSeek-V3"},
                                   {"name": "DeepSeek-R1", "parameters": 671e9, "architecture": {"layers": 61}}])
def test_deepseek_v3_is_refused_by_name_because_its_latent_attention_cannot_be_expressed(model: dict) -> None:
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(named(model))

    [problem] = refused.value.problems
    assert problem.pointer == f"{TRAINING_MODEL}/name"
    assert "multi-head latent attention" in problem.message and "kv_lora_rank 512" in problem.message
    assert "DeepSeek-V3/blob/main/config.json" in problem.message


def test_deepseek_v3_beside_its_parameters_alone_is_a_label() -> None:
    validate_submission(named({"name": "DeepSeek-V3", "parameters": 671e9}))


@pytest.mark.parametrize(("experts", "layers", "pointer", "words"), [
    ({"count": 8, "active": 9, "ffn_hidden": 14336}, 32, "experts/active", "9 active experts of 8"),
    ({"count": 8, "active": 2, "ffn_hidden": 14336, "dense_layers": {"value": 32}}, 32, "experts/dense_layers",
     "32 leading dense layers of 32")])
def test_an_experts_member_that_contradicts_itself_is_refused_at_its_pointer(experts: dict, layers: int,
                                                                              pointer: str, words: str) -> None:
    architecture = {"layers": layers, "hidden": 4096, "heads": 32, "experts": experts}
    with pytest.raises(InvalidSubmission) as refused:
        validate_submission(named({"name": "our-moe", "parameters": 46.7e9, "architecture": architecture}))

    [problem] = refused.value.problems
    assert problem.pointer == f"{TRAINING_MODEL}/architecture/{pointer}" and words in problem.message
