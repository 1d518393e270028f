"""The highest published, measured training MFU a modelled run is held against, in the publisher's FLOP convention.

A published MFU (or model TFLOP/s per GPU) is only comparable with another counted the same way. The sources
count the model FLOPs of one training token in one of three ways (docs/mfu-envelope-sources.md §0), with N all
parameters (embeddings included), E the input-embedding parameters, L layers, s the sequence length, h hidden:

* ``palm``: 6·N + 12·L·s·h. PaLM (Chowdhery et al. 2022, arXiv 2204.02311) Appendix B; quotecheck's own MFU
  (rules/estimates/training_time/step_time.py) and MosaicML llm-foundry's benchmark table
  (scripts/train/benchmarking/README.md: ``flops_per_token = 2 * n_params``,
  ``attn_flops_per_seq = n_layers * 2 * 2 * (d_model * (seq_len**2))``, ``mfu = (3 * flops_per_seq + 3 *
  attn_flops_per_seq) * seq_per_sec / (gpu_num * GPU_AVAILABLE_FLOPS)``).
* ``A``: 6·(N − E) + 12·L·s·h. torchtitan ``torchtitan/models/llama3/model.py`` @ 820504e2
  (``num_flops_per_token = 6 * (nparams - nparams_embedding) + 12 * l * h * q * t``, "we follow the convention
  and do not account for sparsity in causal attention"); Megatron-LM ``megatron/training/training.py`` @ f2e5db40
  ``num_floating_point_operations`` (12·B·s·L·h²·((1 + groups/heads + s/h)·q/h + ffn/h·gated + V/(2·L·h)):
  non-causal attention, the logit layer counted once, the input embedding not at all); NeMo's tables up to 25.07
  (711e12 FLOP/s ÷ 12,273 tokens/s = 57.93 GFLOP per Llama-3-8B token at s = 8192).
* ``B``: 6·(N − E) + 6·L·s·h, causal attention counted at half. Megatron-Bridge
  ``src/megatron/bridge/training/utils/flop_utils.py`` and its performance tables from 25.09 (744e12 ÷ 14,451 =
  51.48 GFLOP per Llama-3-8B token at 8192).

E is the input embedding V·h of an untied model. A tied model's one embedding matrix is also its output layer,
whose logit GEMM every convention counts (Megatron-LM's V/(2·L·h) term, llm-foundry's n_params of tied MPT), so
E is 0 there. The envelope table (catalogue ``published_mfu_envelope``) stores, per row, the source's TFLOP/s per
GPU, its MFU, the dense peak it was divided by (the bf16 peak, for fp8 runs too) and the source's convention; a
modelled rate is converted into each row's convention and over each row's peak before it is compared. Several
rows may cover one size class, GPU and precision (one per convention): the run is beyond the envelope only when
it is beyond every one of them, so the row it is held against is the one its modelled rate is the smallest
multiple of.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rules.estimates._args import require_choice, require_non_negative, require_positive, require_positive_int
from rules.estimates.model.parameters import active_parameters
from rules.estimates.model.shapes import ModelShape
from rules.units import TFLOPS

CONVENTIONS: Final = ("palm", "A", "B")
# Forward + backward FLOPs per parameter per token (Kaplan et al. 2020 §2.1: C ≈ 6·N·D).
_PARAMETER_FLOPS: Final = 6
# Attention FLOPs per token in units of L·s·h: 12 counting the full score matrix (PaLM Appendix B), 6 the causal half.
_ATTENTION_FLOPS: Final = {"palm": 12, "A": 12, "B": 6}
_COUNTS_INPUT_EMBEDDING: Final = {"palm": True, "A": False, "B": False}
# The row precision a job's MFU precision (StepTime.mfu_precision) is held against.
ENVELOPE_PRECISIONS: Final = ("bf16", "fp8")


@dataclass(frozen=True)
class TokenFlopShape:
    """What the model FLOPs of one token depend on: the parameter counts, the attention shape and the sequence."""

    parameters: float  # N, every parameter, embeddings included
    input_embedding_parameters: float  # E: V·h of an untied model, 0 of a tied one
    layers: int
    sequence_length: int
    hidden: int


def token_flop_shape(shape: ModelShape, sequence_length: int) -> TokenFlopShape:
    """Returns the FLOP shape of ``shape`` at ``sequence_length``: N counted as the model's parameters are (Hugging
    Face modeling_llama.py, rules/estimates/model/parameters.py; torchtitan sums ``model.parameters()`` alike),
    E = V·h untied and 0 tied (see the module docstring). Of a mixture of experts N is the parameters a token runs
    through (``active_parameters``, as Megatron-LM's num_floating_point_operations counts --moe-router-topk experts):
    its routed experts' FLOPs are k of E, so its size class and MFU are those of its active parameters."""
    require_positive_int("sequence_length", sequence_length)
    require_positive_int("vocab", shape.vocab)
    embedding = 0 if shape.tied_embeddings else shape.vocab * shape.hidden
    return TokenFlopShape(float(active_parameters(shape)), float(embedding), shape.layers, sequence_length,
                          shape.hidden)


def model_flops_per_token(convention: str, shape: TokenFlopShape) -> float:
    """Returns the model FLOPs of one training token as ``convention`` (palm, A or B) counts them.

    Llama-3-8B at s = 8192 (N 8,030,261,248, E 525,336,576, L 32, h 4096): palm 61.07, A 57.91, B 51.47 GFLOP
    (docs/mfu-envelope-sources.md §0; NeMo 24.07's 711 TFLOP/s at 12,273 tokens/s is 57.93, Megatron-Bridge 25.11's
    744 at 14,451 is 51.48).
    """
    require_choice("convention", convention, CONVENTIONS)
    require_positive("parameters", shape.parameters)
    require_non_negative("input_embedding_parameters", shape.input_embedding_parameters)
    require_positive_int("layers", shape.layers)
    require_positive_int("sequence_length", shape.sequence_length)
    require_positive_int("hidden", shape.hidden)
    counted = shape.parameters if _COUNTS_INPUT_EMBEDDING[convention] else (
        shape.parameters - shape.input_embedding_parameters)
    require_positive("parameters without the input embedding", counted)
    attention = _ATTENTION_FLOPS[convention] * shape.layers * shape.sequence_length * shape.hidden
    return float(_PARAMETER_FLOPS * counted + attention)


def mfu_in_convention(tokens_per_s_per_gpu: float, convention: str, shape: TokenFlopShape, peak_tflops: float) -> float:
    """Returns tokens/s per GPU × ``convention``'s FLOPs per token ÷ ``peak_tflops``: the MFU as that source counts
    it, over the peak it divided by."""
    require_positive("tokens_per_s_per_gpu", tokens_per_s_per_gpu)
    require_positive("peak_tflops", peak_tflops)
    return tokens_per_s_per_gpu * model_flops_per_token(convention, shape) / (peak_tflops * TFLOPS)


@dataclass(frozen=True)
class SizeClass:
    """A model-size class of the envelope table: parameters in [min_parameters, max_parameters)."""

    name: str
    min_parameters: float
    max_parameters: float | None  # None: no upper bound

    def holds(self, parameters: float) -> bool:
        return parameters >= self.min_parameters and (self.max_parameters is None or parameters < self.max_parameters)


@dataclass(frozen=True)
class EnvelopeRow:
    """One published, measured, end-to-end training run: the highest for its size class, GPU and precision in its
    FLOP convention (catalogue ``published_mfu_envelope.rows``)."""

    size_class: str
    architecture: str
    gpu_models: tuple[str, ...]  # the catalogued GPUs it covers; empty: every GPU of the architecture
    precision: str  # bf16 or fp8
    tflops_per_gpu: float  # model TFLOP/s per GPU as published (or derived, see the catalogue's tflops_basis)
    mfu: float  # as published, or TFLOP/s ÷ peak_tflops (the catalogue's mfu_basis)
    peak_tflops: float  # the dense peak the MFU divides by (the bf16 peak, for fp8 runs too)
    convention: str  # palm, A or B
    model: str
    gpu: str
    gpus: int | None
    sequence_length: int
    layout: str
    source: str

    def covers(self, architecture: str | None, gpu_model: str | None, precision: str) -> bool:
        return (self.architecture == architecture and self.precision == precision
                and (not self.gpu_models or gpu_model in self.gpu_models))

    def run_words(self) -> str:
        """Returns the run in words: "GPT 7.1B (Megatron-Core r0.8.0) on 96 × H100 SXM5, TP2 DP48, sequence 4096"."""
        count = f"{self.gpus:,} × " if self.gpus is not None else ""
        return f"{self.model} on {count}{self.gpu}, {self.layout}, sequence {self.sequence_length:,}"

    def summary(self) -> dict[str, Any]:
        """Returns the row as the record shows it."""
        return {"size_class": self.size_class, "architecture": self.architecture, "gpu_models": list(self.gpu_models),
                "precision": self.precision, "tflops_per_gpu": self.tflops_per_gpu, "mfu": self.mfu,
                "peak_tflops": self.peak_tflops, "convention": self.convention, "run": self.run_words(),
                "source": self.source}


@dataclass(frozen=True)
class EnvelopeTable:
    """The catalogue's envelope: its size classes and rows."""

    size_classes: tuple[SizeClass, ...]
    rows: tuple[EnvelopeRow, ...]

    def size_class(self, parameters: float) -> SizeClass | None:
        require_positive("parameters", parameters)
        return next((size for size in self.size_classes if size.holds(parameters)), None)

    def rows_for(self, size_class: str, architecture: str | None, gpu_model: str | None,
                 precision: str) -> tuple[EnvelopeRow, ...]:
        """Returns the rows of ``size_class`` that cover the GPU (its architecture, or the row's named GPUs) at
        ``precision``."""
        require_choice("precision", precision, ENVELOPE_PRECISIONS)
        return tuple(row for row in self.rows
                     if row.size_class == size_class and row.covers(architecture, gpu_model, precision))


def table_from_data(table: Mapping[str, Any]) -> EnvelopeTable:
    """Returns the envelope table of the catalogue's ``published_mfu_envelope`` section
    (schemas/catalogue.schema.json validates it)."""
    classes = tuple(SizeClass(name, float(bounds["min_parameters"]),
                              None if bounds["max_parameters"] is None else float(bounds["max_parameters"]))
                    for name, bounds in table["size_classes"].items())
    rows = tuple(EnvelopeRow(size_class=row["size_class"], architecture=row["architecture"],
                             gpu_models=tuple(row.get("gpu_models", ())), precision=row["precision"],
                             tflops_per_gpu=float(row["tflops_per_gpu"]), mfu=float(row["mfu"]),
                             peak_tflops=float(row["peak_tflops"]), convention=row["convention"],
                             model=row["run"]["model"], gpu=row["run"]["gpu"], gpus=row["run"]["gpus"],
                             sequence_length=int(row["run"]["sequence_length"]), layout=row["run"]["layout"],
                             source=row["source"])
                 for row in table["rows"])
    return EnvelopeTable(classes, rows)


@dataclass(frozen=True)
class EnvelopeComparison:
    """A modelled rate held against one envelope row, in that row's convention and over its peak."""

    row: EnvelopeRow
    modelled_mfu: float  # the modelled rate's MFU as the row's source counts it
    beyond: float  # modelled_mfu − row.mfu, in MFU points (fractions of the peak); negative inside the envelope
    rate_over_envelope: float  # modelled rate ÷ the rate at the row's MFU (modelled_mfu ÷ row.mfu)


def compare(tokens_per_s_per_gpu: float, shape: TokenFlopShape, row: EnvelopeRow) -> EnvelopeComparison:
    """Returns the modelled rate against ``row``: its MFU in the row's convention over the row's peak."""
    modelled = mfu_in_convention(tokens_per_s_per_gpu, row.convention, shape, row.peak_tflops)
    require_positive("envelope mfu", row.mfu)
    return EnvelopeComparison(row, modelled, modelled - row.mfu, modelled / row.mfu)


def binding_comparison(tokens_per_s_per_gpu: float, shape: TokenFlopShape,
                       rows: Sequence[EnvelopeRow]) -> EnvelopeComparison | None:
    """Returns the comparison with the row the modelled rate is the smallest multiple of (the highest published
    MFU once each row is counted as the job's own model counts its FLOPs), or None without rows."""
    comparisons = [compare(tokens_per_s_per_gpu, shape, row) for row in rows]
    return min(comparisons, key=lambda c: c.rate_over_envelope, default=None)


def days_at_envelope(run_days: float, queue_wait_days: float, rate_over_envelope: float) -> float:
    """Returns the days to result were the run to reach the envelope's MFU instead of the modelled one: the queue
    wait, which does not move, plus the run's days × modelled rate ÷ envelope rate (as the band's days in
    time-to-result)."""
    require_non_negative("run_days", run_days)
    require_non_negative("queue_wait_days", queue_wait_days)
    require_positive("rate_over_envelope", rate_over_envelope)
    return queue_wait_days + run_days * rate_over_envelope
