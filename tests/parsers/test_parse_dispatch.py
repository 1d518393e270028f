"""parsers.parse(kind, text): one entry point per diagnostic kind, pure standard library."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import parsers
from parsers import KINDS, ParseError, csv_series, fio, nccl_tests, topology, torch_memory

DATA = Path(__file__).parents[1] / "data"
PACKAGE = Path(parsers.__file__).parent


def test_kinds_are_the_documented_six():
    assert KINDS == ("topo", "nccl", "fio", "torch-memory", "scaling-csv", "power-csv")


@pytest.mark.parametrize(
    ("kind", "text", "module_parse"),
    [
        ("topo", (DATA / "topology" / "puget_wrx90_threadripper_2x_rtx6000ada.txt").read_text(), topology.parse),
        ("nccl", (DATA / "nccl" / "broadcast_2x_rtx2080ti_pcie.txt").read_text(), nccl_tests.parse),
        ("fio", (DATA / "fio" / "seq_rw_4k_fio3.33_interrupted.json").read_text(), fio.parse),
        ("torch-memory", "max_memory_allocated: 1073741824", torch_memory.parse),
        ("scaling-csv", "gpus,tokens_per_s\n8,1000\n", csv_series.parse_scaling),
        ("power-csv", "timestamp,watts\n0,500\n", csv_series.parse_power),
    ],
)
def test_each_kind_reaches_its_parser(kind, text, module_parse):
    assert parsers.parse(kind, text) == module_parse(text)


def test_options_reach_the_parser():
    text = (DATA / "nccl" / "all_reduce_dgx_a100_2node_old_error_column.txt").read_text()

    assert parsers.parse("nccl", text, collective="all_reduce")["collective"] == "all_reduce"


def test_unknown_kind_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"^unknown diagnostic kind 'iperf'; expected one of topo, nccl, fio"):
        parsers.parse("iperf", "")


def test_parse_error_is_a_value_error_carrying_line_and_detail():
    with pytest.raises(ValueError) as caught:
        parsers.parse("scaling-csv", "gpus,tokens_per_s\nx,1\n")

    assert isinstance(caught.value, ParseError)
    assert (caught.value.line, caught.value.detail) == (2, "expected gpus as a positive integer, found 'x'")


def test_modules_import_only_the_standard_library_and_each_other():
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root == "parsers" or root in sys.stdlib_module_names, f"{path.name} imports {root}"


def test_importing_the_package_loads_nothing_of_rules_service_or_workers():
    code = (
        "import sys, parsers; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'rules', 'service', 'workers', 'schemas'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout.strip() == "[]"
