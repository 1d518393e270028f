"""Seconds of one mixture-of-experts layer on one GPU, one micro-batch, forward + backward (the step model's
``StepTimeModel`` asks for it per expert layer; dense layers stay as ``step_time`` times them).

Counts from ``rules.estimates.training_time.expert_work``; rates as the dense layer's
(``rules.estimates.training_time.step_time_figures.Rates``):

- GEMMs: the attention's (QKV, projection), the router's, each local expert's at the shape tokens-per-expert gives (a
  grouped GEMM is the sum of its experts' GEMMs: Megatron-Core ``TEGroupedMLP``) and the shared experts', forward and
  both backward GEMMs (data gradient (m, k, n), weight gradient (n, k, m)), each at the GEMM sweep's rate for its shape
  (``kernel_rates.GemmSweep``), never faster than their HBM traffic allows (a small m reads the experts' weights for
  few rows); the forward again under full recompute.
- Attention core, norms, residuals, dropout, tensor- and context-parallel traffic as a dense layer's; the MLP's
  memory-bound operators over the routed copies' elements (``expert_work.mlp_equivalent_ffn``) plus the routing
  traffic (router logits, permute, unpermute); with expert_tensor 1 the MLP runs no tensor-parallel collectives, so
  the layer keeps the attention block's half of a dense layer's (Korthikanti et al. 2022 §4.2.2: each block runs the
  same collectives on the same s·b·h/c buffer).
- Expert-parallel all-to-all (dispatch and combine, forward and backward): the busiest rank receives L × the balanced
  share, so each takes L · S · (ep − 1)/ep bytes at the measured all-to-all bandwidth: inside one NVLink domain the
  NVLink per-direction rate × ``step_time.all_to_all.nvlink_fraction``, across domains the NIC line rate ×
  ``nic_fraction`` for the share that leaves the domain (DeepEP's bottleneck bandwidths, catalogue
  ``step_time.all_to_all``), the slower of the two. Nothing hides it: Megatron-Core's all-to-all dispatcher runs
  dispatch and combine on the compute stream by default (its overlap of expert-parallel communication with another
  micro-batch's compute, ``--overlap-moe-expert-parallel-comm``, is opt-in and not modelled).
"""

from __future__ import annotations

from dataclasses import replace

from rules.estimates.communication.collectives import collective_s, group_busbw_gbs
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.expert_work import (
    ExpertGemm,
    attention_gemms,
    expert_layer_work,
    flat_gemms,
    gemm_bytes,
    gemm_flops,
    mlp_equivalent_ffn,
)
from rules.estimates.training_time.fp8_casts import layer_casts
from rules.estimates.training_time.kernel_rates import attention_core_s
from rules.estimates.training_time.step_results import StageTime
from rules.estimates.training_time.step_time_figures import TERA, Efficiencies, Rates
from rules.estimates.training_time.transformer_work import (
    BACKWARD_GEMM_FACTOR,
    LayerSlice,
    layer_work,
)

GIGA = 1e9


def all_to_all_s(size_bytes: float, ranks: int, load_factor: float, rates: Rates) -> float:
    """Returns one all-to-all of ``size_bytes`` per GPU over ``ranks`` consecutive ranks at the busiest rank's load
    (:func:`all_to_all_time_s` at the rates' all-to-all bandwidths)."""
    return all_to_all_time_s(size_bytes, ranks, load_factor, rates.domain_gpus, rates.all_to_all_domain_gbs,
                             rates.all_to_all_nic_gbs)


def all_to_all_time_s(size_bytes: float, ranks: int, load_factor: float, domain_gpus: int, domain_gbs: float,
                      nic_gbs: float) -> float:
    """Returns one all-to-all of ``size_bytes`` per GPU over ``ranks`` consecutive ranks at the busiest rank's load.

    Each GPU sends S/n to every other rank: (d − 1)/n of S over NVLink to the d − 1 peers of its NVLink domain
    (d = min(n, ``domain_gpus``)) at ``domain_gbs`` and (n − d)/n over its NIC to the others at ``nic_gbs`` (GB/s,
    DeepEP's bottleneck bandwidths: :func:`rules.estimates.training_time.step_time_figures.all_to_all_gbs`); the
    collective takes the slower link's time, × ``load_factor`` for the busiest receiver. Ranks within one domain
    need no NIC rate."""
    if ranks == 1 or size_bytes == 0:
        return 0.0
    inside = min(ranks, domain_gpus)
    nvlink_s = size_bytes * (inside - 1) / ranks / (domain_gbs * GIGA)
    nic_s = size_bytes * (ranks - inside) / ranks / (nic_gbs * GIGA) if ranks > inside else 0.0
    return load_factor * max(nvlink_s, nic_s)


