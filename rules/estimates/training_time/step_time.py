"""Training step time of a parallel layout on a given GPU, modelled operator by operator from the work of one GPU.

The model follows Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", arXiv 2104.04473) and Korthikanti et al. 2022 ("Reducing Activation Recomputation in
Large Transformer Models", arXiv 2205.05198). Per layer and micro-batch
(``rules.estimates.training_time.transformer_work``), each operator at a measured kernel rate
(``rules.estimates.training_time.kernel_rates``): every GEMM, forward and both backward GEMMs, at the GEMM sweep's
rate for its (m, n, k) × the GPU's best matmul × the in-step fraction; FlashAttention at its measured forward +
backward rate for the head dimension and sequence (without FlashAttention the score and context GEMMs at their
shapes); memory-bound operators at the GPU's measured HBM bandwidth, as the job's kernels build them
(``workload.training.kernels``: fused, compiled or eager, ``rules.estimates.training_time.memory_bound``), with the
casts of fp8 GEMM inputs under fp8-mixed (``workload.training.fp8_recipe``,
``rules.estimates.training_time.fp8_casts``); a launch per kernel; tensor-parallel
collectives on the NVLink domain, hidden behind the GEMMs when the job overlaps them
(``parallelism.tensor_comm_overlap``). Per pipeline stage the sum over its layers (the last stage adds the output
layer and loss); per step

    step = (m + (p − 1)/v) · stage + point-to-point sends + exposed data-parallel communication + optimizer
           + fp8 weight casts (once per step, or per micro-batch when the weights are sharded)

with m micro-batches per pipeline, p stages and v virtual stages (the 1F1B bubble is (p − 1)/(v·m) of the
steady state, Narayanan et al. §2.2.1–2.2.2). Nothing overlaps except what is stated: data-parallel
collectives hide behind the passes they can run under (the gradient reduction behind the backward pass, the
parameter gathers behind the forward: of the last and first micro-batch when they run once per step, of every
micro-batch when they run in each, as Megatron-LM's --overlap-grad-reduce / --overlap-param-gather and PyTorch
DDP and FSDP schedule them), tensor-parallel collectives as above, and the context-parallel K/V ring behind the
attention it feeds (ring attention, Liu et al. 2023, arXiv 2310.01889). A mixture of experts' expert layers:
``rules.estimates.training_time.expert_step`` (router, grouped expert GEMMs, expert-parallel all-to-all, none hidden).

Collectives take factor(n)·(S + S½)/busbw (nccl-tests ``doc/PERFORMANCE.md`` factors; S½ the message size
at which a collective reaches half its large-message bus bandwidth, a latency term fitted to all_reduce_perf
sweeps). Every rate and efficiency is an ``Efficiencies`` field whose defaults come from the catalogue and policy
(``rules.estimates.training_time.step_time_figures.efficiencies_from_data``); measured figures (``Measured``) replace
them.

Utilisation follows PaLM (Chowdhery et al. 2022, arXiv 2204.02311, Appendix B): MFU counts 6·N + 12·L·s·h FLOPs per
token (N: a mixture of experts' active ones) and no recompute; hardware FLOPs utilisation counts the recomputed forward
as Korthikanti et al. 2022 Appendix A do.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import cache
from typing import Final

from rules.errors import InconsistentInput
from rules.estimates._args import require_fraction, require_positive_int
from rules.estimates.communication.collectives import (
    PassTimes,
    collective_s,
    group_busbw_gbs,
)
from rules.estimates.model.hardware import NodeSpec
from rules.estimates.model.layout import Layout
from rules.estimates.model.shapes import ModelShape
from rules.estimates.training_time.compute import training_flops_per_token
from rules.estimates.training_time.expert_step import expert_layer_time
from rules.estimates.training_time.expert_work import (
    attention_gemms,
    expert_layer_work,
    flat_gemms,
    moe_matrix_parameters,
    routed_matrix_parameters,
)
from rules.estimates.training_time.fp8_casts import (
    layer_casts,
    weight_casts,
    weight_casts_per_step,
)
from rules.estimates.training_time.kernel_rates import attention_core_s
from rules.estimates.training_time.step_layout import (
    GRADIENT_BYTES,
    dp_group_times,
    layer_slice,
    require_step_layout,
)
from rules.estimates.training_time.step_results import StageTime, StepTime, StepTimeBreakdown
from rules.estimates.training_time.step_time_figures import (
    TERA,
    Efficiencies,
    Measured,
    Rates,
    achievable_rates,
    require_step_figures,
)
from rules.estimates.training_time.transformer_work import (
    ACTIVATION_BYTES,
    BACKWARD_GEMM_FACTOR,
    LayerSlice,
    check_shape,
    layer_gemms,
    layer_work,
    matrix_parameters,
    output_layer_work,
)

_SHARDED_OPTIMIZER: Final = ("zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid")
# AdamW step per parameter, memory-bound: read fp32 master, m, v (12) and the gradient (2), write master,
# m, v (12) and the 16-bit weight copy (2), plus one more read of the gradient for the global norm (2).
ADAMW_BYTES_PER_PARAM: Final = 30
GIGA: Final = 1e9


class StepTimeModel:
    """The step-time model of one model shape at one sequence length on one GPU; ``evaluate`` gives the step time
    of a layout. The sequence length is the job's batch, not the shape's (rules/estimates/model/shapes.py).

    What depends on few layout degrees (the per-layer times, the data-parallel collectives, the rates
    per precision) is memoised per instance, so that evaluating thousands of layouts of the same model
    (``rules.estimates.search.layout_search``) costs little more than the arithmetic that combines them.
    """

    def __init__(self, shape: ModelShape, sequence_length: int, hardware: NodeSpec, efficiencies: Efficiencies,
                 measured: Measured | None = None, adapter_fraction: float | None = None,
                 load_factor: float = 1.0) -> None:
        """``adapter_fraction``: for an adapter fine-tune (objective ``adapter``), trainable ÷ all parameters; the
        model's own weights are frozen (see ``_per_layer_of``, ``_dp_comm_of`` and ``_optimizer_s``). ``load_factor``:
        of a mixture of experts, the busiest expert rank's routed tokens over the balanced mean (the policy's
        ``memory.moe``; ``rules.estimates.training_time.expert_step``)."""
        check_shape(shape)
        require_positive_int("sequence_length", sequence_length)
        if adapter_fraction is not None:
            require_fraction("adapter_fraction", adapter_fraction)
        self.adapter_fraction = adapter_fraction
        self.shape, self.sequence_length = shape, sequence_length
        self.hardware = hardware
        require_step_figures(hardware)
        self.efficiencies = efficiencies
        self.measured = measured or Measured()
        self.dense_shape = replace(shape, experts=None)  # the dense layers (all of a dense model's)
        self.load_factor = load_factor
        moe = shape.experts is not None
        self.parameters = moe_matrix_parameters(shape, active=False) if moe else matrix_parameters(shape)
        self.active = moe_matrix_parameters(shape, active=True) if moe else self.parameters  # FLOPs per token: 6·N
        self.routed = routed_matrix_parameters(shape) if moe else 0.0  # split over the expert-parallel ranks
        # the parameters that get gradients, reductions and an optimizer step
        self.trainable = self.parameters if adapter_fraction is None else self.parameters * adapter_fraction
        self._rates = cache(self._rates_of)
        self._per_layer = cache(self._per_layer_of)
        self._expert_layer = cache(self._expert_layer_of)
        self._dp_comm = cache(self._dp_comm_of)
        self._flops_per_token = cache(self._flops_per_token_of)

    def _rates_of(self, precision: str) -> Rates:
        return achievable_rates(self.hardware, self.efficiencies, self.measured, precision)

    def _flops_per_token_of(self, recompute: str) -> float:
        shape = self.shape
        return training_flops_per_token(self.active, recompute, shape.layers, self.sequence_length,
                                        shape.hidden)

    def _per_layer_of(self, part: LayerSlice, recompute: str, precision: str) -> tuple[StageTime, StageTime, float]:
        """Return (one transformer layer, the output layer, the layer's GEMM FLOP/s) for one micro-batch, forward +
        backward, operator by operator.

        GEMMs (``layer_gemms``): the forward, again under full recompute, and the data- and weight-gradient GEMMs of
        the backward, each at its shape's rate, never faster than their HBM traffic allows. An adapter fine-tune's
        frozen weights get no weight-gradient GEMMs (the data gradients still flow through them, as in PEFT's LoRA);
        its adapters' own GEMMs add 6 FLOPs per trainable parameter and token, at the forward GEMMs' average rate.
        The attention core as ``kernel_rates.attention_core_s``; the memory-bound operators' bytes at the HBM rate
        plus one launch per kernel (``layer_work``, by ``part.kernels``), and under fp8-mixed the casts of the fp8
        GEMMs' inputs and output gradients (``fp8_casts.layer_casts``); the tensor-parallel collectives, less the GEMM
        time they run under when overlapped."""
        rates, eff, t, c = self._rates(precision), self.efficiencies, part.tensor, part.context
        gemm, flops_s = eff.gemm_sweep.seconds, rates.gemm_flops_s
        work = layer_work(self.dense_shape, part, recompute)
        gemms = layer_gemms(self.dense_shape, part)
        forward = sum(gemm(m, n, k, flops_s) for m, n, k in gemms)
        dense_flops = work.dense_flops
        if self.adapter_fraction is None:
            backward = sum(gemm(m, k, n, flops_s) + gemm(n, k, m, flops_s) for m, n, k in gemms)
        else:
            backward = sum(gemm(m, k, n, flops_s) for m, n, k in gemms)
            forward_flops = sum(2 * m * n * k for m, n, k in gemms)
            adapter_flops = 3 * self.adapter_fraction * forward_flops  # 6 per trainable parameter and token
            backward += adapter_flops * forward / forward_flops
            dense_flops -= forward_flops - adapter_flops  # no weight gradients of the frozen weights
        dense_s = max(forward * (2 if recompute == "full" else 1) + backward, work.dense_bytes / rates.hbm_bytes_s)
        attention_s = attention_core_s(self.dense_shape, part, work.attention_flops, eff.attention,
                                       rates.attention_scale * TERA, eff.gemm_sweep, rates.attention_flops_s)
        tp_busbw = group_busbw_gbs(t, 1, rates.domain_gpus, rates.domain_busbw_gbs, rates.nic_busbw_gbs)
        tp = sum(collective_s(kind, size, t, tp_busbw, eff.collective_half_bytes)
                 for kind, size in work.tp_collectives)
        if part.tensor_comm_overlap:
            tp = max(0.0, tp - dense_s)
        cp_exposed = 0.0
        if c > 1:
            ring_gbs = rates.link_gbs if t * c <= rates.domain_gpus else rates.nic_busbw_gbs
            cp_exposed = max(0.0, work.cp_exchange_bytes / (ring_gbs * GIGA) - attention_s)
        memory_bytes, kernels = work.memory_bytes, work.kernels
        if precision == "fp8-mixed":  # the casts of the fp8 GEMMs' inputs and output gradients (fp8_casts.py)
            casts = layer_casts(gemms, part.fp8_recipe, recompute, weight_gradients=self.adapter_fraction is None)
            memory_bytes, kernels = memory_bytes + casts.bytes, kernels + casts.kernels
        memory_s = memory_bytes / rates.hbm_bytes_s + kernels * eff.kernel_launch_s
        layer = StageTime(compute_s=dense_s + attention_s, memory_s=memory_s, tp_s=tp, cp_exposed_s=cp_exposed)
        shape = self.shape
        rows, vocab = part.micro_batch * part.sequence_length / c, shape.vocab / t
        h, sixteen_bit = shape.hidden, rates.attention_flops_s  # the output layer stays in 16 bits
        logits = gemm(rows, vocab, h, sixteen_bit) + gemm(rows, h, vocab, sixteen_bit)
        if self.adapter_fraction is None:  # an adapter fine-tune's output layer is frozen
            logits += gemm(vocab, h, rows, sixteen_bit)
        output = output_layer_work(shape, part)
        return layer, StageTime(logits, output.memory_bytes / rates.hbm_bytes_s, 0, 0), dense_flops / dense_s

    def _expert_layer_of(self, part: LayerSlice, recompute: str, precision: str,
                         expert: int) -> tuple[StageTime, float]:
        return expert_layer_time(self.shape, part, recompute, precision, expert, self.load_factor,
                                 self._rates(precision), self.efficiencies)

    def stage(self, part: LayerSlice, recompute: str, precision: str, pipeline: int, virtual_stages: int,
              expert: int = 1) -> StageTime:
        """Return one micro-batch on the slowest pipeline stage: its layers plus the output layer and loss. Of a mixture
        of experts, at expert-parallel degree ``expert``, the slowest stage's layers are expert layers
        (``expert_step.expert_layer_time``) but for the leading dense layers a single stage holds."""
        layer, output, _ = self._per_layer(part, recompute, precision)
        layers = self._stage_layers(pipeline, virtual_stages)
        parts = [(layers, layer)]
        if self.shape.experts is not None:
            moe_layers = min(layers, self.shape.expert_layers)
            moe = self._expert_layer(part, recompute, precision, expert)[0]
            parts = [(layers - moe_layers, layer), (moe_layers, moe)]
        return StageTime(compute_s=sum(n * x.compute_s for n, x in parts) + output.compute_s,
                         memory_s=sum(n * x.memory_s for n, x in parts) + output.memory_s,
                         tp_s=sum(n * x.tp_s for n, x in parts), cp_exposed_s=sum(n * x.cp_exposed_s for n, x in parts),
                         ep_s=sum(n * x.ep_s for n, x in parts))

    def _stage_layers(self, pipeline: int, virtual_stages: int) -> int:
        """Returns the layers of the slowest pipeline stage: ⌈L / (p·v)⌉ per virtual stage, v of them."""
        return math.ceil(self.shape.layers / (pipeline * virtual_stages)) * virtual_stages

    def least_step_s(self, stage: StageTime, micro_batches: int, pipeline: int, virtual_stages: int) -> float:
        """Returns a lower bound of :meth:`evaluate`'s step of a layout whose stage is ``stage``: its m steady-state
        stages and its (p − 1)/v bubble, without the sends, the exposed data-parallel collectives, the optimizer
        step and the fp8 weight casts (none negative), less 2⁻⁴⁰ of it, far more than the rounding of either sum. The
        layout search skips a layout whose bound is slower than the best it keeps
        (rules/estimates/search/layout_search.py)."""
        return (micro_batches + (pipeline - 1) / virtual_stages) * stage.total_s * (1 - 2.0**-40)

    def _p2p_s(self, layout: Layout, rates: Rates) -> float:
        """Return the pipeline sends on the critical path: 2·v per micro-batch (activation, gradient).

        Each send carries s·b·h/c activations; Megatron's scatter/gather optimisation (Narayanan et al.
        2021 §4.1) splits it over the t tensor-parallel ranks, each on its own link. Neighbouring stages
        are t·c·d ranks apart; inside one NVLink domain they use NVLink, else the NICs.
        """
        if layout.pipeline == 1:
            return 0.0
        t, c, d = layout.tensor, layout.context, layout.data_parallel
        size = layout.micro_batch * self.sequence_length / c * self.shape.hidden * ACTIVATION_BYTES / t
        same_domain = 2 * t * c * d <= rates.domain_gpus
        bandwidth = rates.link_gbs if same_domain else rates.nic_busbw_gbs
        return 2 * layout.virtual_stages * layout.micro_batches * size / (bandwidth * GIGA)

    def _dp_comm_of(self, sharding: str, tensor: int, pipeline: int, ranks: int, micro_batches: int,
                    precision: str, expert: int = 1, expert_ranks: int = 1) -> PassTimes:
        """Return the data-parallel collectives' seconds per step by the pass they run under (no embedding sync). A
        mixture of experts' routed experts, 1/(expert × p) of them per GPU, reduce apart over their ``expert_ranks``
        expert-data-parallel ranks (spaced ``expert`` apart), as ``collectives.step_communication`` counts them."""
        share = self.trainable / self.parameters
        groups = ((self.parameters - self.routed) / (tensor * pipeline), ranks, tensor), \
            (self.routed / (expert * pipeline), expert_ranks, expert)
        times = [dp_group_times(self._rates(precision), sharding, size, size * share, n, stride, micro_batches)
                 for size, n, stride in groups if size and n > 1]
        return PassTimes(sum(t.forward_s for t in times), max((t.forward_windows for t in times), default=0),
                         sum(t.backward_s for t in times), max((t.backward_windows for t in times), default=0))

    def _data_parallel(self, layout: Layout, rates: Rates, stage: StageTime) -> tuple[float, float]:
        """Return (data-parallel communication seconds, the part of it left exposed).

        Volumes per sharding strategy are ``rules.estimates.communication.collectives.communication_bytes_per_step``
        (ZeRO §7.2; per micro-batch for ZeRO-2/3 and FSDP) over the d·c ranks that hold replicas of the
        same shard (context-parallel ranks reduce their gradients together, as in Megatron-LM). Gradient
        reductions hide behind backward passes, parameter gathers behind forward passes (the forward is a third of
        a stage: backward GEMMs are twice the forward's, Narayanan et al. 2021 §5.1): a collective that runs once
        per step behind one micro-batch's pass (the last backward; the next step's first forward), one that runs
        in every micro-batch behind all of theirs. With p > 1 and tied embeddings the first and last stages also
        all-reduce the embedding gradient (Narayanan et al. 2021 §4), never hidden.
        """
        t, p = layout.tensor, layout.pipeline
        comm = self._dp_comm(layout.sharding, t, p, layout.data_parallel * layout.context, layout.micro_batches,
                             layout.precision, layout.expert, layout.expert_data_parallel)
        forward_pass = stage.total_s / (1 + BACKWARD_GEMM_FACTOR)
        exposed = (max(0.0, comm.forward_s - comm.forward_windows * forward_pass)
                   + max(0.0, comm.backward_s - comm.backward_windows * (stage.total_s - forward_pass)))
        total = comm.forward_s + comm.backward_s
        if p > 1 and self.shape.tied_embeddings:
            embedding = self.shape.vocab * self.shape.hidden / t * GRADIENT_BYTES
            sync = collective_s("all-reduce", embedding, 2, rates.nic_busbw_gbs,
                                self.efficiencies.collective_half_bytes)
            total += sync
            exposed += sync
        return total, exposed

    def _optimizer_s(self, layout: Layout, rates: Rates) -> float:
        """Return the AdamW step over this GPU's shard of the trained parameters, ADAMW_BYTES_PER_PARAM each at HBM
        rate (a mixture of experts' routed experts: 1/(expert × p) of them, sharded over the expert-data ranks)."""
        share = self.trainable / self.parameters
        local = (self.parameters - self.routed) * share / (layout.tensor * layout.pipeline)
        routed = self.routed * share / (layout.expert * layout.pipeline)
        if layout.sharding in _SHARDED_OPTIMIZER:
            local /= layout.data_parallel * layout.context
            routed /= layout.expert_data_parallel
        return (local + routed) * ADAMW_BYTES_PER_PARAM / rates.hbm_bytes_s

    def _fp8_weight_casts_s(self, layout: Layout, part: LayerSlice, rates: Rates) -> float:
        """Return the casts of the slowest stage's layer weights to fp8 in one step (``fp8_casts.weight_casts``): once
        when Transformer Engine caches them across the micro-batches, for each when they are sharded; none outside
        fp8-mixed."""
        if layout.precision != "fp8-mixed":
            return 0.0
        gemms = layer_gemms(self.dense_shape, part)
        if self.shape.experts is not None:  # the expert layers' weights: attention, router, local and shared experts
            work = expert_layer_work(self.shape, part, layout.expert, self.load_factor, layout.recompute)
            gemms = flat_gemms(attention_gemms(self.shape, part) + work.gemms)
        casts = weight_casts(gemms, layout.fp8_recipe)
        count = weight_casts_per_step(layout.sharding, layout.micro_batches)
        count *= self._stage_layers(layout.pipeline, layout.virtual_stages)
        return count * (casts.bytes / rates.hbm_bytes_s + casts.kernels * self.efficiencies.kernel_launch_s)

    def check(self, layout: Layout) -> None:
        """Raise ValueError when ``layout`` cannot run this model (no batch, degrees that do not divide it, fp8
        without FP8): :func:`require_step_layout`, then the model's own limits."""
        require_step_layout(layout)
        shape = self.shape
        groups = shape.kv_head_count
        if shape.heads % layout.tensor or groups % min(layout.tensor, groups):
            raise InconsistentInput(f"tensor ({layout.tensor}) must divide heads ({shape.heads}) and kv_heads")
        if self.sequence_length % layout.context:
            raise InconsistentInput(f"context ({layout.context}) must divide sequence_length ({self.sequence_length})")
        if shape.layers < layout.pipeline * layout.virtual_stages:
            raise InconsistentInput(f"pipeline × virtual_stages ({layout.pipeline * layout.virtual_stages}) exceeds "
                             f"layers ({shape.layers})")
        self.hardware.gpu.dense_tflops(layout.precision)
        if layout.precision == "fp8-mixed" and layout.fp8_recipe == "mxfp8" and not self.hardware.gpu.mxfp8:
            raise InconsistentInput(f"fp8_recipe mxfp8 needs MXFP8 Tensor Cores (Blackwell), which "
                                    f"{self.hardware.gpu.model} lacks: use delayed or current scaling")

    def evaluate(self, layout: Layout, stage: StageTime | None = None) -> StepTime:
        """Return the modelled step time of ``layout`` (see ``step_time``).

        ``stage``: the layout's ``stage`` when the caller has already modelled it (the layout search does).
        """
        self.check(layout)
        rates = self._rates(layout.precision)
        part = layer_slice(layout, self.sequence_length)
        if stage is None:
            stage = self.stage(part, layout.recompute, layout.precision, layout.pipeline, layout.virtual_stages,
                               layout.expert)
        m = layout.micro_batches
        dp_comm, dp_exposed = self._data_parallel(layout, rates, stage)
        breakdown = StepTimeBreakdown(
            compute_s=m * stage.compute_s,
            memory_bound_s=m * stage.memory_s + self._fp8_weight_casts_s(layout, part, rates),
            tp_comm_s=m * stage.tp_s,
            cp_comm_exposed_s=m * stage.cp_exposed_s,
            pp_bubble_s=(layout.pipeline - 1) / layout.virtual_stages * stage.total_s,
            p2p_s=self._p2p_s(layout, rates),
            dp_comm_exposed_s=dp_exposed,
            optimizer_s=self._optimizer_s(layout, rates),
            ep_comm_s=m * stage.ep_s,
        )
        step = breakdown.total_s
        tokens = layout.global_batch * self.sequence_length
        peak = self.hardware.gpu.dense_tflops(layout.precision)
        capacity = layout.gpus * step * peak * TERA
        return StepTime(
            step_s=step,
            breakdown=breakdown,
            tokens_per_s_per_gpu=tokens / step / layout.gpus,
            mfu=tokens * self._flops_per_token("none") / capacity,
            mfu_peak_tflops=peak,
            mfu_precision="fp8" if layout.precision == "fp8-mixed" else "bf16",
            hfu=tokens * self._flops_per_token(layout.recompute) / capacity,
            dp_comm_s=dp_comm,
            gemm_tflops=self._gemm_flops_s(part, layout) / TERA,
            tokens_per_s_per_gpu_range=(tokens / step / layout.gpus * (1 + self.efficiencies.residual_band[0]),
                                        tokens / step / layout.gpus * (1 + self.efficiencies.residual_band[1])),
            kernels=layout.kernels,
            fp8_recipe=layout.fp8_recipe if layout.precision == "fp8-mixed" else None,
        )


    def _gemm_flops_s(self, part: LayerSlice, layout: Layout) -> float:
        """Returns the rate a layer's GEMMs run at: an expert layer's of a mixture of experts."""
        if self.shape.experts is not None:
            return self._expert_layer(part, layout.recompute, layout.precision, layout.expert)[1]
        return self._per_layer(part, layout.recompute, layout.precision)[2]


def step_time(shape: ModelShape, sequence_length: int, layout: Layout, hardware: NodeSpec, efficiencies: Efficiencies,
              measured: Measured | None = None) -> StepTime:
    """Return the modelled optimizer-step time of ``layout`` on ``hardware`` and its breakdown, sequences of
    ``sequence_length`` tokens: the method of Narayanan et al. 2021 (arXiv 2104.04473) §2–3 and Korthikanti et al. 2022
    (arXiv 2205.05198) §4–6, per-layer counts in ``transformer_work`` (module docstring). ``measured`` replaces modelled
    rates with measurements. InconsistentInput when the layout cannot run the model (``StepTimeModel.check``).
    """
    return StepTimeModel(shape, sequence_length, hardware, efficiencies, measured).evaluate(layout)
