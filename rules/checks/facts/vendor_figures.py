"""The figures a quote supplies for hardware the catalogue lacks (rules/job/vendor_figures.py), as evidence rows."""

from __future__ import annotations

from typing import Any

from rules.checks.base import Context
from rules.job.vendor_figures import vendor_supplied_figures


def vendor_supplied_rows(ctx: Context) -> list[dict[str, Any]]:
    """Returns one row ``{node_group, hardware, id, pointer, value}`` per figure the quote supplies for a GPU or server
    the catalogue lacks (each read, so the check names it among its inputs); empty when the catalogue holds them all."""
    return [{"node_group": found.node_group, "hardware": found.hardware, "id": found.id,
             "pointer": found.figure.pointer, "value": ctx.value(found.figure)}
            for found in vendor_supplied_figures(ctx.job.cluster, ctx.inputs.catalogue)]
