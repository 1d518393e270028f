"""``nvidia-smi topo -m``: GPUs, NICs, their CPU and NUMA affinity, and the nearest NIC of each GPU.

The matrix ``nvidia-smi topo -m`` prints (NVIDIA driver; the legend it prints is the reference):

- a header row of device names, GPUs first (``GPU0 GPU1 ...``), then NICs, then the affinity
  columns: ``CPU Affinity``, ``NUMA Affinity`` (R450 and later) and ``GPU NUMA ID`` (R535 and later);
  drivers before the NUMA column print ``CPU Affinity`` alone, and a GPU-only matrix has no NIC;
- one row per device, in header order, whose cells are the path to every column device:
  ``X`` (self), ``NV#`` (a bonded set of # NVLinks), ``PIX`` (at most one PCIe bridge), ``PXB``
  (several PCIe bridges, not through the host bridge), ``PHB`` (through a PCIe host bridge, the CPU),
  ``NODE`` (between host bridges of one NUMA node), ``SYS`` (across the SMP interconnect between
  NUMA nodes; drivers before R384 printed ``SOC``); GPU rows end with their affinity values, NIC
  rows leave them empty;
- then the ``Legend:`` and, from R470 on, a ``NIC Legend:`` mapping ``NIC0`` to its RDMA device
  (``mlx5_0``, ``mlx5_bond_0`` for a bonded pair); older drivers name the NIC columns ``mlx5_0``
  themselves.

Cells are separated by tabs, or by runs of spaces where a terminal copy expanded them; a value never
contains blanks, so cells are split on whitespace. ``X`` may carry padding (``" X "``, ``"X "``).
Text before the header (a shell prompt, the ``nvidia-smi`` table) and after the legend is ignored;
terminal escapes (the header is underlined with ``ESC[4m``) are removed first.

The nearest NIC of a GPU is the one with the best PCIe path in the order PIX, PXB, PHB, NODE, SYS,
the first in header order on a tie. That order is NCCL's path ranking (``src/graph/topo.h``:
PATH_PIX < PATH_PXB < PATH_PHB < PATH_SYS, NODE between PHB and SYS), by which NCCL picks the NIC of
each GPU and decides GPUDirect RDMA (``src/graph/paths.cc``).
"""

from __future__ import annotations

import re
from typing import Any

from parsers._text import clean_lines
from parsers.errors import ParseError

# PCIe paths from nearest to farthest; NV# and anything unknown rank after SYS for a NIC.
PCIE_PATHS_NEAREST_FIRST: tuple[str, ...] = ("PIX", "PXB", "PHB", "NODE", "SYS")
AFFINITY_COLUMNS: tuple[str, ...] = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# Paths that stay within one NUMA node: a NIC reached this way from a GPU shares the GPU's node.
_SAME_NUMA_PATHS = frozenset({"PIX", "PXB", "PHB", "NODE"})
_RENAMED = {"SOC": "SYS"}  # pre-R384 drivers

_LINK = re.compile(r"^(?:X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+)$")
_DEVICE = re.compile(r"^[A-Za-z][\w.:-]*$")
_GPU = re.compile(r"^GPU\d+$")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_LINK_NAMES = "X, SYS, NODE, PHB, PXB, PIX, NV#"


def parse(text: str) -> dict[str, Any]:
    """Return the GPUs (NUMA node, CPU affinity, nearest NIC), NICs and GPU links of ``topo -m`` text.

    Shape: ``{"gpus": [{"name", "numa_node", "cpu_affinity", "nearest_nic": {"name", "device",
    "link"} | None}], "nics": [{"name", "device", "numa_node"}], "links": {gpu: {device: link}}}``.
    ``numa_node`` is None when the matrix prints no single node (no NUMA column, ``N/A``, or a range
    such as ``6-7``); a NIC's comes from its row when printed, else from the GPUs it reaches without
    leaving their NUMA node (PIX, PXB, PHB, NODE) when they agree on one. ``device`` is the NIC
    Legend's name, the column name itself on drivers that print ``mlx5_0`` columns, None without a
    legend. Raises ParseError naming the line for a missing header, a row with the wrong number of
    cells, an unknown link type, a missing row or a truncated NIC Legend.
    """
    lines = clean_lines(text)
    header_index, devices, affinity = _find_header(lines)
    rows, after = _read_rows(lines, header_index, devices, affinity)
    legend = _read_nic_legend(lines, after, [d for d in devices if not _GPU.match(d)])
    return _assemble(devices, affinity, rows, legend)


def _header_columns(tokens: list[str]) -> list[str]:
    columns: list[str] = []
    i = 0
    while i < len(tokens):
        for name in AFFINITY_COLUMNS:
            words = name.split()
            if tokens[i : i + len(words)] == words:
                columns.append(name)
                i += len(words)
                break
        else:
            columns.append(tokens[i])
            i += 1
    return columns


def _find_header(lines: list[str]) -> tuple[int, list[str], list[str]]:
    for index, line in enumerate(lines):
        tokens = line.split()
        if not tokens or tokens[0] != "GPU0" or any(_LINK.match(t) for t in tokens):
            continue
        columns = _header_columns(tokens)
        devices = [c for c in columns if c not in AFFINITY_COLUMNS]
        affinity = [c for c in columns if c in AFFINITY_COLUMNS]
        if columns != devices + affinity or not all(_DEVICE.match(d) for d in devices):
            continue
        if len(set(devices)) != len(devices):
            raise ParseError(index + 1, f"expected each device once in the header, found {' '.join(devices)}")
        return index, devices, affinity
    raise ParseError(
        len(lines), "expected the topo -m header (device names from GPU0, then CPU Affinity), found end of input"
    )


