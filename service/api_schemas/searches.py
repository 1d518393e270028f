"""JSON Schemas of the layout search over the API: the request of POST /api/v1/searches and the task's result.

The result is rules.advice.search's contract (``quotecheck search --format json`` prints the same): the layouts
searched and fitting, the best layout, the submitted one, the fastest few, and how the two compare.
"""

from __future__ import annotations

from typing import Any

SEARCH_REQUEST: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["submission"],
    "properties": {
        "submission": {"type": "string", "minLength": 1, "maxLength": 64,
                       "description": "the id of a stored submission; its current revision is searched"},
    },
}

_COUNT = {"type": "integer", "minimum": 1}
_RATE = {"type": "number"}

SEARCH_LAYOUT: dict[str, Any] = {
    "type": "object",
    "description": ("a parallel layout of the quoted GPUs and its modelled step "
                    "(rules/estimates/training_time/step_time.py)"),
    "required": ["micro_batch", "global_batch", "tensor", "pipeline", "virtual_stages", "context", "data",
                 "recompute", "sequence_parallel", "flash_attention", "sharding", "precision", "step_s",
                 "tokens_per_s_per_gpu", "mfu", "mfu_peak_tflops"],
    "properties": {
        "micro_batch": _COUNT, "global_batch": _COUNT, "tensor": _COUNT, "pipeline": _COUNT,
        "virtual_stages": _COUNT, "context": _COUNT, "data": _COUNT,
        "recompute": {"enum": ["none", "selective", "full"]}, "sequence_parallel": {"type": "boolean"},
        "flash_attention": {"type": "boolean"}, "sharding": {"type": "string"}, "precision": {"type": "string"},
        "step_s": {**_RATE, "description": "modelled seconds per optimizer step"},
        "tokens_per_s_per_gpu": _RATE,
        "mfu": {**_RATE, "description": "model FLOPs utilisation (PaLM) against `mfu_peak_tflops`"},
        "mfu_peak_tflops": _RATE,
        "memory_gib_per_gpu": {**_RATE, "description": "estimated memory of the most loaded GPU (searched layouts)"},
    },
}

_LAYOUT = {"$ref": "#/components/schemas/SearchLayout"}

SEARCH: dict[str, Any] = {
    "type": "object",
    "description": "the fastest layouts of the quoted GPUs that fit memory, and the submitted layout beside them",
    "required": ["layouts_searched", "fitting", "best", "submitted", "top", "submitted_vs_best"],
    "properties": {
        "layouts_searched": {"type": "integer", "description": "valid degree combinations enumerated"},
        "fitting": {"type": "integer", "description": "of those, layouts that fit the memory budget per GPU"},
        "best": {"anyOf": [_LAYOUT, {"type": "null"}], "description": "the fastest that fits; null when none does"},
        "submitted": _LAYOUT,
        "top": {"type": "array", "items": _LAYOUT, "description": "the fastest that fit, fastest first"},
        "submitted_vs_best": {"type": "string"},
    },
}
