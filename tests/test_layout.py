"""The package layout: dependencies point one way.

Imports are read from the source with ``ast`` (every ``import`` statement,
also those inside functions), so these tests need neither QGIS nor the
modules' own dependencies.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "qgis_plugin" / "dpgeo_qgis"
MECHANISMS = ROOT / "dpgeo" / "mechanisms"

#: Modules above the mechanisms in the data flow; a mechanism never imports them.
ABOVE_MECHANISMS = ("dpgeo.pipeline", "dpgeo.declarations", "dpgeo.generators", "dpgeo.series", "dpgeo.cli",
                    "dpgeo.server", "dpgeo.io", "dpgeo.result", "dpgeo.polygons", "dpgeo.nested_polygons",
                    "dpgeo.compare", "dpgeo.evaluation", "dpgeo.formats")
PIPELINE = ROOT / "dpgeo" / "pipeline"
DECLARATIONS = ROOT / "dpgeo" / "declarations"


def module_name(path: Path, root: Path) -> str:
    """Dotted name of ``path`` under ``root`` (whose parent is on sys.path); packages by their folder."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved; ``from X import y``
    counts as importing ``X.y`` when ``X/y.py`` or ``X/y/`` exists, else ``X``)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                folder = root.parent.joinpath(*sub.split("."))
                out.add(sub if folder.with_suffix(".py").exists() or folder.is_dir() else base)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Imports between the modules of the package at ``root`` (outside imports left out)."""
    files = sorted(root.rglob("*.py"))
    names = {module_name(f, root) for f in files}
    return {module_name(f, root): {m for m in imported_modules(f, root) if m in names and m != module_name(f, root)}
            for f in files}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first = last), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_are_resolved():
    deps = imported_modules(MECHANISMS / "wavecluster" / "privthr.py", ROOT / "dpgeo")
    assert {"dpgeo.noise", "dpgeo.mechanisms.wavecluster.privqt", "dpgeo.mechanisms.wavecluster.transform"} <= deps


@pytest.mark.skipif(not PLUGIN.is_dir(), reason="the QGIS plugin is not in this checkout")
def test_qgis_plugin_has_no_import_cycle():
    graph = import_graph(PLUGIN)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in the QGIS plugin: " + " -> ".join(cycle)


@pytest.mark.skipif(not PLUGIN.is_dir(), reason="the QGIS plugin is not in this checkout")
def test_qgis_plugin_imports_go_down():
    """plugin -> provider -> algorithms -> preview -> base -> helpers: nothing imports a module above it."""
    graph = import_graph(PLUGIN)
    order = ["dpgeo_qgis.plugin", "dpgeo_qgis.provider", "dpgeo_qgis.algorithms", "dpgeo_qgis.preview",
             "dpgeo_qgis.base"]
    for i, upper in enumerate(order):
        for lower in [m for m in graph if m not in order[:i + 1] and m != "dpgeo_qgis"]:
            assert upper not in graph[lower], f"{lower} imports {upper}, which is above it"
    helpers = set(graph) - set(order) - {"dpgeo_qgis"}
    assert {"dpgeo_qgis.parameters", "dpgeo_qgis.reading", "dpgeo_qgis.writing", "dpgeo_qgis.running",
            "dpgeo_qgis.style"} <= helpers


def test_mechanisms_do_not_import_what_is_above_them():
    offenders = []
    for path in sorted(MECHANISMS.rglob("*.py")):
        for mod in imported_modules(path, ROOT / "dpgeo"):
            if mod == "dpgeo" or any(mod == top or mod.startswith(top + ".") for top in ABOVE_MECHANISMS):
                offenders.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not offenders, "mechanisms must depend only on lower layers:\n" + "\n".join(offenders)


def test_dpgeo_has_no_import_cycle():
    cycle = find_cycle(import_graph(ROOT / "dpgeo"))
    assert cycle is None, "import cycle in dpgeo: " + " -> ".join(cycle)


@pytest.mark.parametrize("folder", [ROOT / "dpgeo", PLUGIN], ids=["dpgeo", "qgis_plugin"])
def test_modules_stay_small(folder):
    """No module over 600 lines, in the library as in the plugin: a longer one holds more than one family."""
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this checkout")
    big = {str(p.relative_to(ROOT)): n for p in sorted(folder.rglob("*.py"))
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not big, f"modules over 600 lines (split them by what they do): {big}"


def test_module_listing_in_the_package_docstring_is_the_import_order():
    """dpgeo/__init__.py lists the modules in data-flow order; each imports only modules above it."""
    import dpgeo

    doc = dpgeo.__doc__
    block = doc[doc.index("::") + 2:doc.index("The flat API")]
    listed = [ln.split()[0].rstrip("/") for ln in block.splitlines() if ln.startswith("    ") and ln[4] != " "]
    assert listed[:3] == ["errors", "domain", "grid"] and "mechanisms" in listed and listed[-1] == "cli"
    top = {name: i for i, name in enumerate(listed)}
    graph = import_graph(ROOT / "dpgeo")
    wrong = []
    for mod, deps in graph.items():
        first = mod.split(".")[1] if "." in mod else None
        if first not in top:
            continue
        for dep in deps:
            other = dep.split(".")[1]
            if other in top and top[other] > top[first]:
                wrong.append(f"{mod} imports {dep}, listed below it")
    assert not wrong, "\n".join(wrong)


def _mechanism_classes(path: Path) -> list[str]:
    """The classes of ``path`` that derive from a mechanism declaration (a base whose name ends in Mechanism)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            if any(b.endswith("Mechanism") for b in bases):
                out.append(node.name)
    return out


