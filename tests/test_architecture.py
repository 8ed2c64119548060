"""The house rules of docs/ARCHITECTURE.md, checked: imports point one way between rooms, no import circles,
functions stay short, every module has a docstring, no module takes another's private names, a status or a call
word is typed by its owner alone, the report's steps keep to their files, and the calibration beside the package
(`calibration/`) keeps the same rules and stays out of it. The map itself is checked too: short, every path it
names exists, every room of gptlab/ on it. Most checks have a test of their own that plants a bad input and shows
the check catches it."""
from __future__ import annotations

import ast
import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from gptlab.stats.calls import CALLS
from gptlab.stats.robustness import DEPENDS, NOT_CHECKED, ROBUST
from gptlab.statuses import STATUSES

PACKAGE = Path(__file__).resolve().parents[1] / "gptlab"
REPO = PACKAGE.parent
CALIBRATION = REPO / "calibration"  # beside the package, not installed: it imports gptlab, never the reverse
BASICS = {"errors", "registry", "fields", "runio", "plugins", "statuses", "roles"}
# Which rooms each room may import from (docs/ARCHITECTURE.md, "The rooms").
ALLOWED = {
    "basics": {"basics"},
    "model": {"basics", "model"},
    "run": {"basics", "model", "run"},
    "cli": {"basics", "model", "run", "cli", "executors", "stats", "report", "sweep", "kinds"},  # they join rooms
    "executors": {"basics", "model", "run", "executors"},
    "stats": {"basics", "stats"},  # numbers only: below the report and the sweep
    "report": {"basics", "model", "run", "stats", "sweep", "report"},  # not the CLIs; the sweep: its load step only
    "sweep": {"basics", "model", "run", "executors", "stats", "sweep"},  # never the report: its command line joins them
    # each kind of sweep, one folder: its sweep side and its report side, through the hooks of both
    "kinds": {"basics", "model", "run", "executors", "stats", "sweep", "report", "kinds"},
}


def room(module: str) -> str:
    """The room of a dotted module name inside gptlab."""
    parts = module.split(".")
    if parts == ["gptlab"]:
        return "model"  # the package root is the public model API (ModelConfig, build_model, REGISTRIES)
    top = parts[1]
    if top in BASICS:
        return "basics"
    if top in ("train", "sample", "prepare", "sweep_cli") or parts[-1] == "__main__" and top == "sweep":
        return "cli"  # `python -m gptlab.sweep` runs the sweep's command line, which joins the sweep and the report
    if top == "export":
        return "report"  # another view of results/NAME (TensorBoard files): it reads them through the report
    if top in ("model", "run", "executors", "stats", "report", "sweep", "kinds"):
        return top
    raise AssertionError(f"module {module} is in no room of docs/ARCHITECTURE.md")


def modules(package: Path = PACKAGE) -> list[Path]:
    return sorted(p for p in package.rglob("*.py"))


def dotted(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str, package: Path = PACKAGE) -> bool:
    """Whether the dotted `name` is a module or subpackage of `package` (a file, not a name inside one)."""
    folder = package.joinpath(*name.split(".")[1:])
    return folder.with_suffix(".py").is_file() or (folder / "__init__.py").is_file()


def imported_from(node: ast.ImportFrom, path: Path, package: Path = PACKAGE) -> str:
    """The dotted module a `from ... import` in `path` reads from, a relative one resolved against `path`'s package."""
    base = node.module or ""
    if not node.level:
        return base
    here = dotted(path, package).split(".")
    here = here if path.name == "__init__.py" else here[:-1]
    return ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))


def gptlab_imports(path: Path, package: Path = PACKAGE) -> list[tuple[int, str]]:
    """Every gptlab module `path` imports, at any depth: lazy imports inside functions count, and so do those under
    `if TYPE_CHECKING:` (a checker that resolves them follows the circle too). `from A import b` is module A.b when b
    is one (`from gptlab.report import verdicts`), else A; relative imports are resolved against `path`'s package."""
    root, found = package.name, []

    def inside(name: str) -> bool:
        return name == root or name.startswith(root + ".")

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = imported_from(node, path, package)
            if inside(base):
                found += [(node.lineno, f"{base}.{a.name}" if is_module(f"{base}.{a.name}", package) else base)
                          for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if inside(a.name)]
    return found


