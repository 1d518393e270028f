"""Figures a submission states in the wrong unit: refused at their pointer before anything is evaluated.

A node's ``max_power_w`` below what its GPUs alone draw at their board power (the group's ``gpu.tdp_w``, else the
catalogue's; the GPUs as the group states them, else as its catalogued server has them) cannot be a node's maximum
input power in watts: it is almost always kilowatts typed into a W field (10.2 for a DGX H100's 10,200 W), and
evaluated as given it would pass rack-power with a node of 0.0 kW.
"""

from __future__ import annotations

from typing import Any

from rules.catalogue import Catalogue
from rules.job.pointers import node_groups
from schemas.problem import Problem


def _number(value: Any) -> float | None:
    """Returns a figure given bare or as {value, source}; None when it is neither."""
    if isinstance(value, dict):
        value = value.get("value")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _gpus_of(group: dict[str, Any], catalogue: Catalogue) -> dict[str, Any] | None:
    """Returns the node group's GPUs as it states them, else as its catalogued server has them (by id or alias), with
    the stated members winning; None when neither says."""
    server = catalogue.server(group.get("server_model")) if isinstance(group.get("server_model"), str) else None
    stated = group.get("gpu") if isinstance(group.get("gpu"), dict) else {}
    if server is None and not stated:
        return None
    return {**({"model": server["gpu_model"], "count": server["gpu_count"]} if server else {}), **stated}


def unit_problems(document: Any, catalogue: Catalogue) -> list[Problem]:
    """Returns a problem for each node group whose max_power_w is below its GPUs' board power."""
    problems = []
    for pointer, group in node_groups(document):
        power, gpu = _number(group.get("max_power_w")), _gpus_of(group, catalogue)
        if power is None or gpu is None:
            continue
        spec = catalogue.gpu(gpu.get("model")) if isinstance(gpu.get("model"), str) else None
        tdp, count = _number(gpu.get("tdp_w")) or (spec or {}).get("tdp_w"), _number(gpu.get("count"))
        if tdp is None or not count or power >= count * tdp:
            continue
        problems.append(Problem(
            f"{pointer}/max_power_w",
            f"max_power_w {power:g} W is below what the node's {count:g} GPUs alone draw ({count:g} × {tdp:,.0f} W = "
            f"{count * tdp:,.0f} W): give the node's maximum input power in W ({power:g} kW is {power * 1000:,.0f} W)"))
    return problems
