"""DeepSpeed's model-state estimators reproduced to the byte, and the ``deepspeed`` convention held against them.

Every expected figure below is worked out by hand from DeepSpeed's public formulas, written out before each
table with the file and function they come from; none is read back from the code under test. The models:
Llama-2-7B 6,738,415,616 parameters (HF model card), largest module its 32,000 × 4,096 embedding, 131,072,000;
Meta-Llama-3-8B 8,030,261,248, largest the 128,256 × 4,096 embedding, 525,336,576; Meta-Llama-3-70B
70,553,706,496, largest 128,256 × 8,192 = 1,050,673,152; t5-3b as DeepSpeed's memory.rst runs it cold,
2851e6 and 32e6.
"""

import pytest

from rules.estimates.memory.deepspeed_estimators import (
    DeepSpeedOptions,
    deepspeed_node,
    largest_layer_memory,
    zero2_model_states_mem_needs,
    zero3_model_states_mem_needs,
)
from rules.estimates.memory.model_state import TrainedModel
from rules.estimates.memory.offload import ZeroSettings
from rules.estimates.memory.training_state import StateSettings, training_model_state
from rules.estimates.model.layout import training_layout
from rules.estimates.model.shapes import ModelShape

LLAMA2_7B, LLAMA2_7B_LARGEST = 6_738_415_616, 131_072_000
LLAMA3_8B, LLAMA3_8B_LARGEST = 8_030_261_248, 525_336_576
LLAMA3_70B, LLAMA3_70B_LARGEST = 70_553_706_496, 1_050_673_152
T5_3B, T5_3B_LARGEST = 2851e6, 32e6
GIB = 2**30

# deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero2_model_states_mem_needs (additional_buffer_factor 1.5):
#   total_gpus = num_nodes * num_gpus_per_node
#   cpu_offload:     gpu_mem = 2 * total_params
#                    cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
#   not offloaded:   gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
#                    cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
#   return int(cpu_mem), int(gpu_mem)
ZERO2 = [
    # (total_params, gpus per node, nodes, cpu_offload, per-CPU bytes, per-GPU bytes)
    (LLAMA2_7B, 1, 1, True, 161_721_974_784, 13_476_831_232),  # Ψ × max(4, 16) × 1.5; 2Ψ
    (LLAMA2_7B, 1, 1, False, 40_430_493_696, 134_768_312_320),  # Ψ × 4 × 1 × 1.5; 2Ψ + 18Ψ
    (LLAMA2_7B, 8, 1, True, 323_443_949_568, 13_476_831_232),  # Ψ × max(32, 16) × 1.5; 2Ψ
    (LLAMA2_7B, 8, 1, False, 323_443_949_568, 28_638_266_368),  # Ψ × 4 × 8 × 1.5; 2Ψ + 18Ψ/8
    (LLAMA3_8B, 8, 2, True, 770_905_079_808, 16_060_522_496),  # Ψ × max(64, 16) × 1.5; 2Ψ
    (LLAMA3_8B, 8, 2, False, 385_452_539_904, 25_094_566_400),  # Ψ × 32 × 1.5; 2Ψ + 18Ψ/16
    (LLAMA3_70B, 8, 4, True, 13_546_311_647_232, 141_107_412_992),  # Ψ × max(128, 16) × 1.5; 2Ψ
    (LLAMA3_70B, 8, 4, False, 3_386_577_911_808, 180_793_872_896),  # Ψ × 32 × 1.5; 2Ψ + 18Ψ/32
]


@pytest.mark.parametrize(("total", "per_node", "nodes", "offload", "cpu", "gpu"), ZERO2)
def test_zero2_estimate_matches_stage_1_and_2_formula_to_the_byte(total, per_node, nodes, offload, cpu, gpu):
    needs = zero2_model_states_mem_needs(total, deepspeed_node(per_node, nodes), DeepSpeedOptions(offload))
    assert (needs.cpu_bytes, needs.gpu_bytes) == (cpu, gpu)


# deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs (additional_buffer_factor 1.5):
#   total_gpus = num_nodes * num_gpus_per_node; gpus_factor = 1 / num_nodes
#   largest_layer_memory = 4 * largest_layer_params
#   offload_optimizer and offload_param: gpu_mem = largest_layer_memory
#       cpu_mem = total_params * 18 * gpus_factor * f        (zero_init)
#       cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * f   (not zero_init)
#   offload_optimizer only: gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
#       cpu_mem = total_params * 16 * gpus_factor * f        (zero_init)
#       cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * f   (not zero_init)
#   nothing offloaded: gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
#       cpu_mem = largest_layer_params * 4 * num_gpus_per_node * f   (zero_init)
#       cpu_mem = total_params * 4 * num_gpus_per_node * f           (not zero_init)
#   return int(cpu_mem), int(gpu_mem), largest_layer_memory
ZERO3 = [
    # (total, largest, gpus per node, nodes, cpu_offload, cpu_offload_params, zero_init, per-CPU, per-GPU)
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 1, 1, True, True, True, 181_937_221_632, 524_288_000),  # Ψ × 18 × 1.5; 4L
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 1, 1, True, False, True, 161_721_974_784, 14_001_119_232),  # Ψ×16×1.5; 4L + 2Ψ
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 1, 1, False, False, True, 786_432_000, 121_815_769_088),  # L × 4 × 1.5; 4L + 18Ψ
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 1, 1, False, False, False, 40_430_493_696, 121_815_769_088),  # Ψ × 4 × 1.5
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 8, 2, True, True, True, 90_968_610_816, 524_288_000),  # Ψ × 18 × ½ × 1.5
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 8, 2, True, True, False, 323_443_949_568, 524_288_000),  # Ψ × max(32, 9) × 1.5
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 8, 2, True, False, True, 80_860_987_392, 1_366_589_952),  # 4L + 2Ψ/16
    (LLAMA2_7B, LLAMA2_7B_LARGEST, 8, 2, False, False, True, 6_291_456_000, 8_105_005_568),  # L×4×8×1.5; 4L+18Ψ/16
    # 1/3 is inexact in floating point: Ψ × 16 × (1/3) × 1.5 truncates to …983, 2Ψ/24 to …437.
    (LLAMA3_8B, LLAMA3_8B_LARGEST, 8, 3, True, False, True, 64_242_089_983, 2_770_534_741),
    (LLAMA3_8B, LLAMA3_8B_LARGEST, 8, 3, True, False, False, 385_452_539_904, 2_770_534_741),  # max(32, 16/3)
    (LLAMA3_8B, LLAMA3_8B_LARGEST, 8, 3, False, False, True, 25_216_155_648, 8_124_042_240),  # 4L + 18Ψ/24
    (LLAMA3_70B, LLAMA3_70B_LARGEST, 8, 4, True, True, True, 476_237_518_848, 4_202_692_608),  # Ψ × 18 × ¼ × 1.5
    (LLAMA3_70B, LLAMA3_70B_LARGEST, 8, 4, True, False, True, 423_322_238_976, 8_612_299_264),  # 4L + 2Ψ/32
    (LLAMA3_70B, LLAMA3_70B_LARGEST, 8, 4, False, False, True, 50_432_311_296, 43_889_152_512),  # 4L + 18Ψ/32
]


@pytest.mark.parametrize(("total", "largest", "per_node", "nodes", "offload", "offload_params", "zero_init",
                          "cpu", "gpu"), ZERO3)
def test_zero3_estimate_matches_stage3_formula_to_the_byte(total, largest, per_node, nodes, offload, offload_params,
                                                           zero_init, cpu, gpu):
    needs = zero3_model_states_mem_needs(total, largest, deepspeed_node(per_node, nodes),
                                         DeepSpeedOptions(offload, offload_params, zero_init))
    assert (needs.cpu_bytes, needs.gpu_bytes) == (cpu, gpu)
    assert needs.largest_layer_bytes == 4 * largest


def test_t5_3b_on_one_node_of_8_matches_the_tables_deepspeed_prints_in_memory_rst():
    # docs/code-docs/source/memory.rst, estimate_zero2/3_model_states_mem_needs_all_cold(total_params=2851e6,
    # largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1), "per CPU | per GPU" in GB = 2^30 bytes:
    # The ZeRO-2 table without offload prints 15.93 GB per GPU from the formula before DeepSpeed PR #5099
    # (commit f4cb866, June 2024: 4Ψ + 16Ψ/N became 2Ψ + 18Ψ/N): by hand 4 × 2851e6 + 16 × 2851e6 / 8 = 17.106e9 B
    # = 15.93 GB then, 2 × 2851e6 + 18 × 2851e6 / 8 = 12.11675e9 B = 11.28 GB now, which is what is reproduced.
    assert round((4 * T5_3B + int(16 * T5_3B / 8)) / GIB, 2) == 15.93
    hardware = deepspeed_node(8, 1)
    zero2 = {True: (127.45, 5.31), False: (127.45, 11.28)}
    for offload, printed in zero2.items():
        needs = zero2_model_states_mem_needs(T5_3B, hardware, DeepSpeedOptions(offload))
        assert (round(needs.cpu_bytes / GIB, 2), round(needs.gpu_bytes / GIB, 2)) == printed
    zero3 = {(True, True, True): (71.69, 0.12), (True, True, False): (127.45, 0.12),
             (True, False, True): (63.72, 0.78), (True, False, False): (127.45, 0.78),
             (False, False, True): (1.43, 6.09), (False, False, False): (127.45, 6.09)}
    for options, printed in zero3.items():
        needs = zero3_model_states_mem_needs(T5_3B, T5_3B_LARGEST, hardware, DeepSpeedOptions(*options))
        assert (round(needs.cpu_bytes / GIB, 2), round(needs.gpu_bytes / GIB, 2)) == printed