def test_pipeline_is_the_runner_alone():
    """dpgeo/pipeline/ runs releases: it declares no mechanism and imports neither the declarations, the
    generators nor a front end (the declarations import the runner, not the other way round)."""
    offenders = []
    for path in sorted(PIPELINE.rglob("*.py")):
        offenders += [f"{path.relative_to(ROOT)} declares {c}" for c in _mechanism_classes(path)]
        for mod in imported_modules(path, ROOT / "dpgeo"):
            if any(mod == top or mod.startswith(top + ".") for top in
                   ("dpgeo.declarations", "dpgeo.generators", "dpgeo.cli", "dpgeo.server")):
                offenders.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert not offenders, "\n".join(offenders)


def test_every_mechanism_is_declared_in_declarations():
    """A mechanism's declaration lives in dpgeo/declarations/ (the registry lists it); nowhere else. (dpgeo compare's
    non-private comparison systems declare their parameters beside the comparison: they are never released.)"""
    owner_only = ROOT / "dpgeo" / "compare"
    elsewhere = [f"{p.relative_to(ROOT)}: {', '.join(c)}" for p in sorted((ROOT / "dpgeo").rglob("*.py"))
                 if DECLARATIONS not in p.parents and owner_only not in p.parents and p.name != "declare.py"
                 and (c := _mechanism_classes(p))]
    assert not elsewhere, "mechanism declarations outside dpgeo/declarations/:\n" + "\n".join(elsewhere)
    assert all(_mechanism_classes(p) or p.name in ("__init__.py", "registry.py") or p.name.startswith("spans_")
               for p in DECLARATIONS.glob("*.py")), "dpgeo/declarations/ holds declarations (and their helpers) only"


def test_series_has_one_home():
    """No module is called series.py: what a series is lives in the package dpgeo/series/."""
    assert (ROOT / "dpgeo" / "series" / "__init__.py").is_file()
    stray = [str(p.relative_to(ROOT)) for p in (ROOT / "dpgeo").rglob("series.py")]
    assert not stray, stray


def test_the_runner_is_one_function():
    """run_release is the only caller of the counting and of the charge: one skeleton runs every release."""
    callers = {}
    for path in sorted((ROOT / "dpgeo").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name in ("start_charge", "base_metadata"):
                    callers.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    assert callers == {"start_charge": {"dpgeo/pipeline/run.py"}, "base_metadata": {"dpgeo/pipeline/run.py"}}, callers
