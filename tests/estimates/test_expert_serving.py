"""The serving estimators of a mixture of experts: the experts a batch touches, the weights it reads, the all-to-all.

Sources: the occupancy expectation under uniform top-k routing, E·(1 − (1 − k/E)^B) (a given expert is missed by one
token with probability 1 − k/E, by B independent tokens with its B-th power; rules/estimates/serving/experts.py);
Mixtral 8x7B's config.json (8 experts, 2 per token) and counts (46,702,792,704 in all, 12,879,925,248 active, the
routed experts 45,097,156,608: Jiang et al. 2024 §2.1, tests/test_models_by_name.py); DeepEP's intranode EP8
bottleneck 153 GB/s (catalogue step_time.all_to_all).
"""

from __future__ import annotations

import pytest

from rules.errors import InconsistentInput
from rules.estimates.model.shapes import Experts, ModelShape
from rules.estimates.serving.experts import AllToAllLinks, experts_hit, served_experts, serving_split
from rules.estimates.training_time.expert_step import all_to_all_s
from rules.estimates.training_time.step_time_figures import Rates

MIXTRAL = ModelShape(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000, mlp="swiglu",
                     norm="rmsnorm", experts=Experts(count=8, active=2, ffn_hidden=14336))
LINKS = AllToAllLinks(domain_gpus=8, domain_gbs=153.0, nic_gbs=0.0, load_factor=1.0)


@pytest.mark.parametrize(("tokens", "hit"), [(1, 2.0), (2, 3.5), (3, 8 * (1 - 0.75**3)), (16, 8 * (1 - 0.75**16))])
def test_mixtral_tokens_hit_k_experts_alone_and_all_eight_in_a_large_batch(tokens: int, hit: float) -> None:
    # One token: exactly its 2 experts. Two: 8 × (1 − 0.75²) = 3.5, i.e. 2 + 2 × 6/8 (the second token's experts are
    # new with probability 6/8 each). Sixteen: 7.92 of 8.
    assert experts_hit(8, 2, tokens) == pytest.approx(hit)


def test_every_token_routed_to_every_expert_hits_them_all_and_none_hits_none() -> None:
    assert experts_hit(8, 8, 1) == 8 and experts_hit(128, 8, 0) == 0
    assert experts_hit(128, 8, 4096) == pytest.approx(128)


def test_mixtral_at_batch_1_reads_its_active_parameters_worth_of_weights() -> None:
    # bf16 weights of the HF count, 93,405,585,408 B: the 1,605,636,096 parameters besides the routed experts and 2
    # of each layer's 8 experts, 45,097,156,608 / 4: 12,879,925,248 parameters, the active count (2 B each).
    experts = served_experts(MIXTRAL, 46_702_792_704 * 2)

    assert experts.active_parameters == 12_879_925_248
    assert experts.routed_weight_bytes == pytest.approx(45_097_156_608 * 2)
    assert experts.touched_weight_bytes(46_702_792_704 * 2, 1) == pytest.approx(12_879_925_248 * 2)
    assert experts.touched_weight_bytes(46_702_792_704 * 2, 10_000) == pytest.approx(46_702_792_704 * 2)


def test_the_serving_all_to_all_is_the_training_step_models() -> None:
    # 64 tokens over tp 8: each GPU dispatches 8 tokens × 2 copies × 4096 × 2 B = 131,072 B, 7/8 to its NVLink peers at
    # 153 GB/s: 0.75 µs; dispatch and combine in each of 32 layers, 64 of them: 48 µs.
    experts = served_experts(MIXTRAL, 46_702_792_704 * 2, expert_parallel=8, links=LINKS)
    rates = Rates(gemm_flops_s=1.0, attention_flops_s=1.0, attention_scale=1.0, hbm_bytes_s=1.0, domain_gpus=8,
                  domain_busbw_gbs=1.0, link_gbs=1.0, nic_busbw_gbs=1.0, all_to_all_domain_gbs=153.0,
                  all_to_all_nic_gbs=43.0)

    assert experts.all_to_all_s(64, 8) == pytest.approx(64 * all_to_all_s(131_072, 8, 1.0, rates))
    assert experts.all_to_all_s(64, 8) == pytest.approx(64 * 131_072 * 7 / 8 / 153e9)
    assert served_experts(MIXTRAL, 1e11).all_to_all_s(64, 8) == 0


@pytest.mark.parametrize(("expert", "expert_tensor", "tp", "domain", "words"), [
    (8, 2, 8, 8, "expert tensor parallelism 2 in serving is not modelled"),
    (3, 1, 6, 8, "must divide the 8 experts"),
    (4, 1, 2, 8, "tensor_parallel 2"),
    (8, 1, 8, 4, "spans more than one NVLink domain of 4 GPUs"),
])
def test_serving_refuses_expert_splits_it_does_not_model(expert: int, expert_tensor: int, tp: int, domain: int,
                                                         words: str) -> None:
    with pytest.raises(InconsistentInput, match=words):
        serving_split(8, expert, expert_tensor, tp, domain)
