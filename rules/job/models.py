"""Models by name: the model objects of a submission that the model catalogue describes, and the refusal of a name
it lacks when the name is all the submission says of the model.

A model object (``workload.training.model``, ``workload.inference.model``) that gives a ``name`` and no
``parameters`` is described by its name: the catalogue (rules/data/catalogue.json, ``models``) fills the parameters
and every architecture member the submission leaves out (rules/job/inputs.py, beside the hardware fills, so each
filled value carries the catalogue's source and the config file it came from; the members given win). With
``parameters`` given the name is a label, as it always was, so a submission that states its model is read as
before. A name the catalogue lacks, given with neither ``parameters`` nor ``architecture``, describes nothing: the
submission is refused at the name's pointer, with the closest catalogued names. A public model whose architecture the
submission cannot express (the catalogue's ``refused_models``: multi-head latent attention) is refused at its name
whenever its architecture would be read, given by name alone or beside an architecture, rather than approximated;
with ``parameters`` alone the name is a label. An ``experts`` member with more active experts than experts, or with as
many leading dense layers as layers, is refused at its pointer.

Hardware ids are read the same way: a node group's ``gpu.model`` the catalogue lacks, given without ``memory_gib``,
and a ``server_model`` the catalogue lacks (by id or alias), given without a GPU the group describes itself, are
refused at their pointers with the closest catalogued ids; otherwise the id is a label, as it always was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rules.catalogue import Catalogue
from rules.job.pointers import INFERENCE, TRAINING, node_groups
from schemas.problem import Problem

# Where a submission holds a model object.
MODEL_POINTERS = (f"{TRAINING}/model", f"{INFERENCE}/model")


def named_models(document: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yields (pointer, model object) of each model object of ``document`` that gives a name and no parameters."""
    for pointer, model in model_objects(document):
        if isinstance(model.get("name"), str) and "parameters" not in model:
            yield pointer, model


