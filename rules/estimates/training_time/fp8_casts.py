"""What an fp8-mixed step pays besides its faster GEMMs: the casts of every fp8 GEMM input, by scaling recipe.

Counting only (HBM bytes and kernels; ``rules.estimates.training_time.step_time`` times them at the triad bandwidth
and the launch cost). Transformer Engine runs the layer's four GEMMs (QKV, projection, MLP up, MLP down) in fp8 and
keeps the output layer and the attention core in 16 bits (``step_figures.achievable_rates``). Each fp8 GEMM input is
quantised from its 16-bit tensor (read 2 B, write 1 B per element) and, because "Hopper only supports TN GEMMs for
FP8. 'Column-wise data' is transpose of data" (NVIDIA/TransformerEngine ``transformer_engine/common/gemm/
cublaslt_gemm.cu`` L137 @ d0067d0d), also written transposed (1 B) for the GEMM of the backward that reduces over
the other dimension; TE's fused cast-transpose writes both in one kernel:

- forward, the input X of each GEMM (m × k): rowwise for the forward GEMM, columnwise (Xᵀ) for the weight gradient
  (``module/linear.py`` L386-389, L428-435: ``input_quantizer.set_usage(rowwise=True, columnwise=backward_needs_input
  ...)``); again in a forward that full recompute runs again;
- backward, the output gradient dY (m × n): rowwise for the data gradient, columnwise for the weight gradient
  (``linear.py`` L900-905: "dgrad GEMM requires row-wise usage, wgrad GEMM requires column-wise usage");
- the weights W (n × k): rowwise for the forward, columnwise (Wᵀ) for the data gradient (``linear.py`` L467-475). TE
  caches them across the micro-batches of a step when the framework passes ``is_first_microbatch`` (``linear.py``
  L1887-1898: "during FP8 training, it allows caching of the FP8 versions of the weights"; L479
  ``update_ws = is_first_microbatch is None or is_first_microbatch``), as Megatron-Core does; not under FSDP
  (L1958: no cache ``if is_first_microbatch is None or self.is_fsdp2``), and sharded weights (ZeRO-3, FSDP) are
  gathered and cast again for every micro-batch.

The recipes (``transformer_engine/common/recipe/__init__.py``; ``workload.training.fp8_recipe``):

- ``delayed``: ``DelayedScaling`` (L173-283), per-tensor scale from the amax history, TE's default on Hopper; the
  cast kernel records the amax as it quantises (``pytorch/csrc/quantizer.cpp`` L632-645, ``Float8Quantizer::quantize``:
  one ``nvte_quantize_v2``): 2 + 1 + 1 = 4 B per element, one kernel.
- ``current``: ``Float8CurrentScaling`` (L286-333), the scale from this tensor's own amax: an amax pass over the
  16-bit input first (``quantizer.cpp`` L1009-1011 ``nvte_compute_amax_with_config``, whose launch zeroes the amax
  and reduces it, ``common/recipe/current_scaling.cu`` L73-108), the scale (L1024), then the cast (L1028):
  2 + 2 + 1 + 1 = 6 B, four kernels.
- ``mxfp8``: ``MXFP8BlockScaling`` (L337-389): "each group of 32 consecutive values is scaled together using their
  own scaling factor. The type of the scaling factor is E8M0", and "Transformer Engine ... [computes] both versions
  ... from the high precision input" (the docstring; ``docs/examples/fp8_primer.ipynb``, "Handling transposes":
  "Blackwell Tensor Cores require MXFP8 data to be 'consecutive' over the reduction dimension"). OCP Microscaling
  Formats (MX) v1.0 Specification §5: blocks of k = 32 elements sharing one 8-bit E8M0 scale. Both directions with
  their scales: 2 + 2 × (1 + 1/32) = 4.0625 B, one kernel. MXFP8 Tensor Cores are Blackwell's (the primer:
  "Blackwell added support for NVFP4 and MXFP8 datatypes").

Left out: the amax all-reduce and scale update of delayed scaling (a few values per tensor), the fp8 all-gather of
sequence-parallel inputs (which halves those collectives' bytes), and TE's fusion of the cast into the layernorm
that feeds QKV and MLP up (counted here as its own cast-transpose, an upper bound of 2 B per element).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple

FP8_RECIPES: Final = ("delayed", "current", "mxfp8")
DEFAULT_FP8_RECIPE: Final = "delayed"  # Transformer Engine's DelayedScaling, its default recipe on Hopper
SIXTEEN_BIT_BYTES: Final = 2  # the tensor a cast reads
FP8_BYTES: Final = 1  # each quantised copy it writes
MX_BLOCK: Final = 32  # elements per E8M0 scale (OCP MX v1.0 §5)
MX_SCALE_BYTES: Final = 1
# Per cast: (extra passes reading the 16-bit tensor before the cast, kernels, scale bytes per element of each copy).
_RECIPE: Final = {"delayed": (0, 1, 0.0), "current": (1, 4, 0.0), "mxfp8": (0, 1, MX_SCALE_BYTES / MX_BLOCK)}
# Sharded weights are gathered, and so cast, for every micro-batch (and TE keeps no fp8 cache under FSDP).
PER_MICRO_BATCH_SHARDINGS: Final = ("zero3", "fsdp-full", "fsdp-hybrid")


class CastWork(NamedTuple):
    """HBM bytes and kernels of fp8 casts."""

    bytes: float
    kernels: int


def cast_bytes_per_element(recipe: str, transposed: bool = True) -> float:
    """Returns the HBM bytes of casting one 16-bit element to fp8 under ``recipe``: the read, any amax pass, and the
    rowwise copy with its scales (and the transposed one when ``transposed``)."""
    amax_passes, _, scale = _RECIPE[recipe]
    copies = 2 if transposed else 1
    return (1 + amax_passes) * SIXTEEN_BIT_BYTES + copies * (FP8_BYTES + scale)


def cast_kernels(recipe: str) -> int:
    """Returns the kernels one cast under ``recipe`` launches."""
    return _RECIPE[recipe][1]


def layer_casts(gemms: Iterable[tuple[float, float, float]], recipe: str, recompute: str,
                weight_gradients: bool = True) -> CastWork:
    """Returns one layer's activation casts for one micro-batch: each forward GEMM (m, n, k)'s input, m·k elements
    (twice under full recompute), and its output gradient, m·n elements, each with its transposed copy for the weight
    gradient (none when the weights are frozen: ``weight_gradients`` False)."""
    per_element = cast_bytes_per_element(recipe, transposed=weight_gradients)
    passes = 2 if recompute == "full" else 1
    elements, casts = 0.0, 0
    for m, n, k in gemms:
        elements += passes * m * k + m * n
        casts += passes + 1
    return CastWork(elements * per_element, casts * cast_kernels(recipe))


def weight_casts(gemms: Iterable[tuple[float, float, float]], recipe: str) -> CastWork:
    """Returns one cast of a layer's weights: each GEMM (m, n, k)'s n × k weight shard, rowwise and transposed."""
    shards = [n * k for _, n, k in gemms]
    return CastWork(sum(shards) * cast_bytes_per_element(recipe), len(shards) * cast_kernels(recipe))


def weight_casts_per_step(sharding: str, micro_batches: int) -> int:
    """Returns how often a step casts its weights: once when TE caches them across micro-batches, else for each."""
    return micro_batches if sharding in PER_MICRO_BATCH_SHARDINGS else 1
