"""The house's layout: no module imports one that imports it back (at any depth, function-level
imports included: a circle means a shared piece belongs in a module of its own), and no module
is over 400 lines."""

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent / "streamscale"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def import_graph() -> nx.DiGraph:
    mods = _modules()
    graph = nx.DiGraph()
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for target in targets:
                # a package importing its own modules (its public names) is not a circle
                if target in mods and target != name and not target.startswith(name + "."):
                    graph.add_edge(name, target)
    return graph


def test_no_module_imports_one_that_imports_it_back():
    assert list(nx.simple_cycles(import_graph())) == []


def test_the_graph_sees_imports_inside_functions_and_relative_ones():
    graph = import_graph()
    assert graph.has_edge("streamscale.sparkio.classdata", "streamscale.sparkio.session")  # inside build_archive
    assert graph.has_edge("streamscale.sparkio.session", "streamscale.sparkio.driveropts")
    assert not graph.has_edge("streamscale.sparkio.driveropts", "streamscale.sparkio.session")


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 400}
    assert long == {}


def test_no_test_module_imports_another():
    # shared fakes and helpers live in helpers.py and conftest.py: a test module is no library
    tests = Path(__file__).resolve().parent
    found = []
    for path in tests.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[-1].startswith("test_") and node.module.startswith("tests"):
                    found.append(f"{path.relative_to(tests)}: {node.module}")
    assert found == []
