"""The fp8 recipe of a training job, refused at its pointer before anything is evaluated where it cannot apply.

``workload.training.fp8_recipe`` says how Transformer Engine scales the inputs of the FP8 GEMMs
(rules/estimates/training_time/fp8_casts.py), so it means something only with precision ``fp8-mixed``; a job that
states it with another precision (or with none, which the step model takes as bf16-mixed) contradicts itself.
``mxfp8`` (MXFP8BlockScaling) needs Tensor Cores that run MXFP8, which only the architectures in the catalogue's
``step_time.mxfp8_architectures`` have (Blackwell); on a catalogued GPU of another architecture it is refused. A GPU
the catalogue lacks is described by its figures, which do not say; the step model then gives no modelled figure.
"""

from __future__ import annotations

from typing import Any

from rules.catalogue import Catalogue
from rules.job.pointers import TRAINING, node_groups
from schemas.problem import Problem

FP8_PRECISION = "fp8-mixed"


def _gpu(group: dict[str, Any], catalogue: Catalogue) -> tuple[Any, Any]:
    """Returns a node group's GPU model and GPUs per node as given (a count bare or as {value, …}), else as its
    catalogued server holds them; None where neither says."""
    gpu = group.get("gpu") if isinstance(group.get("gpu"), dict) else {}
    server = catalogue.server(group["server_model"]) if isinstance(group.get("server_model"), str) else None
    count = gpu.get("count", (server or {}).get("gpu_count"))
    return gpu.get("model", (server or {}).get("gpu_model")), count.get("value") if isinstance(count, dict) else count


def _training_gpu(document: dict[str, Any], training: dict[str, Any], catalogue: Catalogue) -> str | None:
    """Returns the GPU model of the node group the job trains on: the one it names, else the first with GPUs."""
    name = training.get("node_group")
    for _, group in node_groups(document):
        model, count = _gpu(group, catalogue)
        if (group.get("name") == name) if name is not None else count:
            return model if isinstance(model, str) else None
    return None


def fp8_recipe_problems(document: Any, catalogue: Catalogue) -> list[Problem]:
    """Returns a problem when the training job states an fp8 recipe without precision fp8-mixed, or mxfp8 on a
    catalogued GPU without MXFP8 Tensor Cores."""
    workload = document.get("workload") if isinstance(document, dict) else None
    training = workload.get("training") if isinstance(workload, dict) else None
    if not isinstance(training, dict) or "fp8_recipe" not in training:
        return []
    recipe, precision, pointer = training["fp8_recipe"], training.get("precision"), f"{TRAINING}/fp8_recipe"
    if precision != FP8_PRECISION:
        stated = f"precision {precision}" if precision is not None else "no precision (bf16-mixed is assumed)"
        return [Problem(pointer, f"fp8_recipe {recipe} says how the inputs of FP8 GEMMs are scaled, and only precision "
                                 f"{FP8_PRECISION} runs FP8 GEMMs; the job states {stated}: remove fp8_recipe or set "
                                 f"{TRAINING}/precision to {FP8_PRECISION}")]
    if recipe != "mxfp8":
        return []
    model = _training_gpu(document, training, catalogue)
    spec = catalogue.gpu(model) if model is not None else None
    capable = catalogue.document["step_time"]["mxfp8_architectures"]
    if spec is None or spec["architecture"] in capable:
        return []
    return [Problem(pointer, f"fp8_recipe mxfp8 (Transformer Engine's MXFP8BlockScaling: one E8M0 scale per 32 "
                             f"elements) needs MXFP8 Tensor Cores, which only {' and '.join(capable)} GPUs have; the "
                             f"training GPU {model} is {spec['architecture']}: use delayed or current")]
