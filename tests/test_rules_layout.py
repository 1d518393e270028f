"""The shape of rules/: small modules, imports that point one way, and arithmetic only in the estimators.

Read from the source, so that a change that breaks the layering fails here rather than in review.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RULES = Path(__file__).resolve().parents[1] / "rules"
MAX_MODULE_LINES = 400


def _modules() -> dict[str, Path]:
    """Returns every module of rules/ by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(RULES.rglob("*.py")):
        parts = list(path.relative_to(RULES.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, tree: ast.Module) -> set[str]:
    """Returns the rules modules a module imports at its top level (``from a import b`` names a.b if a module)."""
    imported = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                imported.add(submodule if submodule in MODULES else node.module)
    return {name for name in imported if name in MODULES and name != module}


def test_no_module_in_rules_is_longer_than_400_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules by concern: {long}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Returns the import cycles of ``graph`` (module → modules it imports), each as a path back to its start."""
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, [*trail, target])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    return cycles


def test_rules_imports_have_no_cycle() -> None:
    graph = {name: _imported(name, ast.parse(path.read_text())) for name, path in MODULES.items()}
    assert "rules.checks.facts.layout" in graph["rules.checks.facts.memory"]  # the graph is read from the sources
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def test_a_cycle_would_be_found() -> None:
    graph = {"training": {"cluster", "base"}, "cluster": {"base", "training"}, "base": set()}
    assert _cycles(graph) == [["cluster", "training", "cluster"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_inside_a_function_in_rules() -> None:
    inside = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inside += [f"{name}:{inner.lineno}" for inner in ast.walk(node)
                           if isinstance(inner, ast.Import | ast.ImportFrom)]
    assert not inside, f"imports inside functions or classes: {inside}"


def _arithmetic(tree: ast.AST) -> list[str]:
    """Returns each arithmetic operation under ``tree``: operators on numbers and the numeric builtins."""
    def text(node: ast.AST) -> bool:
        return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.BitOr):  # X | None is a type
            if not (isinstance(node.op, ast.Add) and (text(node.left) or text(node.right))):
                found.append(f"{node.lineno}: {type(node.op).__name__}")
        elif isinstance(node, ast.AugAssign) and not text(node.value):
            found.append(f"{node.lineno}: {type(node.op).__name__}=")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and not isinstance(node.operand,
                                                                                              ast.Constant):
            found.append(f"{node.lineno}: negation")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
                "abs", "max", "min", "round", "sum", "divmod", "pow"):
            found.append(f"{node.lineno}: {node.func.id}()")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and isinstance(node.func.value, ast.Name) and node.func.value.id == "math"):
            found.append(f"{node.lineno}: math.{node.func.attr}()")
    return found


FACT_READERS = sorted((RULES / "checks" / "facts").glob("*.py"))
CHECK_MODULES = sorted(p for p in (RULES / "checks").glob("*.py") if p.name not in {"__init__.py", "base.py"})


@pytest.mark.parametrize("path", FACT_READERS, ids=lambda p: p.name)
def test_the_fact_readers_leave_every_figure_to_the_estimators(path: Path) -> None:
    assert not _arithmetic(ast.parse(path.read_text())), f"{path.name} computes; move it to rules/estimates"


@pytest.mark.parametrize("path", CHECK_MODULES, ids=lambda p: p.name)
def test_a_checks_gather_names_facts_and_computes_nothing(path: Path) -> None:
    gathers = [node for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef) and node.name == "gather"]
    assert gathers, f"{path.name} declares no gather"
    found = [line for gather in gathers for line in _arithmetic(gather)]
    assert not found, f"{path.name} gather computes at {found}; move it to rules/estimates"


def test_the_arithmetic_detector_sees_what_it_forbids() -> None:
    computing = ast.parse("x = a / b\ny += 1\nz = max(a, b)\nw = -a\nv = math.ceil(a)\nu: int | None = None\n"
                          "s = 'a' + f'{b}'")
    assert len(_arithmetic(computing)) == 5


def test_no_pointer_is_a_one_letter_constant() -> None:
    # A JSON Pointer is named for what it points to (TRAINING, RACKS), not T or R.
    one_letter = []
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and len(node.targets[0].id) == 1 and isinstance(node.value, ast.Constant | ast.JoinedStr)):
                one_letter.append(f"{name}.{node.targets[0].id}")
    assert not one_letter, f"name these pointers: {one_letter}"