def _gemms_s(gemms: tuple[ExpertGemm, ...], eff: Efficiencies, flops_s: float) -> tuple[float, float]:
    """Returns (forward, backward) seconds of ``gemms`` at the sweep's rate for each shape."""
    gemm = eff.gemm_sweep.seconds
    forward = sum(g.count * gemm(g.m, g.n, g.k, flops_s) for g in gemms)
    backward = sum(g.count * (gemm(g.m, g.k, g.n, flops_s) + gemm(g.n, g.k, g.m, flops_s)) for g in gemms)
    return forward, backward


def expert_layer_time(shape: ModelShape, part: LayerSlice, recompute: str, precision: str, expert: int,
                      load_factor: float, rates: Rates, eff: Efficiencies) -> tuple[StageTime, float]:
    """Returns (one mixture-of-experts layer's StageTime for one micro-batch, its GEMMs' FLOP/s) on one GPU; under
    fp8-mixed with the casts of every GEMM's inputs and output gradients (``fp8_casts.layer_casts``)."""
    work = expert_layer_work(shape, part, expert, load_factor, recompute)
    gemms = attention_gemms(shape, part) + work.gemms
    forward, backward = _gemms_s(gemms, eff, rates.gemm_flops_s)
    passes = 1 + BACKWARD_GEMM_FACTOR + (1 if recompute == "full" else 0)
    gemm_s = forward * (2 if recompute == "full" else 1) + backward
    dense_s = max(gemm_s, passes * gemm_bytes(gemms) / rates.hbm_bytes_s)
    dense_flops = gemm_flops(gemms) * passes
    # The layer around the MLP, and the MLP's memory-bound operators over the routed elements, as a dense layer's.
    equivalent = replace(shape, experts=None, ffn_hidden=mlp_equivalent_ffn(shape, part, load_factor))  # type: ignore[arg-type]
    around = layer_work(equivalent, part, recompute)
    attention_s = attention_core_s(shape, part, around.attention_flops, eff.attention, rates.attention_scale * TERA,
                                   eff.gemm_sweep, rates.attention_flops_s)
    collectives = around.tp_collectives[:len(around.tp_collectives) // 2]  # the attention block's
    tp_busbw = group_busbw_gbs(part.tensor, 1, rates.domain_gpus, rates.domain_busbw_gbs, rates.nic_busbw_gbs)
    tp = sum(collective_s(kind, size, part.tensor, tp_busbw, eff.collective_half_bytes) for kind, size in collectives)
    if part.tensor_comm_overlap:
        tp = max(0.0, tp - dense_s)
    cp_exposed = 0.0
    if part.context > 1:
        ring_gbs = rates.link_gbs if part.tensor * part.context <= rates.domain_gpus else rates.nic_busbw_gbs
        cp_exposed = max(0.0, around.cp_exchange_bytes / (ring_gbs * GIGA) - attention_s)
    kernels = around.kernels - (len(around.tp_collectives) - len(collectives)) + work.routing_kernels
    memory_bytes = around.memory_bytes + work.routing_bytes
    if precision == "fp8-mixed":
        casts = layer_casts(flat_gemms(gemms), part.fp8_recipe, recompute)
        memory_bytes, kernels = memory_bytes + casts.bytes, kernels + casts.kernels
    memory_s = memory_bytes / rates.hbm_bytes_s + kernels * eff.kernel_launch_s
    ep_s = work.all_to_alls * all_to_all_s(work.all_to_all_bytes, expert, load_factor, rates)
    layer = StageTime(compute_s=dense_s + attention_s, memory_s=memory_s, tp_s=tp, cp_exposed_s=cp_exposed, ep_s=ep_s)
    return layer, dense_flops / dense_s
