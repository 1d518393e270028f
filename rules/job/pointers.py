"""JSON Pointers of the submission's members (schemas/submission.schema.json): where the job parser reads them, and
where the evidence of a check names them."""

from collections.abc import Iterator
from dataclasses import fields
from functools import cache
from typing import Any

from rules.job.cluster import Cluster
from rules.job.measured import Measurements
from rules.job.workload import Serving, Training

TRAINING = "/workload/training"
INFERENCE = "/workload/inference"
QUOTE = "/quote"
MEASUREMENTS = "/measurements"

# Where each section of the job (rules/job/spec.py) sits in the submission.
SECTIONS = {"training": TRAINING, "serving": INFERENCE, "cluster": QUOTE, "measurements": MEASUREMENTS}


def node_groups(document: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yields (pointer, node group) of each node group object of a raw ``document`` (before it is parsed), so that
    what is refused before parsing is named at its pointer."""
    groups = document.get("quote", {}).get("node_groups") if isinstance(document, dict) else None
    for index, group in enumerate(groups if isinstance(groups, list) else []):
        if isinstance(group, dict):
            yield f"{QUOTE}/node_groups/{index}", group


@cache
def field_pointer(path: str) -> str:
    """Returns the JSON Pointer of the job's field at dotted ``path`` (``training.model.parameters``,
    ``cluster.node_groups.0.gpu.count``): the submission member behind it, for evidence and for the record's pages.

    KeyError names a path that is not a field of the job.
    """
    head, *rest = path.split(".")
    section: type | None = {"training": Training, "serving": Serving, "cluster": Cluster,
                            "measurements": Measurements}.get(head)
    if section is None:
        raise KeyError(path)
    pointer = SECTIONS[head]
    parts = iter(rest)
    for name in parts:
        declared = {f.name: f.metadata for f in fields(section)}.get(name)
        if declared is None or section is None:
            raise KeyError(path)
        pointer += f"/{declared['at']}"
        section = declared["section"]
        if declared["each"] is not None:
            index = next(parts, None)
            if index is None:
                break
            if not index.isdigit():
                raise KeyError(path)
            pointer += f"/{index}"
            section = declared["each"]
    return pointer
