"""The map in docs/ARCHITECTURE.md, checked: imports point one way between rooms, modules stay small."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gptlab"
BASICS = {"errors", "registry", "fields", "runio", "layout", "cells", "plugins"}
# Which rooms each room may import from (docs/ARCHITECTURE.md, "Rooms").
ALLOWED = {
    "basics": {"basics"},
    "model": {"basics", "model"},
    "run": {"basics", "model", "run"},
    "cli": {"basics", "model", "run", "cli"},
    "executors": {"basics", "model", "run", "executors"},
    "report": {"basics", "model", "run", "cli", "report"},
    "sweep": {"basics", "model", "run", "cli", "executors", "report", "sweep"},
}


def room(module: str) -> str:
    """The room of a dotted module name inside gptlab."""
    parts = module.split(".")
    if parts == ["gptlab"]:
        return "model"  # the package root is the public model API (ModelConfig, build_model, REGISTRIES)
    top = parts[1]
    if top in BASICS:
        return "basics"
    if top in ("train", "sample"):
        return "cli"
    if top == "export":
        return "report"  # another view of results/NAME (TensorBoard files): it reads them through the report
    if top in ("model", "run", "executors", "report", "sweep"):
        return top
    raise AssertionError(f"module {module} is in no room of docs/ARCHITECTURE.md")


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py"))


def dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def gptlab_imports(path: Path) -> list[tuple[int, str]]:
    """Every gptlab module `path` imports, at any depth (lazy imports inside functions count)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "gptlab":  # from gptlab import x: x may be a subpackage
                found += [(node.lineno, f"gptlab.{a.name}" if (PACKAGE / a.name).exists() or (PACKAGE / f"{a.name}.py").exists()
                           else "gptlab") for a in node.names]
            elif node.module.startswith("gptlab."):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name == "gptlab" or a.name.startswith("gptlab.")]
    return found


# The one upward import, kept on purpose: a bad report.equivalence_margin is refused with the YAML.
EXCEPTIONS = {("gptlab.sweep.spec", "gptlab.report.calls")}


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path):
    source = dotted(path)
    if source == "gptlab":
        return  # the package root re-exports the public API
    here = room(source)
    wrong = [f"line {line}: {target} ({room(target)})" for line, target in gptlab_imports(path)
             if room(target) not in ALLOWED[here] and (source, target) not in EXCEPTIONS]
    assert not wrong, f"{source} is in room '{here}', which may import {sorted(ALLOWED[here])}; it imports " + "; ".join(wrong)


def test_the_rules_catch_an_upward_import(tmp_path):
    """The checker itself: a run module importing the sweep is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from gptlab.sweep.spec import load_spec\n")
    assert [room(t) for _, t in gptlab_imports(bad)] == ["sweep"]
    assert "sweep" not in ALLOWED["run"]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_350_lines(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= 350, f"{path.relative_to(PACKAGE)} has {lines} lines; split it by what its parts own"


def defines_planner(path: Path) -> bool:
    """Whether a module defines a planner (a class with a `next_stage` method)."""
    return any(isinstance(node, ast.ClassDef) and any(isinstance(f, ast.FunctionDef) and f.name == "next_stage"
                                                      for f in node.body)
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def driver_imports(path: Path) -> list[str]:
    """The sweep driver's modules `path` imports (`gptlab.sweep` itself re-exports the CLI's main)."""
    driver = ("gptlab.sweep", "gptlab.sweep.execute", "gptlab.sweep.cli", "gptlab.sweep.__main__")
    return [f"line {line}: {target}" for line, target in gptlab_imports(path) if target in driver]


def test_planners_never_import_the_driver():
    """One sweep loop: `execute` asks the planners for stages; no planner calls back into it (or the CLI)."""
    planners = [p for p in sorted((PACKAGE / "sweep").rglob("*.py")) if defines_planner(p)]
    assert {"gptlab.sweep.planners", "gptlab.sweep.adaptive"} <= {dotted(p) for p in planners}
    wrong = [f"{dotted(p)} {hit}" for p in planners for hit in driver_imports(p)]
    assert not wrong, "a planner imports the sweep driver: " + "; ".join(wrong)


def test_the_rules_catch_a_planner_calling_back_into_the_driver(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class Rounds:\n    def next_stage(self, finished):\n"
                   "        from gptlab.sweep.execute import train\n        return None\n")
    assert defines_planner(bad) and driver_imports(bad) == ["line 3: gptlab.sweep.execute"]