def test_t5_large_gpu_cases_match_memory_rst():
    # memory.rst, Discussion: t5-large (737.67M parameters, largest layer 32.90M = the 32,128 × 1,024 embedding)
    # on 4 GPUs: largest layer memory 125 MB, case 1 3291 MB, case 2 125 MB, case 3 477 MB (>> 20).
    total, largest, hardware = 737_668_096, 32_899_072, deepspeed_node(4, 1)
    assert int(largest_layer_memory(largest)) >> 20 == 125
    cases = {(False, False): 3291, (True, True): 125, (True, False): 477}
    for (offload, offload_params), megabytes in cases.items():
        needs = zero3_model_states_mem_needs(total, largest, hardware, DeepSpeedOptions(offload, offload_params))
        assert needs.gpu_bytes >> 20 == megabytes


def test_invalid_inputs_raise():
    with pytest.raises(ValueError, match="nodes"):
        zero2_model_states_mem_needs(1e9, deepspeed_node(8, 0), DeepSpeedOptions())
    with pytest.raises(ValueError, match="total_params"):
        zero3_model_states_mem_needs(0, 1e6, deepspeed_node(), DeepSpeedOptions())
    with pytest.raises(ValueError, match="largest_layer_params"):
        zero3_model_states_mem_needs(1e9, -1, deepspeed_node(), DeepSpeedOptions())


# ---------------------------------------------------------------------------------------------------
# The deepspeed convention gives DeepSpeed's per-GPU and per-CPU figures for the same job
# ---------------------------------------------------------------------------------------------------
LLAMA2_7B_SHAPE = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=32, ffn_hidden=11008, vocab=32000,
                             mlp="swiglu", norm="rmsnorm", dropout=False)
DEEPSPEED = StateSettings(convention="deepspeed", gathered_layers=2, zero=ZeroSettings())
OFFLOAD = {(False, False): "none", (True, False): "optimizer", (True, True): "optimizer+parameters"}


@pytest.mark.parametrize(("total", "largest", "per_node", "nodes", "offload", "offload_params", "zero_init",
                          "cpu", "gpu"), [case for case in ZERO3 if case[0] == LLAMA2_7B and case[6]])
def test_deepspeed_convention_gives_zero3_estimator_figures_for_llama2_7b(total, largest, per_node, nodes, offload,
                                                                          offload_params, zero_init, cpu, gpu):
    # Given Llama-2-7B (whose largest module is the 131,072,000-parameter embedding) under ZeRO-3 on the
    # estimator's GPUs, bf16 AdamW, DeepSpeed's byte convention,
    model = TrainedModel(total, total, "bf16-mixed", "adamw")
    layout = training_layout(per_node * nodes, 8, nodes, sharding="zero3")

    held = training_model_state(model, LLAMA2_7B_SHAPE, OFFLOAD[offload, offload_params], layout, DEEPSPEED)

    # then one GPU holds DeepSpeed's per-GPU figure and the node's host its per-CPU figure, to the byte.
    assert held.per_gpu.gpu_total_bytes + held.gathered_bytes == gpu
    assert held.host.total_bytes == cpu


@pytest.mark.parametrize(("total", "per_node", "nodes", "offload", "cpu", "gpu"), ZERO2)
def test_deepspeed_convention_gives_zero2_estimator_figures(total, per_node, nodes, offload, cpu, gpu):
    model = TrainedModel(total, total, "bf16-mixed", "adamw")
    layout = training_layout(per_node * nodes, 8, nodes, sharding="zero2")

    held = training_model_state(model, None, "optimizer" if offload else "none", layout, DEEPSPEED)

    assert held.per_gpu.gpu_total_bytes == gpu
    assert held.host.total_bytes == cpu
    assert held.host.buffer_bytes == pytest.approx(cpu / 3)  # 1.5 = the state and half of it again in buffers