def _columns_summary(devices: list[str], affinity: list[str], with_affinity: bool) -> str:
    tail = ", ".join(affinity) if with_affinity and affinity else devices[-1]
    return devices[0] if tail == devices[0] else f"{devices[0]} ... {tail}"


def _read_rows(
    lines: list[str], header_index: int, devices: list[str], affinity: list[str]
) -> tuple[dict[str, tuple[list[str], list[str]]], int]:
    rows: dict[str, tuple[list[str], list[str]]] = {}
    width = len(devices)
    index = header_index + 1
    for device in devices:
        line_no = index + 1
        tokens = lines[index].split() if index < len(lines) else []
        if not tokens or tokens[0] == "Legend:":
            if not any(line.strip() for line in lines[index:]):
                found = "end of input"
            else:
                found = f"'{lines[index].strip()}'" if tokens else "a blank line"
            raise ParseError(line_no, f"expected the row for {device} ({width} devices in the header), found {found}")
        if tokens[0] != device:
            raise ParseError(line_no, f"expected the row for {device}, found '{tokens[0]}'")
        cells = tokens[1:]
        is_gpu = bool(_GPU.match(device))
        # GPU rows carry every affinity value (N/A when unknown); NIC rows usually none, some builds a few
        fewest = width + len(affinity) if is_gpu else width
        if not fewest <= len(cells) <= width + len(affinity):
            # a NIC row that stops short lacks link cells; one that runs past them, affinity values
            expected = width if not is_gpu and len(cells) < width else width + len(affinity)
            summary = _columns_summary(devices, affinity, expected > width)
            raise ParseError(line_no, f"expected {expected} columns ({summary}), found {len(cells)}")
        links = cells[:width]
        for column, link in zip(devices, links, strict=True):
            if not _LINK.match(link):
                raise ParseError(line_no, f"expected a link type ({_LINK_NAMES}) under {column}, found '{link}'")
            if (link == "X") != (column == device):
                expected_link = "X" if column == device else f"a path other than X to {column}"
                raise ParseError(line_no, f"expected {expected_link} in the {device} row, found '{link}'")
        rows[device] = (links, cells[width:])
        index += 1
    return rows, index


def _read_nic_legend(lines: list[str], start: int, nics: list[str]) -> dict[str, str]:
    legend: dict[str, str] = {}
    last_line = None
    for index in range(start, len(lines)):
        match = _LEGEND_NIC.match(lines[index])
        if match and match.group(1) in nics:
            legend[match.group(1)] = match.group(2)
            last_line = index + 1
    listed = [n for n in nics if re.match(r"^NIC\d+$", n)]
    if legend and len(legend) < len(listed):
        missing = next(n for n in listed if n not in legend)
        raise ParseError(
            (last_line or len(lines)) + 1, f"expected '{missing}: <device>' in the NIC Legend, found end of legend"
        )
    return legend


def _single_node(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None


def _rank(link: str) -> int:
    link = _RENAMED.get(link, link)
    return PCIE_PATHS_NEAREST_FIRST.index(link) if link in PCIE_PATHS_NEAREST_FIRST else len(PCIE_PATHS_NEAREST_FIRST)


def _assemble(
    devices: list[str], affinity: list[str], rows: dict[str, tuple[list[str], list[str]]], legend: dict[str, str]
) -> dict[str, Any]:
    nic_names = [d for d in devices if not _GPU.match(d)]
    column = {name: i for i, name in enumerate(devices)}

    def device_of(nic: str) -> str | None:
        return legend.get(nic) if re.match(r"^NIC\d+$", nic) else nic

    def affinity_value(row: str, name: str) -> str | None:
        values = rows[row][1]
        if name not in affinity or affinity.index(name) >= len(values):
            return None
        value = values[affinity.index(name)]
        return None if value == "N/A" else value

    gpus = []
    links: dict[str, dict[str, str]] = {}
    for gpu in (d for d in devices if _GPU.match(d)):
        row_links = rows[gpu][0]
        links[gpu] = {other: row_links[column[other]] for other in devices if other != gpu}
        nearest = None
        if nic_names:
            best = min(nic_names, key=lambda nic: _rank(row_links[column[nic]]))
            nearest = {"name": best, "device": device_of(best), "link": row_links[column[best]]}
        gpus.append(
            {
                "name": gpu,
                "numa_node": _single_node(affinity_value(gpu, "NUMA Affinity")),
                "cpu_affinity": affinity_value(gpu, "CPU Affinity"),
                "nearest_nic": nearest,
            }
        )

    nics = []
    for nic in nic_names:
        numa = _single_node(affinity_value(nic, "NUMA Affinity"))
        if numa is None:
            near = {
                g["numa_node"]
                for g in gpus
                if g["numa_node"] is not None and links[g["name"]][nic] in _SAME_NUMA_PATHS
            }
            numa = near.pop() if len(near) == 1 else None
        nics.append({"name": nic, "device": device_of(nic), "numa_node": numa})
    return {"gpus": gpus, "nics": nics, "links": links}