# Imports the rooms forbid, kept on purpose (none: the margin and the seed rule live in `stats`, below the sweep).
EXCEPTIONS: set[tuple[str, str]] = set()


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_one_way(path):
    source = dotted(path)
    if source == "gptlab":
        return  # the package root re-exports the public API
    here = room(source)
    wrong = [f"line {line}: {target} ({room(target)})" for line, target in gptlab_imports(path)
             if room(target) not in ALLOWED[here] and (source, target) not in EXCEPTIONS]
    assert not wrong, f"{source} is in room '{here}', which may import {sorted(ALLOWED[here])}; it imports " + "; ".join(wrong)


READ_BACK = ("gptlab.sweep.stored", "gptlab.sweep.runs", "gptlab.sweep.kinds")  # the spec, its loader, its kinds'


def test_the_report_reaches_the_sweep_only_to_read_sweep_yaml_back():
    """The report's load step reads sweep.yaml into the sweep's own `SweepSpec` (`sweep.stored`) and asks its kinds
    what they plan (`sweep.kinds`: the seeds that give the error); no other step of the report imports the sweep, and
    the load step nothing of it but the spec, its loader and its kinds' answers."""
    wrong = [f"{dotted(path)} line {line}: {target}" for path in modules(PACKAGE / "report")
             for line, target in gptlab_imports(path) if room(target) == "sweep"
             and not (dotted(path).startswith("gptlab.report.load") and target in READ_BACK)]
    assert not wrong, "the report imports the sweep beyond its load step's sweep.yaml: " + "; ".join(wrong)


# -- a kind is one folder: the core names none, a kind reads another only through the hooks ------------------------

KINDS = sorted(p.parent.name for p in (PACKAGE / "kinds").glob("*/__init__.py"))  # gptlab/kinds/KEY/, one per kind
KIND_NAMES = 3  # modules outside a kind's folder that may name it (the shipped kinds' registration among them)


def kind_mentions(path: Path, key: str, package: Path = PACKAGE) -> list[str]:
    """Where `path` names the kind `key`: an import of its folder (`gptlab.kinds.KEY`, lazy ones too), or its key
    spelled where a kind is looked up or registered (`spec.kinds["KEY"]`, `.kinds.get("KEY")`,
    `SWEEP_KINDS.register("KEY")`)."""
    folder = f"{package.name}.kinds.{key}"
    found = [f"line {line}: imports {target}" for line, target in gptlab_imports(path, package)
             if target == folder or target.startswith(folder + ".")]
    for node in sorted(ast.walk(ast.parse(path.read_text(encoding="utf-8"))), key=lambda n: getattr(n, "lineno", 0)):
        looked_up = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                     and "kinds" in ast.unparse(node.value).lower() and node.slice.value == key) or \
            (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "register")
             and "kinds" in ast.unparse(node.func.value).lower() and node.args
             and isinstance(node.args[0], ast.Constant) and node.args[0].value == key)
        if looked_up:
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("key", KINDS)
def test_a_kind_is_named_by_at_most_three_modules_outside_its_folder(key):
    """A kind is one folder: the sweep's and the report's core ask every kind through the hooks (SWEEP_KINDS,
    REPORT_KINDS), so only a few modules beside its folder name it (its registration in the shipped kinds' package)."""
    naming = {dotted(p): hits for p in modules() if not dotted(p).startswith(f"gptlab.kinds.{key}")
              if (hits := kind_mentions(p, key))}
    assert len(naming) <= KIND_NAMES, f"kind {key!r} is named by {len(naming)} modules outside gptlab/kinds/{key}/ " \
        f"(at most {KIND_NAMES}): " + "; ".join(f"{m} ({', '.join(h)})" for m, h in sorted(naming.items()))


