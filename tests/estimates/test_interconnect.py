"""Tests for rules.estimates.interconnect: each quotes the published figure it reproduces."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rules.estimates.interconnect import (
    algbw_gbs,
    allgather_time_s,
    allreduce_time_s,
    busbw_factor,
    busbw_from_algbw_gbs,
    communication_bytes_per_step,
    communication_time_s,
    gbps_to_gbs,
    group_nic_share,
    hierarchical_busbw_gbs,
    measured_scaling_efficiency,
    nvlink_busbw_gbs,
    parse_nccl_tests_avg_busbw_gbs,
    parse_nccl_tests_output,
    pcie_x16_gbs,
    peak_busbw_gbs,
    reduce_scatter_time_s,
    scaling_efficiency,
)

# A realistic all_reduce_perf run on one 8×H100 node, in the layout nccl-tests prints (header comments,
# device list, result table with out-of-place and in-place blocks, footer). Numbers are representative
# of the ~370 GB/s ring busbw NCCL maintainers quote for H100 NVLink (nccl-tests issue #212).
ALL_REDUCE_PERF_8XH100 = "\n".join(
    [
        "# nThread 1 nGpus 8 minBytes 1048576 maxBytes 8589934592 step: 4(factor) warmup iters: 5"
        " iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
        "#  Rank  0 Group  0 Pid  41233 on   node-001 device  0 [0x18] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid  41233 on   node-001 device  1 [0x2a] NVIDIA H100 80GB HBM3",
        "#  Rank  2 Group  0 Pid  41233 on   node-001 device  2 [0x3a] NVIDIA H100 80GB HBM3",
        "#  Rank  3 Group  0 Pid  41233 on   node-001 device  3 [0x5d] NVIDIA H100 80GB HBM3",
        "#  Rank  4 Group  0 Pid  41233 on   node-001 device  4 [0x9a] NVIDIA H100 80GB HBM3",
        "#  Rank  5 Group  0 Pid  41233 on   node-001 device  5 [0xab] NVIDIA H100 80GB HBM3",
        "#  Rank  6 Group  0 Pid  41233 on   node-001 device  6 [0xba] NVIDIA H100 80GB HBM3",
        "#  Rank  7 Group  0 Pid  41233 on   node-001 device  7 [0xdb] NVIDIA H100 80GB HBM3",
        "NCCL version 2.21.5+cuda12.4",
        "#",
        "#                                                              out-of-place              "
        "         in-place",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong    "
        " time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)           "
        " (us)  (GB/s)  (GB/s)",
        "     1048576        262144     float     sum      -1    29.61   35.41   61.97      0   "
        " 29.14   35.98   62.97      0",
        "     4194304       1048576     float     sum      -1    50.12   83.69  146.45      0   "
        " 49.80   84.22  147.39      0",
        "    16777216       4194304     float     sum      -1    114.9  146.02  255.53      0   "
        " 114.2  146.91  257.09      0",
        "    67108864      16777216     float     sum      -1    343.7  195.26  341.70      0   "
        " 342.9  195.71  342.49      0",
        "   268435456      67108864     float     sum      -1   1293.6  207.51  363.15      0  "
        " 1291.8  207.80  363.65      0",
        "  1073741824     268435456     float     sum      -1   5083.4  211.23  369.65      0  "
        " 5080.1  211.36  369.89      0",
        "  4294967296    1073741824     float     sum      -1    20268  211.91  370.84      0   "
        " 20261  211.98  370.97      0",
        "  8589934592    2147483648     float     sum      -1    40511  212.04  371.07      0   "
        " 40497  212.11  371.20      0",
        "# Out of bounds values : 0 OK",
        "# Avg bus bandwidth    : 285.376",
        "#",
        "",
    ]
)


def test_busbw_factors_match_nccl_tests_performance_md():
    # nccl-tests doc/PERFORMANCE.md "Summary": all-reduce 2(n-1)/n; all-gather, reduce-scatter (n-1)/n.
    assert busbw_factor("all-reduce", 8) == pytest.approx(1.75)
    assert busbw_factor("all-reduce", 2) == pytest.approx(1.0)
    assert busbw_factor("all-gather", 8) == pytest.approx(0.875)
    assert busbw_factor("reduce-scatter", 16) == pytest.approx(15 / 16)
    assert busbw_factor("broadcast", 8) == 1.0
    assert busbw_factor("all-to-all", 4) == pytest.approx(0.75)


def test_algbw_and_busbw_from_sample_row_match_nccl_tests_definitions():
    # PERFORMANCE.md: algbw = S/t; busbw = algbw × 2(n-1)/n. The 8 GiB row: 8589934592 B in 40511 us.
    algbw = algbw_gbs(8589934592, 40511e-6)
    assert algbw == pytest.approx(212.04, abs=0.01)
    assert busbw_from_algbw_gbs(algbw, "all-reduce", 8) == pytest.approx(371.07, abs=0.01)


def test_7b_bf16_gradients_allreduce_on_8_h100_at_370_gbs_busbw():
    # H100 NVLink ring busbw ≈ 370 GB/s (NCCL maintainer, nccl-tests issue #212). 7B params of bf16
    # gradients = 14 GB; ring all-reduce t = 2(n-1)/n · S / busbw = 2·7/8 · 14e9 / 370e9 = 66.2 ms.
    t = allreduce_time_s(14e9, 8, 370.0)
    assert t == pytest.approx(2 * 7 / 8 * 14e9 / 370e9)
    assert t == pytest.approx(0.06622, abs=1e-5)


def test_allgather_and_reduce_scatter_times_are_half_of_allreduce():
    # PERFORMANCE.md: all-gather and reduce-scatter t = S(n-1)/(B n): half an all-reduce of the same S.
    assert allgather_time_s(14e9, 8, 370.0) == pytest.approx(allreduce_time_s(14e9, 8, 370.0) / 2)
    assert reduce_scatter_time_s(14e9, 8, 370.0) == pytest.approx(7 / 8 * 14e9 / 370e9)
    assert allreduce_time_s(14e9, 1, 370.0) == 0.0


def test_zero_paper_section_7_communication_volumes():
    # ZeRO (arXiv 1910.02054) §7: DDP all-reduce 2Ψ; ZeRO-1/2 reduce-scatter + all-gather = 2Ψ (same);
    # ZeRO-3 all-gather fwd + all-gather bwd + reduce-scatter = 3Ψ (1.5×).
    psi, n = 7e9, 64
    ddp = communication_bytes_per_step("ddp", psi, n, ranks_per_node=8)
    zero2 = communication_bytes_per_step("zero2", psi, n, ranks_per_node=8)
    zero3 = communication_bytes_per_step("zero3", psi, n, ranks_per_node=8)
    assert ddp.gradient_bytes == pytest.approx(2 * psi)  # bf16 gradients: 2Ψ bytes
    assert ddp.bus_bytes_per_gpu == pytest.approx(2 * (n - 1) / n * 2 * psi)
    assert zero2.bus_bytes_per_gpu == pytest.approx(ddp.bus_bytes_per_gpu)
    assert zero3.bus_bytes_per_gpu == pytest.approx(1.5 * ddp.bus_bytes_per_gpu)
    assert ddp.allreduce_equivalents == pytest.approx(1.0)
    assert zero2.allreduce_equivalents == pytest.approx(1.0)
    assert zero3.allreduce_equivalents == pytest.approx(1.5)
    assert {c.scope for c in zero3.collectives} == {"cluster"}


def test_fsdp_hybrid_is_zero3_in_node_plus_shard_allreduce_across_nodes():
    # PyTorch FSDP HYBRID_SHARD: shard within the node, replicate (all-reduce the shard) across nodes.
    psi, g, nodes = 7e9, 8, 4
    step = communication_bytes_per_step("fsdp-hybrid", psi, g * nodes, ranks_per_node=g)
    intra = [c for c in step.collectives if c.scope == "node"]
    inter = [c for c in step.collectives if c.scope == "cluster"]
    assert [c.kind for c in intra] == ["all-gather", "all-gather", "reduce-scatter"]
    assert len(inter) == 1 and inter[0].kind == "all-reduce"
    assert inter[0].size_bytes == pytest.approx(2 * psi / g)
    assert inter[0].ranks == nodes and inter[0].parallel_groups == g
    # Time: intra at NVLink busbw, shard all-reduce with the 8 groups sharing 8 × 48 GB/s of NICs.
    t = communication_time_s(step, node_busbw_gbs=370.0, cluster_busbw_gbs=8 * 48.0)
    expected = 3 * 7 / 8 * 2 * psi / 370e9 + 2 * 3 / 4 * (2 * psi / g) / 48e9
    assert t == pytest.approx(expected)


def test_single_node_strategies_stay_in_node_scope():
    step = communication_bytes_per_step("fsdp-hybrid", 7e9, 8, ranks_per_node=8)
    assert {c.scope for c in step.collectives} == {"node"}
    assert step.allreduce_equivalents == pytest.approx(1.5)


def test_hybrid_needs_whole_nodes():
    with pytest.raises(ValueError, match="multiple"):
        communication_bytes_per_step("fsdp-hybrid", 7e9, 12, ranks_per_node=8)


def test_invalid_strategy_names_allowed_values():
    with pytest.raises(ValueError, match="ddp, zero1, zero2, zero3, fsdp-full, fsdp-hybrid"):
        communication_bytes_per_step("zero4", 7e9, 8, 8)
    with pytest.raises(ValueError, match="all-reduce"):
        busbw_factor("allreduce", 8)


def test_hierarchical_busbw_one_hdr_nic_per_8_gpu_node_nccl_issue_412():
    # NVIDIA/nccl issue #412: 8 GPUs with one HDR 200G NIC: ~160 GB/s intra-node, ~24 GB/s inter-node,
    # and more NICs raise it "up to 160GB/s which is the NVLink intra-node bandwidth".
    one_nic = hierarchical_busbw_gbs(160.0, nic_gbs=24.0, nics_per_node=1, nodes=12)
    assert one_nic.busbw_gbs == pytest.approx(24.0) and one_nic.bound_by == "network"
    many_nics = hierarchical_busbw_gbs(160.0, nic_gbs=24.0, nics_per_node=8, nodes=12)
    assert many_nics.busbw_gbs == pytest.approx(160.0) and many_nics.bound_by == "node"


def test_hierarchical_busbw_dgx1_four_edr_nics_nccl_tests_issue_29():
    # nccl-tests issue #29: one 100 Gb/s NIC gives ~12.2 GB/s; a DGX-1 with 4 IB adapters 48 GB/s.
    assert hierarchical_busbw_gbs(130.0, 12.0, 4, nodes=2).busbw_gbs == pytest.approx(48.0)


def test_hierarchical_busbw_oversubscription_and_single_node():
    ndr = gbps_to_gbs(400)
    assert ndr == 50.0
    oversubscribed = hierarchical_busbw_gbs(370.0, ndr, 8, nodes=4, oversubscription=2)
    assert oversubscribed.busbw_gbs == pytest.approx(200.0)
    single = hierarchical_busbw_gbs(370.0, ndr, 8, nodes=1)
    assert single.busbw_gbs == 370.0 and single.network_busbw_gbs is None


def test_scaling_efficiency_model():
    # compute 1 s, comm 0.5 s, half of compute overlappable: exposed 0, efficiency 1.
    assert scaling_efficiency(1.0, 0.5, 0.5).efficiency == pytest.approx(1.0)
    # No overlap: 1 / 1.5.
    no_overlap = scaling_efficiency(1.0, 0.5, 0.0)
    assert no_overlap.efficiency == pytest.approx(2 / 3)
    assert no_overlap.exposed_communication_s == pytest.approx(0.5)
    # Partial: exposed = 0.5 - 0.2 = 0.3 → 1/1.3.
    assert scaling_efficiency(1.0, 0.5, 0.2).efficiency == pytest.approx(1 / 1.3)
    with pytest.raises(ValueError):
        scaling_efficiency(1.0, 0.5, 1.5)


def test_measured_scaling_efficiency_against_smallest_run():
    # Seed 000 "Size interconnect from scaling efficiency": measure at two or more device counts.
    points = measured_scaling_efficiency([(64, 560_000.0), (8, 80_000.0), (32, 300_000.0)])
    assert [p.gpus for p in points] == [8, 32, 64]
    assert points[0].efficiency == 1.0
    assert points[1].efficiency == pytest.approx((300_000 / 32) / (80_000 / 8))
    assert points[2].efficiency == pytest.approx(0.875)
    assert all(p.base_gpus == 8 for p in points)
    with pytest.raises(ValueError):
        measured_scaling_efficiency([(8, 1.0), (8, 2.0)])
    with pytest.raises(ValueError):
        measured_scaling_efficiency([])


def test_parse_all_reduce_perf_output():
    rows = parse_nccl_tests_output(ALL_REDUCE_PERF_8XH100)
    assert len(rows) == 8
    assert rows[0].size_bytes == 1048576 and rows[0].count == 262144
    assert rows[0].dtype == "float" and rows[0].redop == "sum" and rows[0].root == -1
    last = rows[-1]
    assert last.size_bytes == 8589934592
    assert last.out_of_place_busbw_gbs == pytest.approx(371.07)
    assert last.in_place_busbw_gbs == pytest.approx(371.20)
    assert last.out_of_place_wrong == 0 and last.in_place_wrong == 0
    assert last.busbw_gbs == pytest.approx(371.20)
    assert peak_busbw_gbs(rows) == pytest.approx(371.20)
    assert peak_busbw_gbs(rows[:3], min_size_bytes=4194304) == pytest.approx(257.09)
    assert parse_nccl_tests_avg_busbw_gbs(ALL_REDUCE_PERF_8XH100) == pytest.approx(285.376)


def test_parse_old_format_without_root_and_with_error_column_and_mpi_prefixes():
    # Older nccl-tests print no root column and a float "error" (NVIDIA/nccl issue #1244 output).
    raw = (
        "[1,0]<stdout>:#       size         count      type   redop     time   algbw   busbw  error"
        "     time   algbw   busbw  error\n"
        "[1,0]<stdout>:   268435456      67108864     float     sum   2952.1   90.93  170.49  2e-07"
        "   2950.3   90.99  170.60  2e-07\n"
        "[1,0]<stdout>:# Avg bus bandwidth    : 170.5\n"
    )
    rows = parse_nccl_tests_output(raw)
    assert len(rows) == 1
    assert rows[0].root is None and rows[0].redop == "sum"
    assert rows[0].out_of_place_wrong is None
    assert rows[0].busbw_gbs == pytest.approx(170.60)
    assert parse_nccl_tests_avg_busbw_gbs(raw) == pytest.approx(170.5)


def test_parse_rejects_output_without_rows():
    with pytest.raises(ValueError, match="no nccl-tests result rows"):
        parse_nccl_tests_output("# nThread 1 nGpus 8\n# Avg bus bandwidth    : 0\n")
    assert parse_nccl_tests_avg_busbw_gbs("nothing") is None


@given(
    size=st.floats(1.0, 1e13),
    ranks=st.integers(1, 100_000),
    busbw=st.floats(0.1, 1e4),
    strategy=st.sampled_from(["ddp", "zero1", "zero2", "zero3", "fsdp-full", "fsdp-hybrid"]),
)
def test_times_are_finite_and_non_negative(size, ranks, busbw, strategy):
    assert 0 <= allreduce_time_s(size, ranks, busbw) < math.inf
    step = communication_bytes_per_step(strategy, size, ranks * 8, ranks_per_node=8)
    t = communication_time_s(step, busbw, busbw)
    assert math.isfinite(t) and t >= 0


def test_nvlink_busbw_at_80_percent_of_one_direction_matches_measured_h100_and_a100():
    # NVIDIA quotes NVLink bidirectionally (H100 SXM 900 GB/s, A100 600 GB/s); NCCL maintainers measure
    # about 370 GB/s (H100, nccl-tests issue #212) and 230 GB/s (A100) all-reduce busbw on 8 GPUs.
    assert nvlink_busbw_gbs(900, 0.8) == pytest.approx(360.0)
    assert nvlink_busbw_gbs(900, 0.8) == pytest.approx(370, rel=0.03)
    assert nvlink_busbw_gbs(600, 0.8) == pytest.approx(230, rel=0.05)
    with pytest.raises(ValueError, match="busbw_fraction"):
        nvlink_busbw_gbs(900, 1.2)


def test_pcie_x16_rates_match_pci_sig_generations():
    # PCI-SIG: Gen4 16 GT/s × 16 lanes × 128/130 / 8 = 31.5 GB/s per direction; Gen5 twice that.
    assert pcie_x16_gbs(4) == pytest.approx(16 * 16 * 128 / 130 / 8, rel=1e-3)
    assert pcie_x16_gbs(5) == pytest.approx(2 * pcie_x16_gbs(4))
    with pytest.raises(ValueError, match="PCIe generation"):
        pcie_x16_gbs(2)


def test_gradient_accumulation_repeats_what_cannot_wait_for_the_last_micro_batch():
    # ZeRO §7.2.2 and PyTorch FSDP: ZeRO-3/FSDP gather parameters for every micro-batch's forward and
    # backward and reduce-scatter every micro-batch; DDP (no_sync) and ZeRO-1 communicate once per step;
    # ZeRO-2 reduce-scatters every micro-batch (DeepSpeed stage_1_and_2.py) and gathers once.
    psi, n, k = 7e9, 64, 8
    one = {s: communication_bytes_per_step(s, psi, n, 8) for s in ("ddp", "zero1", "zero2", "zero3", "fsdp-full")}
    acc = {s: communication_bytes_per_step(s, psi, n, 8, accumulation_steps=k) for s in one}
    assert acc["ddp"].bus_bytes_per_gpu == pytest.approx(one["ddp"].bus_bytes_per_gpu)
    assert acc["zero1"].bus_bytes_per_gpu == pytest.approx(one["zero1"].bus_bytes_per_gpu)
    assert acc["zero2"].bus_bytes_per_gpu == pytest.approx((k + 1) / 2 * one["zero2"].bus_bytes_per_gpu)
    assert acc["zero3"].bus_bytes_per_gpu == pytest.approx(k * one["zero3"].bus_bytes_per_gpu)
    assert acc["fsdp-full"].allreduce_equivalents == pytest.approx(1.5 * k)
    t1 = communication_time_s(one["zero3"], 370.0, 370.0)
    assert communication_time_s(acc["zero3"], 370.0, 370.0) == pytest.approx(k * t1)


def test_adapter_training_communicates_only_trainable_gradients():
    # A LoRA run on a 7B base with 40M trainable parameters: DDP all-reduces 40M gradients, while
    # ZeRO-3 still gathers all 7B frozen and trainable weights forward and backward.
    psi, trainable, n = 7e9, 4e7, 8
    ddp = communication_bytes_per_step("ddp", psi, n, 8, trainable_parameters=trainable)
    zero3 = communication_bytes_per_step("zero3", psi, n, 8, trainable_parameters=trainable)
    assert ddp.bus_bytes_per_gpu == pytest.approx(2 * 7 / 8 * 2 * trainable)
    assert zero3.bus_bytes_per_gpu == pytest.approx(7 / 8 * (2 * 2 * psi + 2 * trainable))
    with pytest.raises(ValueError, match="exceeds"):
        communication_bytes_per_step("ddp", psi, n, 8, trainable_parameters=2 * psi)


def test_tensor_parallel_groups_share_the_node_nics():
    # TP 8 on an 8-GPU DGX H100: eight data-parallel groups (one per TP rank) each own one of the eight
    # NDR NICs (Narayanan et al. 2021 §3.3): one NIC at 46 GB/s instead of the node's 368 GB/s.
    share = group_nic_share(1, 8)
    assert share == pytest.approx(1 / 8)
    tiers = hierarchical_busbw_gbs(360.0, 46.0, 8 * share, nodes=32)
    assert tiers.busbw_gbs == pytest.approx(46.0) and tiers.bound_by == "network"
    assert group_nic_share(8, 8) == 1.0
    with pytest.raises(ValueError, match="exceeds"):
        group_nic_share(16, 8)