def model_objects(document: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yields (pointer, model object) of each model object of ``document``."""
    for pointer in MODEL_POINTERS:
        model = document
        for member in pointer.split("/")[1:]:
            model = model.get(member) if isinstance(model, dict) else None
        if isinstance(model, dict):
            yield pointer, model


def model_name_problems(document: Any, catalogue: Catalogue) -> list[Problem]:
    """Returns a problem for each model of ``document`` that only a name describes when the catalogue lacks it, each
    whose architecture the submission cannot express, and each ``experts`` member that contradicts itself."""
    refused = [Problem(f"{pointer}/name", refused_model(model["name"], pointer, catalogue))
               for pointer, model in model_objects(document)
               if isinstance(model.get("name"), str) and catalogue.refused_model(model["name"]) is not None
               and ("parameters" not in model or "architecture" in model)]
    unknown = [Problem(f"{pointer}/name", unknown_model(model["name"], pointer, catalogue))
               for pointer, model in named_models(document)
               if "architecture" not in model and catalogue.model(model["name"]) is None
               and catalogue.refused_model(model["name"]) is None]
    return refused + unknown + expert_problems(document)


def refused_model(name: str, pointer: str, catalogue: Catalogue) -> str:
    """Returns why the public model ``name`` at ``pointer`` is refused: the architecture the contract cannot express."""
    canonical, entry = catalogue.refused_model(name)  # type: ignore[misc]
    return (f"model {name!r} ({canonical}) cannot be described by the submission's architecture: {entry['reason']} "
            f"({entry['refs']['architecture']}). It is refused rather than sized as a different model; a submission "
            f"may still name it beside {pointer}/parameters alone, as a label, for the checks that need only the "
            "parameter count.")


def expert_problems(document: Any) -> list[Problem]:
    """Returns a problem for each ``architecture.experts`` of ``document`` with more active experts than experts, or
    with as many leading dense layers as the architecture has layers (no layer left for the experts)."""
    problems = []
    for pointer, model in model_objects(document):
        architecture = model.get("architecture")
        experts = architecture.get("experts") if isinstance(architecture, dict) else None
        if not isinstance(experts, dict):
            continue
        where = f"{pointer}/architecture/experts"
        count, active = _number(experts.get("count")), _number(experts.get("active"))
        if count is not None and active is not None and active > count:
            problems.append(Problem(f"{where}/active", f"{active} active experts of {count}: a token is routed to at "
                                    f"most every expert, so active cannot exceed {where}/count"))
        layers, dense = _number(architecture.get("layers")), _number(experts.get("dense_layers"))
        if layers is not None and dense is not None and dense >= layers:
            problems.append(Problem(f"{where}/dense_layers", f"{dense} leading dense layers of {layers} leave no "
                                    "mixture-of-experts layer; a dense model states no experts"))
    return problems


def _number(member: Any) -> float | None:
    """Returns a member's number, bare or the value of ``{value, source, ref}``; None for anything else."""
    value = member.get("value") if isinstance(member, dict) else member
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def gpu_model_problems(document: Any, catalogue: Catalogue) -> list[Problem]:
    """Returns a problem for each node group whose GPU only an id describes when the catalogue lacks that id: without
    its memory_gib nothing can size a step on it, so the quote names a GPU the service cannot read (``H200`` for
    ``H200-SXM-141GB``). A GPU the catalogue lacks is described by its figures (memory_gib, bf16_tflops, …)."""
    problems = []
    for group_pointer, group in node_groups(document):
        gpu = group.get("gpu")
        name = gpu.get("model") if isinstance(gpu, dict) else None
        if isinstance(name, str) and catalogue.gpu(name) is None and "memory_gib" not in gpu:
            hint = _closest_hint(catalogue.closest_gpus(name), catalogue.gpu_models())
            pointer = f"{group_pointer}/gpu"
            problems.append(Problem(f"{pointer}/model", f"GPU {name!r} is not in the catalogue, and the node group "
                                    f"gives no {pointer}/memory_gib; {hint} A GPU the catalogue lacks is described by "
                                    "its figures (memory_gib, hbm_tbs, bf16_tflops, tdp_w)."))
    return problems


def server_model_problems(document: Any, catalogue: Catalogue) -> list[Problem]:
    """Returns a problem for each node group whose GPUs only a server id describes when the catalogue lacks that id (by
    id and alias): nothing fills the group's GPU, so every check that needs it would be left undecided (``HGX-H20`` for
    ``HGX-H200-8GPU``). A group that describes its GPU itself (a catalogued gpu.model, or its memory_gib) is read with
    the server id as a label, as it always was."""
    problems = []
    for group_pointer, group in node_groups(document):
        name = group.get("server_model")
        if not isinstance(name, str) or catalogue.server(name) is not None or _describes_gpu(group.get("gpu"),
                                                                                              catalogue):
            continue
        hint = _closest_hint(catalogue.closest_servers(name), catalogue.server_models())
        problems.append(Problem(f"{group_pointer}/server_model", f"server {name!r} is not in the catalogue, and the "
                                f"node group does not describe its GPU (a catalogued {group_pointer}/gpu/model, or "
                                f"{group_pointer}/gpu/memory_gib); {hint} A server the catalogue lacks is described by "
                                "its GPU (gpu.model and count) and its own figures (max_power_w, host_memory_gib, "
                                "nics)."))
    return problems


def _describes_gpu(gpu: Any, catalogue: Catalogue) -> bool:
    """Returns whether a node group's raw ``gpu`` object describes its GPU: by its figures (memory_gib) or an id the
    catalogue holds."""
    if not isinstance(gpu, dict):
        return False
    return "memory_gib" in gpu or (isinstance(gpu.get("model"), str) and catalogue.gpu(gpu["model"]) is not None)


def _closest_hint(closest: list[str], held: list[str]) -> str:
    """Returns the sentence that names the catalogue's closest entries, or all it holds when none is close."""
    return f"did you mean {', '.join(closest)}?" if closest else f"the catalogue holds {', '.join(held)}."


def unknown_model(name: str, pointer: str, catalogue: Catalogue) -> str:
    """Returns why ``name`` at ``pointer`` describes no model, and which catalogued names come closest."""
    hint = _closest_hint(catalogue.closest_models(name), catalogue.model_names())
    return (f"model {name!r} is not in the model catalogue, and the submission gives neither {pointer}/parameters "
            f"nor {pointer}/architecture; {hint} A model the catalogue lacks is described by its parameters "
            "(and architecture).")
