"""The layout search's full result, pinned to the bit: every searched layout's step and memory figures.

The fingerprints were computed by the search as it stood before it was made faster (commit 582efde); a change
that alters which layouts are searched, which fit, their order, or any figure (step times, breakdowns,
tokens/s, MFU, memory bytes) by one bit changes them. With an infinite budget every searched layout fits and,
with ``top_n`` above the count, none is pruned, so every layout's figures enter the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from rules.estimates.search.layout_search import LayoutSearch, search_layouts
from rules.search import prepare

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
EVERY = 100_000  # top_n above any count searched here: nothing pruned, every fitting layout ranked


def _fingerprint(result: LayoutSearch) -> str:
    """Returns sha256 of the counts and each ranked layout's fields and figures (floats by repr: exact)."""
    rows = [repr((asdict(entry.layout), asdict(entry.step), entry.memory_bytes)) for entry in result.top]
    text = repr((result.searched, result.fitting)) + "\n" + "\n".join(rows)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _search(example: str, budget: str, top_n: int, convention_change: dict | None = None) -> LayoutSearch:
    found, prepared_budget, convention = prepare(json.loads((EXAMPLES / example).read_text()))
    if convention_change:
        convention = replace(convention, **convention_change)
    memory_budget = {"policy": prepared_budget, "infinite": math.inf, "half": prepared_budget / 2}[budget]
    return search_layouts(found.model, found.gpus, found.layout.global_batch, memory_budget, None, convention, top_n)


@pytest.mark.parametrize(("example", "budget", "top_n", "convention_change", "searched", "fitting", "fingerprint"), [
    # the bench's search: the policy's budget, the ten fastest
    ("h200-128node-pretraining.json", "policy", 10, None, 13800, 9106, "7b681b5d73f84f3df583ab4efb0bd5dc"),
    # every layout fits, every one ranked: all 13,800 layouts' figures
    ("h200-128node-pretraining.json", "infinite", EVERY, None, 13800, 13800, "b06788178d17bcb75422399fd47b5ea2"),
    # the fitting set and order of all fitting layouts under the policy's budget and half of it
    ("h200-128node-pretraining.json", "policy", EVERY, None, 13800, 9106, "f8c9a8bbb23f43ba8910e8161c2a7598"),
    ("h200-128node-pretraining.json", "half", 10, None, 13800, 6400, "f8e232489d41b63b1624849fd0508922"),
    # Megatron-LM's activation count, communication buffers not counted
    ("h200-128node-pretraining.json", "infinite", EVERY, {"activations": "megatron", "communication": None},
     13800, 13800, "2b39621ed74e438870ed06c52d09bd9d"),
    # a smaller job: 70B fine-tuning on 128 GPUs of DGX H100
    ("dgx-h100-70b-finetune.json", "infinite", EVERY, None, 13320, 13320, "8ace9b6c3ad1356f39b17a480c4d47df"),
    ("dgx-h100-70b-finetune.json", "policy", 10, None, 13320, 5252, "6bfdd1c1e4b14e9ae89951103d85ce27"),
])
def test_the_search_result_is_unchanged_to_the_bit(example, budget, top_n, convention_change, searched, fitting,
                                                     fingerprint):
    result = _search(example, budget, top_n, convention_change)
    assert (result.searched, result.fitting, _fingerprint(result)) == (searched, fitting, fingerprint)