@pytest.mark.parametrize("path", modules(PACKAGE / "kinds"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_a_kind_imports_no_other_kind(path):
    """Kinds read each other's results through the hooks, never by importing each other's folders."""
    parts = path.relative_to(PACKAGE / "kinds").parts
    own = parts[0] if len(parts) > 1 else None  # gptlab/kinds/__init__.py registers them all
    if own is None:
        return
    wrong = [f"line {line}: {target}" for line, target in gptlab_imports(path)
             if target.startswith("gptlab.kinds.") and target.split(".")[2] != own]
    assert not wrong, f"{dotted(path)} imports another kind's folder: " + "; ".join(wrong)


def test_only_the_kinds_registry_imports_the_shipped_kinds_by_name():
    """The spec's validation imports the shipped kinds' package by its name, as it imports a plugin
    (`sweep.kinds.import_shipped_kinds`): the one place below the command lines that reaches `gptlab.kinds`."""
    named = [dotted(p) for p in modules() if room(dotted(p)) in ("sweep", "report") and any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("gptlab.kinds")
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8"))))]
    assert named == ["gptlab.sweep.kinds"], named


def test_the_rules_catch_a_core_module_naming_a_kind(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('from gptlab.kinds.worth.spec import KEY\ndef f(spec, kinds):\n    from gptlab.kinds import worth\n'
                   '    return spec.kinds["worth"], spec.kinds.get("worth"), kinds["tune"], spec.grid["worth"]\n'
                   '@REPORT_KINDS.register("worth")\nclass W:\n    pass\n')
    assert kind_mentions(bad, "worth") == ["line 1: imports gptlab.kinds.worth.spec", "line 3: imports gptlab.kinds.worth",
                                           "line 4: spec.kinds['worth']", "line 4: spec.kinds.get('worth')",
                                           "line 5: REPORT_KINDS.register('worth')"]


def test_the_rules_catch_an_upward_import(tmp_path):
    """The checker itself: a run module importing the sweep is reported."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from gptlab.sweep.spec import load_spec\n")
    assert [room(t) for _, t in gptlab_imports(bad)] == ["sweep"]
    assert "sweep" not in ALLOWED["run"]


FUNCTION_LINES = 60  # from the `def` line to the last, decorators not counted


def long_functions(path: Path, limit: int = FUNCTION_LINES) -> list[str]:
    """Each function or method of `path` (nested ones too) longer than `limit` lines, `def` line to last line."""
    found = [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit]
    return [f"line {node.lineno}: {node.name} has {node.end_lineno - node.lineno + 1} lines"
            for node in sorted(found, key=lambda node: node.lineno)]


def has_docstring(path: Path) -> bool:
    """Whether the module `path` opens with a docstring that says something."""
    return bool((ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "").strip())


CALIBRATION_MODULES = modules(CALIBRATION)
HOUSE = modules() + CALIBRATION_MODULES  # the package and the calibration beside it; benchmarks/ holds scripts


@pytest.mark.parametrize("path", HOUSE, ids=lambda p: str(p.relative_to(REPO)))
def test_no_function_is_over_60_lines(path):
    wrong = long_functions(path)
    assert not wrong, f"{path.relative_to(REPO)}: " + "; ".join(wrong) + f" (at most {FUNCTION_LINES}): split it " \
        "into helpers named for what their parts do"


def test_the_rules_catch_a_long_function(tmp_path):
    """60 lines pass, decorators uncounted; a 61-line method, an async function and a function nested in it do not."""
    body = "".join(f"    x{i} = {i}\n" for i in range(59))
    bad = tmp_path / "bad.py"
    bad.write_text("@first\n@second\ndef short():\n" + body + "\n\nclass C:\n    def method(self):\n"
                   + body.replace("    ", "        ") + "        return 1\n\n\nasync def outer():\n    def inner():\n"
                   + body.replace("    ", "        ") + "        return 1\n    return inner\n")
    assert long_functions(bad) == ["line 66: method has 61 lines", "line 129: outer has 63 lines",
                                   "line 130: inner has 61 lines"]
    assert long_functions(bad, limit=63) == []


@pytest.mark.parametrize("path", HOUSE, ids=lambda p: str(p.relative_to(REPO)))
def test_every_module_has_a_docstring(path):
    assert has_docstring(path), f"{path.relative_to(REPO)} has no module docstring: say in it what the module owns"


def test_the_rules_catch_a_module_without_a_docstring(tmp_path):
    bad = tmp_path / "bad.py"
    for text, expected in (("x = 1\n", False), ('"""   """\n', False), ('import os\n"""Not first."""\n', False),
                           ('# a comment\n"""The job."""\n', True)):
        bad.write_text(text)
        assert has_docstring(bad) is expected, text


def defines_planner(path: Path) -> bool:
    """Whether a module defines a planner (a class with a `next_stage` method)."""
    return any(isinstance(node, ast.ClassDef) and any(isinstance(f, ast.FunctionDef) and f.name == "next_stage"
                                                      for f in node.body)
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))))


def driver_imports(path: Path) -> list[str]:
    """The sweep driver's modules `path` imports (`gptlab.sweep` itself re-exports the CLI's main)."""
    driver = ("gptlab.sweep", "gptlab.sweep.execute", "gptlab.sweep_cli", "gptlab.sweep.__main__")
    return [f"line {line}: {target}" for line, target in gptlab_imports(path) if target in driver]


def test_planners_never_import_the_driver():
    """One sweep loop: `execute` asks the planners for stages; no planner calls back into it (or the CLI)."""
    planners = [p for folder in ("sweep", "kinds") for p in sorted((PACKAGE / folder).rglob("*.py")) if defines_planner(p)]
    assert {"gptlab.sweep.planners", "gptlab.kinds.seeds.stages"} <= {dotted(p) for p in planners}
    wrong = [f"{dotted(p)} {hit}" for p in planners for hit in driver_imports(p)]
    assert not wrong, "a planner imports the sweep driver: " + "; ".join(wrong)


def test_the_rules_catch_a_planner_calling_back_into_the_driver(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class Rounds:\n    def next_stage(self, finished):\n"
                   "        from gptlab.sweep.execute import train\n        return None\n")
    assert defines_planner(bad) and driver_imports(bad) == ["line 3: gptlab.sweep.execute"]


# -- no import circle, inside a folder or across the package -----------------------------------------------------

def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of `package` -> the modules of `package` it imports (lazy ones too), from the AST alone.

    `import gptlab.report.stats` also runs `gptlab/report/__init__.py` first; that is not counted as an edge, or
    every package that re-exports its modules (`gptlab.model`) would be a circle with each of them."""
    graph = {dotted(p, package): set() for p in modules(package)}
    for path in modules(package):
        source = dotted(path, package)
        graph[source] |= {target for _, target in gptlab_imports(path, package) if target in graph and target != source}
    return graph


def circle_groups(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of two or more modules that all reach each other by imports (strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; a hundred modules are far from the recursion limit
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = {stack.pop()}
            while node not in group:
                group.add(stack.pop())
            groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [g for g in groups if len(g) > 1]


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest circle through each group of `circle_groups`, as a path that starts and ends at the group's
    first module by name: [a, b, a]."""
    cycles = []
    for group in circle_groups(graph):
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first inside the group: the shortest way back to start
            node = queue.pop(0)
            for nxt in sorted(graph[node] & group):
                if nxt == start:
                    queue, found = [], paths[node] + [start]
                    break
                if nxt not in paths:
                    paths[nxt] = paths[node] + [nxt]
                    queue.append(nxt)
        cycles.append(found)
    return sorted(cycles)


def within(graph: dict[str, set[str]], folder: str) -> dict[str, set[str]]:
    """The part of the graph between the modules of one folder (its `__init__` included, subfolders not)."""
    mine = {m for m in graph if m == folder or m.rpartition(".")[0] == folder}
    return {m: graph[m] & mine for m in mine}


def circles_message(graph: dict[str, set[str]]) -> str:
    """Each circle as `a -> b -> a`, with the other modules of its group (each is on some circle with it)."""
    groups = circle_groups(graph)
    return "; ".join(" -> ".join(cycle) + "".join(f" (its group also holds {', '.join(sorted(g - set(cycle)))})"
                                                 for g in groups if cycle[0] in g and g - set(cycle))
                     for cycle in import_cycles(graph))


GRAPH = import_graph()
FOLDERS = sorted({dotted(p) for p in modules() if p.name == "__init__.py"})


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_import_circle_inside_a_folder(folder):
    graph = within(GRAPH, folder)
    assert not import_cycles(graph), f"import circles inside {folder}: {circles_message(graph)}"


def test_no_import_circle_across_the_package():
    assert not import_cycles(GRAPH), f"import circles in gptlab: {circles_message(GRAPH)}"


def test_the_cycle_finder_names_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a", "f"}, "f": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    graph["d"] = {"b"}  # d joins the group of a, b and c, off the shortest circle through a
    assert circles_message(graph) == "a -> b -> c -> a (its group also holds d); e -> f -> e"
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_the_graph_counts_lazy_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "gptlab"
    (pkg / "report").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "report" / "__init__.py").write_text("from gptlab.report.stats import table\n")
    (pkg / "report" / "verdicts.py").write_text("from gptlab.report.stats import table\n")
    (pkg / "report" / "stats.py").write_text("def table():\n    from gptlab.report import verdicts\n")
    (pkg / "report" / "fmt.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                          "    from .render import page\n")
    (pkg / "report" / "render.py").write_text("import gptlab.report.fmt\n")
    graph = import_graph(pkg)
    assert graph["gptlab.report"] == {"gptlab.report.stats"}  # a package's own init is no edge of its modules
    assert [" -> ".join(c) for c in import_cycles(within(graph, "gptlab.report"))] == [
        "gptlab.report.fmt -> gptlab.report.render -> gptlab.report.fmt",
        "gptlab.report.stats -> gptlab.report.verdicts -> gptlab.report.stats"]


# -- docs/ARCHITECTURE.md: a short map, every path it names there, every room on it ------------------------------

DOC = REPO / "docs" / "ARCHITECTURE.md"
MAP_LINES = 200  # a map a newcomer reads in minutes: what each module owns is its docstring
SOURCES = ("gptlab", "calibration", "tests", "benchmarks", "ablations")  # where a bare `NAME.py` of the map lives
TOKEN = re.compile(r"[\w./-]+")


def map_length_problem(doc: str, limit: int = MAP_LINES) -> str | None:
    lines = len(doc.splitlines())
    return f"docs/ARCHITECTURE.md has {lines} lines, over {limit}: a map, not a catalogue" if lines > limit else None


def named_paths(doc: str) -> list[str]:
    """Every `NAME.py` and `gptlab/...` path the map names, once each, in order (a sentence's full stop cut off)."""
    tokens = (t.rstrip(".") for t in TOKEN.findall(doc))
    return list(dict.fromkeys(t for t in tokens if t.endswith(".py") or t.startswith("gptlab/")))


def missing_paths(doc: str, repo: Path = REPO) -> list[str]:
    """The paths the map names that do not exist: one with a folder is read from the repository's root; a bare
    `NAME.py` must be some module of the checkout's sources."""
    def exists(path: str) -> bool:
        if "/" in path:
            return (repo / path).exists()
        return any(next((repo / source).rglob(path), None) for source in SOURCES if (repo / source).is_dir())

    return [path for path in named_paths(doc) if not exists(path)]


def missing_rooms(doc: str, package: Path = PACKAGE) -> list[str]:
    """The top-level folders of the package (its rooms) that the map never names as `gptlab/ROOM/`."""
    rooms = sorted(p.parent.name for p in package.glob("*/__init__.py"))
    return [room for room in rooms if f"{package.name}/{room}/" not in doc]


MAP = DOC.read_text(encoding="utf-8")


def test_the_map_is_at_most_200_lines():
    problem = map_length_problem(MAP)
    assert problem is None, problem + " (what a module owns belongs in its docstring)"


def test_every_path_the_map_names_exists():
    assert named_paths(MAP), "docs/ARCHITECTURE.md names no path"
    missing = missing_paths(MAP)
    assert not missing, "docs/ARCHITECTURE.md names paths that do not exist: " + ", ".join(missing)


def test_the_map_names_every_room():
    missing = missing_rooms(MAP)
    assert not missing, "docs/ARCHITECTURE.md does not name the room(s) " + ", ".join(f"gptlab/{r}/" for r in missing)


def test_the_map_checks_catch_a_long_map_a_missing_path_and_a_missing_room(tmp_path):
    pkg = tmp_path / "gptlab"
    for room in ("run", "stats"):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text('"""A room."""\n')
    (pkg / "run" / "data.py").write_text('"""Data."""\n')
    (pkg / "notes").mkdir()  # a folder without __init__.py is no room
    doc = ("The run (`gptlab/run/`) reads `gptlab/run/data.py` (`data.py`) and `gptlab/run/gone.py`.\n"
           "A bare `gone.py`, gptlab/sweep/ and tests/test_data.py; `data.csv`, `gptlab.run.data` and results/NAME/ "
           "are no paths. Ends on gptlab/run/data.py.\n")
    assert named_paths(doc) == ["gptlab/run/", "gptlab/run/data.py", "data.py", "gptlab/run/gone.py", "gone.py",
                                "gptlab/sweep/", "tests/test_data.py"]
    assert missing_paths(doc, tmp_path) == ["gptlab/run/gone.py", "gone.py", "gptlab/sweep/", "tests/test_data.py"]
    assert missing_rooms(doc, pkg) == ["stats"]
    assert missing_rooms(doc + "The numbers: `gptlab/stats/`.", pkg) == []
    assert map_length_problem("line\n" * 200) is None
    assert map_length_problem("line\n" * 201) == "docs/ARCHITECTURE.md has 201 lines, over 200: a map, not a catalogue"


# -- no module takes another's private names -----------------------------------------------------------------------

def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(path: Path, package: Path = PACKAGE) -> list[str]:
    """Where `path` takes a leading-underscore name from another gptlab module: `from gptlab.x import _name` (relative
    imports too), `import gptlab.x._mod`, or `mod._name` on a gptlab module it imported (`from gptlab import mod`)."""
    root, found, modules_bound = package.name, [], set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = imported_from(node, path, package)
            if base != root and not base.startswith(root + "."):
                continue
            found += [f"line {node.lineno}: from {base} import {a.name}" for a in node.names
                      if _private(a.name) or any(map(_private, base.split(".")))]
            modules_bound |= {a.asname or a.name for a in node.names if is_module(f"{base}.{a.name}", package)}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == root:
                    found += [f"line {node.lineno}: import {a.name}"] * any(map(_private, a.name.split(".")))
                    modules_bound.add(a.asname or root)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules_bound:
                found.append(f"line {node.lineno}: {value.id}.{'.'.join(reversed(chain))}")
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_another_modules_private_names(path):
    """A leading underscore means "only this module uses it": a name another module needs is public, or moves."""
    wrong = private_imports(path)
    assert not wrong, f"{dotted(path)} takes private names of other modules: " + "; ".join(wrong)


def test_the_rules_catch_a_private_import(tmp_path):
    pkg = tmp_path / "gptlab"
    (pkg / "report" / "load").mkdir(parents=True)
    for init in (pkg, pkg / "report", pkg / "report" / "load"):
        (init / "__init__.py").write_text("")
    (pkg / "report" / "fmt.py").write_text("def _round(x):\n    return x\n")
    (pkg / "report" / "load" / "samples.py").write_text("def _stored():\n    return {}\n")
    bad = pkg / "report" / "tables.py"
    bad.write_text("from gptlab.report.fmt import _round, precision\nfrom .load import samples\n"
                   "import gptlab.report._hidden\nfrom gptlab.report import fmt\nfrom collections import _chain\n"
                   "def f(x):\n    return fmt._round(x), samples._stored(), x._own, fmt.__name__\n")
    assert private_imports(bad, pkg) == ["line 1: from gptlab.report.fmt import _round", "line 3: import gptlab.report._hidden",
                                         "line 7: fmt._round", "line 7: samples._stored"]
    bad.write_text("from gptlab.report.fmt import precision\nfrom gptlab.report import fmt\n"
                   "def f(x):\n    return fmt.precision(x), x._own, __name__\n")
    assert private_imports(bad, pkg) == []


# -- the report's bundles are built by keyword ---------------------------------------------------------------------

def bundles(package: Path = PACKAGE) -> set[str]:
    """The report's bundles: its dataclasses of four fields or more (`Results`, `ReportTables`, `Sentences`, ...,
    and the kinds' views), which a positional call would fill by position, one field shifted into the next without
    an error."""
    found = set()
    steps = ("report.py", "load.py", "tables.py", "sentences.py", "figure.py", "section.py")  # a kind's report side
    for path in sorted((package / "report").rglob("*.py")) + sorted(
            p for p in (package / "kinds").rglob("*.py") if p.name in steps):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                    "dataclass" in ast.unparse(d) for d in node.decorator_list) and \
                    sum(isinstance(s, ast.AnnAssign) for s in node.body) >= 4:
                found.add(node.name)
    return found


def positional_bundles(path: Path, names: set[str]) -> list[str]:
    """Calls in `path` that build one of `names` with positional arguments."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and node.args:
            func = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if func in names:
                out.append(f"line {node.lineno}: {func}(...) with {len(node.args)} positional argument(s)")
    return out


BUNDLES = bundles()


def test_the_report_has_its_bundles():
    assert {"Results", "ReportTables", "Sentences", "Figures", "TuningView", "AdaptiveView"} <= BUNDLES


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_bundles_are_built_by_keyword(path):
    wrong = positional_bundles(path, BUNDLES)
    assert not wrong, f"{dotted(path)} builds a bundle by position (build it by keyword): " + "; ".join(wrong)


def test_the_rules_catch_a_bundle_built_by_position(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from x import Sentences, tables\nSentences(['a'], interactions=[])\ntables.ReportTables(0.01)\n"
                   "Sentences(main=['a'])\n")
    assert positional_bundles(bad, {"Sentences", "ReportTables"}) == [
        "line 2: Sentences(...) with 1 positional argument(s)", "line 3: ReportTables(...) with 1 positional argument(s)"]


# -- only the load step reads files, only the render step writes them ------------------------------------------------

WRITE_CALLS = {"write_text", "write_bytes", "atomic_write_text", "atomic_write_bytes", "atomic_write", "mkdir",
               "unlink", "rmdir", "touch", "write_csv", "write_json", "write_yaml", "to_csv", "write_summary",
               "write_place"}  # by name (a figure's savefig to a buffer is no file)
FILE_CALLS = {"read_text", "read_bytes", "read_csv", "open", "is_file", "is_dir", "exists", "iterdir", "glob", "rglob",
              "check_summary", "sample_from_run", "unigram_val_loss"} | WRITE_CALLS
# Report modules that touch files: the load step reads results/NAME/ (and the report's own samples.json); render
# writes reports/NAME/; the TensorBoard export writes its own folder.
FILE_MODULES = ("report/load/", "report/document/render.py", "report/export.py")


def file_calls(path: Path) -> list[str]:
    """Calls in `path` that read or write files (by name: `path.read_text()`, `pd.read_csv(...)`, ...)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if name in FILE_CALLS:
                out.append(f"line {node.lineno}: {name}")
    return out


KIND_STEPS = ("report.py", "tables.py", "sentences.py", "figure.py", "section.py")  # a kind's report side, but `load`


@pytest.mark.parametrize("path", sorted((PACKAGE / "report").rglob("*.py")) + sorted(
    p for p in (PACKAGE / "kinds").rglob("*.py") if p.name in KIND_STEPS), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_only_the_load_step_reads_files_and_only_render_writes_them(path):
    module = path.relative_to(PACKAGE).as_posix()
    if module.startswith(FILE_MODULES):
        return
    wrong = file_calls(path)
    assert not wrong, f"{module} touches files, which only the report's load step (reading) and render step " \
                      "(writing) do: " + "; ".join(wrong)


def write_calls(path: Path) -> list[str]:
    """Calls in `path` that write files, and the names it imports to write them (`from x import write_csv`)."""
    out = [call for call in file_calls(path) if call.rpartition(": ")[2] in WRITE_CALLS]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            out += [f"line {node.lineno}: imports {a.name}" for a in node.names if a.name in WRITE_CALLS]
    return out


@pytest.mark.parametrize("path", sorted((PACKAGE / "report" / "load").rglob("*.py")) + sorted(
    (PACKAGE / "kinds").rglob("load.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_load_step_writes_nothing(path):
    """The load step reads results/NAME/ and writes nothing anywhere: a stale summary.csv is read from the run
    folders in memory, never rewritten (the sweep owns the file)."""
    wrong = write_calls(path)
    assert not wrong, f"{path.relative_to(PACKAGE)} writes files, which the report's load step never does: " + \
        "; ".join(wrong)


def test_the_rules_catch_a_load_step_that_writes(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gptlab.runio import write_csv\ndef f(res):\n    res.results_dir.summary_csv.write_text('x')\n")
    assert write_calls(bad) == ["line 3: write_text", "line 1: imports write_csv"]


def test_the_rules_catch_a_step_reading_a_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import pandas as pd\ndef f(res):\n    return pd.read_csv(res.results_dir.rounds_csv), "
                   "res.results_dir.samples_json.exists(), res.runs.replace('', 'x')\n")
    assert file_calls(bad) == ["line 3: read_csv", "line 3: exists"]


# -- one spelling per vocabulary: a status or a call word is typed by its owner alone ------------------------------

VOCABULARIES = {  # name -> (its words, the modules that spell them, relative to gptlab/); every other module imports them
    "status": (frozenset(STATUSES), ("statuses.py",)),
    "call": (frozenset(CALLS) | {DEPENDS, NOT_CHECKED, ROBUST}, ("stats/calls.py", "stats/robustness.py")),
}


def vocabulary_literals(path: Path, words: frozenset[str]) -> list[str]:
    """Where `path` types one of `words`: compared with, collected, passed, assigned, returned or as a dict's key. A
    subscript's key is none (`runs["ok"]`: a column named after the word), nor is a word in a docstring or an f-string
    (prose)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body and \
                isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
        elif isinstance(node, ast.Subscript):
            skip |= {id(k) for k in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])}
        elif isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values}
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
             and n.value in words and id(n) not in skip]
    return [f"line {n.lineno}: {n.value!r}" for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def spelled_elsewhere(path: Path, module: str, owners: bool = True) -> list[str]:
    """Each status or call word `path` (`module`) types outside the word's owners, with the owner to import it from."""
    return [f"{hit} (a {name} word: import it from {' or '.join(f'gptlab/{o}' for o in where)})"
            for name, (words, where) in VOCABULARIES.items()
            if not (owners and module in where) for hit in vocabulary_literals(path, words)]


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_status_and_call_words_are_typed_by_their_owners_alone(path):
    module = path.relative_to(PACKAGE).as_posix()
    wrong = spelled_elsewhere(path, module)
    assert not wrong, f"{module} types words another module owns: " + "; ".join(wrong)


def test_the_rules_catch_a_status_or_call_word_typed_outside_its_owner(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('"""Says "ok" in its docstring."""\nCALLED = ("better", "worse")\n\n\ndef f(r, runs):\n'
                   '    """Counts the "failed" ones."""\n'
                   '    if r["status"] == "failed" or r.get("status", "ok") != "ok":\n'
                   '        return runs[runs["ok"]], runs.loc[:, "ok"], {"status": "ok"}, f"{len(runs)} failed"\n'
                   '    return runs["call"].isin(["robust", DEPENDS]), Outcome(status="diverged"), {"worse": 1}\n')
    words = VOCABULARIES["status"][0] | VOCABULARIES["call"][0]
    assert vocabulary_literals(bad, words) == ["line 2: 'better'", "line 2: 'worse'", "line 7: 'failed'", "line 7: 'ok'",
                                               "line 7: 'ok'", "line 8: 'ok'", "line 9: 'robust'", "line 9: 'diverged'",
                                               "line 9: 'worse'"]
    assert spelled_elsewhere(bad, "bad.py")[0] == "line 7: 'failed' (a status word: import it from gptlab/statuses.py)"
    calls = ["line 2: 'better'", "line 2: 'worse'", "line 9: 'robust'", "line 9: 'worse'"]
    assert [hit.partition(" (")[0] for hit in spelled_elsewhere(bad, "statuses.py")] == calls  # the owner's own
    assert len(spelled_elsewhere(bad, "statuses.py", owners=False)) == 9  # the calibration: no module owns one


# -- the calibration beside the package: the same rules, and the package never imports it -------------------------

def test_the_package_never_imports_the_calibration():
    """`calibration/` is not installed: an import of it from gptlab/ (lazy ones too) breaks every installed copy."""
    wrong = [f"{dotted(p)} line {line}: {target}" for p in modules() for line, target in gptlab_imports(p, CALIBRATION)]
    assert not wrong, "gptlab imports calibration/, which is not installed with it: " + "; ".join(wrong)


def test_the_rules_catch_the_package_importing_the_calibration(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import numpy\ndef f():\n    from calibration import arms_sim\n    import calibration.synthetic\n")
    assert gptlab_imports(bad, CALIBRATION) == [(3, "calibration.arms_sim"), (4, "calibration.synthetic")]


def test_the_wheel_leaves_the_calibration_out():
    """pyproject.toml's package discovery installs gptlab and its subpackages, not calibration/ (nor benchmarks/)."""
    text = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r"\[tool\.setuptools\.packages\.find\]\s*include\s*=\s*\[([^\]]*)\]", text)
    assert found, "pyproject.toml names no [tool.setuptools.packages.find] include list"
    include = re.findall(r'"([^"]+)"', found.group(1))
    assert any(fnmatch("gptlab.stats", pattern) for pattern in include)
    assert not any(fnmatch(name, pattern) for pattern in include for name in ("calibration", "benchmarks")), include


@pytest.mark.parametrize("path", CALIBRATION_MODULES, ids=lambda p: str(p.relative_to(CALIBRATION)))
def test_a_calibration_module_takes_no_private_names(path):
    """No private names of gptlab's modules, nor of the calibration's others (its function cap and docstring are
    checked with the package's)."""
    wrong = private_imports(path) + private_imports(path, CALIBRATION)
    assert not wrong, f"calibration/{path.relative_to(CALIBRATION)} takes private names of other modules: " + \
        "; ".join(wrong)


def test_no_import_circle_in_the_calibration():
    graph = import_graph(CALIBRATION)
    assert not import_cycles(graph), f"import circles in calibration/: {circles_message(graph)}"


@pytest.mark.parametrize("path", CALIBRATION_MODULES, ids=lambda p: str(p.relative_to(CALIBRATION)))
def test_the_calibration_imports_its_status_and_call_words(path):
    module = path.relative_to(CALIBRATION).as_posix()
    wrong = spelled_elsewhere(path, module, owners=False)
    assert not wrong, f"calibration/{module} types words gptlab owns: " + "; ".join(wrong)
