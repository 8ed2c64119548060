"""Every command the README shows works, and the README shows no command this file does not exercise.

The commands are read from README.md itself: the lines of its ```bash blocks, the lines of its other fenced
blocks that start with `python -m gptlab` or `pip` (a `text` block of synopses), and inline code spans that
start so. `COVERED` says how each is exercised; a README command missing from it, or an entry of it missing
from the README, fails `test_every_readme_command_is_covered`. Each test below takes its commands from the
README by mode, so the text run is the text shown:

- `pip`: the requirement and the extras are checked against pyproject.toml (nothing is installed);
- `env`: the data line is a line of `.ci/run`, and the folder it names is `../shared/data` beside the checkout,
  where a run then finds Tiny Shakespeare;
- `ci`: the test command is what `.ci/run` runs, part for part;
- `dry-run`: the sweep runs in this process with `--dry-run` added (a real sweep is minutes): its plan and
  time estimate, after the same validation as a real sweep;
- `yaml`: the command run on the README's sweep YAML, saved under the name it gives, with `--dry-run` added;
- `run`: runs as shown (`--list`, `--help`);
- `report`: runs as shown, in a folder where `results/quick` was trained by the quick sweep cut to two
  runs of 10 steps, validated on 1% of the text (its grid trimmed; `--set` shrinks only base keys);
- `cli`: a module named in prose answers `--help`;
- `synopsis`: every option a synopsis line shows is an option of that command's `--help`.

The README's sweep YAML is dry-run as pasted, in a folder with nothing else in it (so it needs no plugin), and
again with the plugin example saved beside it and named as the README says, its entry in the grid. Commands run
in this process (`runpy`, as `python -m` runs them), which saves an interpreter and a torch import per command.
"""
from __future__ import annotations

import itertools
import re
import runpy
import shlex
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from helpers import REPO
from packaging.requirements import Requirement

pytestmark = pytest.mark.slow  # real sweeps, clusters or simulations: out of the edit loop (-m 'not slow')

README = REPO / "README.md"

COVERED: dict[str, str] = {
    'pip install torch==2.13.0 && pip install -e ".[test]"': "pip",
    'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q': "ci",
    'export GPTLAB_DATA_DIR="$(cd .. && pwd)/shared/data"': "env",
    "python -m gptlab.sweep ablations/quick.yaml --dry-run": "dry-run",
    "python -m gptlab.sweep ablations/quick.yaml": "dry-run",
    "python -m gptlab.report results/quick": "report",
    "python -m gptlab.sweep ablations/plugin_example.yaml": "dry-run",
    "python -m gptlab.sweep my_sweep.yaml": "yaml",
    "python -m gptlab.sweep --list": "run",
    "python -m gptlab.train --help": "run",
    "python -m gptlab.sweep SPEC.yaml [--dry-run] [--jobs N] [--set KEY=VALUE ...] [--results-dir DIR] "
    "[--reports-dir DIR] [--rerun-failed] [--fail-fast] [--backend loky|dask] [--scheduler ADDRESS] "
    "[--margin NATS] [--reuse RESULTS_DIR ...]": "synopsis",
    "python -m gptlab.prepare NAME [--out FILE] [--from URL_OR_DIR]": "synopsis",
    "python -m gptlab.prepare austen": "cli",
    "python -m gptlab.report results/NAME [--out DIR] [--margin NATS]": "synopsis",
    "python -m gptlab.train [--config run.yaml] [--model.norm post ...] [--out DIR]": "synopsis",
    'python -m gptlab.sample results/NAME/runs/RUN_ID [--prompt "ROMEO:"] [--tokens 500] [--plugin ENTRY ...]':
        "synopsis",
    "python -m gptlab.sample --nanogpt-ckpt out-shakespeare-char/ckpt.pt [--data input.txt] [--eval]": "synopsis",
}  # a synopsis line that is also a runnable command (`--list`) is run, which checks more than its options
FENCE = re.compile(r"^```(\w*)\s*$")
COMMAND_START = ("python -m gptlab", "pip ")


def readme_commands(text: str) -> list[str]:
    """Every shell command of `text` (see the module docstring), comments stripped, continuations joined."""
    commands: list[str] = []
    fence: str | None = None
    continued = False  # the line before, in this block, was a command that the next may continue
    for line in text.splitlines():
        m = FENCE.match(line)
        if m:
            fence, continued = (None if fence is not None else m.group(1)), False
            continue
        if fence == "bash":
            command = re.sub(r"\s+#.*$", "", line).strip()
            if continued and commands[-1].endswith("\\"):
                commands[-1] = commands[-1][:-1].rstrip() + " " + command
            elif command:
                commands.append(command)
            continued = bool(command)
        elif fence is not None:  # a synopsis: indented lines continue the command above
            if line.strip().startswith(COMMAND_START):
                commands.append(line.strip())
                continued = True
            elif continued and line[:1].isspace() and line.strip():
                commands[-1] += " " + line.strip()
            else:
                continued = False
        else:
            commands += [span for span in re.findall(r"`([^`]+)`", line) if span.startswith(COMMAND_START)]
    return list(dict.fromkeys(commands))


def commands(mode: str) -> list[str]:
    """The README's commands that `COVERED` exercises as `mode` (in README order)."""
    found = [c for c in readme_commands(README.read_text()) if COVERED.get(c) == mode]
    assert found, f"the README shows no command of mode {mode!r}"
    return found


def run_readme(capsys, command: str, *extra: str) -> tuple[int, str]:
    """Run `python -m MODULE ARGS... EXTRA...` in this process, as the interpreter would: (exit status, output)."""
    argv = shlex.split(command) + list(extra)
    assert argv[:2] == ["python", "-m"], command
    capsys.readouterr()
    old_argv = sys.argv
    sys.argv = [argv[2]] + argv[3:]
    try:
        with warnings.catch_warnings():  # runpy warns that a CLI module was imported before it ran
            warnings.simplefilter("ignore", RuntimeWarning)
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old_argv
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# -- the list itself ---------------------------------------------------------------------------------------

def test_every_readme_command_is_covered():
    shown = readme_commands(README.read_text())
    assert [c for c in shown if c not in COVERED] == [], "a README command no test exercises: add it to COVERED"
    assert [c for c in COVERED if c not in shown] == [], "COVERED lists a command the README no longer shows"


def test_the_extraction_finds_bash_lines_synopses_and_inline_commands():
    text = ("Run `python -m gptlab.x --help` or `ls`.\n```bash\npip install a  # why\npython -m gptlab.y \\\n  --z\n"
            "```\n```text\npython -m gptlab.w A [--b]\n       [--c]\nnot a command\n```\n```python\nimport os\n```\n")
    assert readme_commands(text) == ["python -m gptlab.x --help", "pip install a", "python -m gptlab.y --z",
                                     "python -m gptlab.w A [--b] [--c]"]


# -- install lines ------------------------------------------------------------------------------------------

def pyproject_extras() -> set[str]:
    """The names of [project.optional-dependencies] in pyproject.toml (tomllib is not in Python 3.10)."""
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"^([\w-]+)\s*=", section, re.M))


def pip_parts(command: str) -> list[list[str]]:
    return [shlex.split(part) for part in command.split("&&") if shlex.split(part)[:1] == ["pip"]]


def check_pip(argv: list[str]) -> None:
    assert argv[:2] == ["pip", "install"], argv
    args = [a for a in argv[2:] if a not in ("-q", "-e")]
    assert len(args) == 1, argv
    if args[0].startswith("."):  # the checkout itself, with extras
        m = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", args[0])
        assert m, args[0]
        assert set((m.group(1) or "").split(",")) - {""} <= pyproject_extras(), args[0]
        assert "-e" in argv  # editable: the tests and benchmarks import the checkout
    else:
        pinned = Requirement(args[0])
        dependencies = (REPO / "pyproject.toml").read_text().split("\ndependencies = [", 1)[1].split("]", 1)[0]
        declared = [Requirement(d) for d in re.findall(r'"([^"]+)"', dependencies) if Requirement(d).name == pinned.name]
        assert declared, f"{pinned.name} is not a dependency in pyproject.toml"
        version = next(iter(pinned.specifier)).version
        assert all(d.specifier.contains(version) for d in declared), (pinned, declared)


def test_pip_lines_install_a_declared_torch_and_real_extras():
    for command in commands("pip") + commands("ci"):
        parts = pip_parts(command)
        assert len(parts) == 2, command
        for argv in parts:
            check_pip(argv)
    with pytest.raises(AssertionError):
        check_pip(["pip", "install", "-e", ".[test,no_such_extra]"])
    with pytest.raises(AssertionError):
        check_pip(["pip", "install", "torch==2.2.0"])  # below pyproject's torch>=2.3


def test_the_test_command_is_what_ci_runs():
    ci = [shlex.split(line.split("#")[0]) for line in (REPO / ".ci" / "run").read_text().splitlines()]
    ci = [[a for a in argv if a != "-q" or argv[0] != "pip"] for argv in ci if argv]
    for command in commands("ci"):
        for part in command.split("&&"):
            argv = shlex.split(part)
            expected = [a for a in argv if a != "-q" or argv[0] != "pip"]
            assert expected in ci, f"{part.strip()!r} is not a line of .ci/run"


def test_the_data_line_names_the_shared_corpora_as_ci_does(data_dir, tmp_path, monkeypatch):
    from helpers import SHAKESPEARE

    from gptlab.run.data import resolve_dataset

    ci = [line.split("#")[0].strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    for command in commands("env"):
        assert command in ci, f"{command!r} is not a line of .ci/run"
        name = re.fullmatch(r"export (\w+)=.*", command).group(1)
        shown = subprocess.run(["bash", "-c", f'{command} && printf %s "${name}"'], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
        assert Path(shown) == REPO.parent / "shared" / "data", shown  # the README: ../shared/data, beside the checkout
        folder = tmp_path / "data" / "tinyshakespeare"  # a run finds the text under the folder the line names
        folder.mkdir(parents=True)
        (folder / "input.txt").write_bytes(SHAKESPEARE.read_bytes())
        monkeypatch.setenv(name, str(tmp_path / "data"))
        assert resolve_dataset("tinyshakespeare", download_missing=False) == folder / "input.txt"


# -- commands that run ---------------------------------------------------------------------------------------

@pytest.fixture
def data_dir(monkeypatch):
    from helpers import SHAKESPEARE

    assert SHAKESPEARE.is_file(), f"the README's commands train on Tiny Shakespeare: put it at {SHAKESPEARE}"
    monkeypatch.setenv("GPTLAB_DATA_DIR", str(SHAKESPEARE.parents[1]))


def test_the_sweep_commands_dry_run(data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    for command in commands("dry-run"):
        spec = yaml.safe_load((REPO / shlex.split(command)[3]).read_text())
        extra = [] if "--dry-run" in command else ["--dry-run"]
        code, out = run_readme(capsys, command, *extra, "--results-dir", str(tmp_path / "results"))
        assert code == 0, out
        n_runs = len(list(itertools.product(*spec["grid"].values()))) * spec["seeds"]
        assert f"{n_runs} runs: 0 finished, {n_runs} to train" in out, out
        assert "plan: " in out and "estimate: " in out, out
    assert not (tmp_path / "results").exists()  # a dry run writes nothing


def test_list_and_help_run_and_list_every_entry_of_the_axes_table(capsys):
    outputs = {}
    for command in commands("run"):
        code, outputs[command] = run_readme(capsys, command)
        assert code == 0, outputs[command]
    listing = outputs.get("python -m gptlab.sweep --list", "")
    registries = dict(re.findall(r"^(\S+): .*\n((?:  .*\n?)*)", listing, re.M))
    assert registries, listing
    axes = README.read_text().split("## The axes, and adding an entry", 1)[1].split("\n\n", 2)[1]
    rows = [line.split("|") for line in axes.splitlines()[2:]]
    assert len(rows) >= 5, axes
    for row in rows:
        axis = re.search(r"`([\w.]+)`", row[1]).group(1)
        listed = set(re.findall(r"^  (\S+)", registries.get(axis, ""), re.M))
        named = set(re.findall(r"`(\w+)`", row[2] + row[3])) - {axis}
        assert named and named <= listed, (axis, named - listed)
    assert "--model.norm" in outputs.get("python -m gptlab.train --help", "")


def help_options(capsys, module: str) -> set[str]:
    code, out = run_readme(capsys, f"python -m {module} --help")
    assert code == 0, out
    return set(re.findall(r"(?<![\w-])(--[\w.-]+)", out))


def test_modules_named_in_prose_have_a_command_line(capsys):
    for command in commands("cli"):
        assert "--help" in help_options(capsys, shlex.split(command)[2])


def test_every_synopsis_option_is_a_real_option(capsys):
    for command in commands("synopsis"):
        module = shlex.split(command)[2]
        shown = set(re.findall(r"(?<![\w-])(--[\w.-]+)", command))
        assert shown, command
        assert shown <= help_options(capsys, module), (command, shown - help_options(capsys, module))
    assert "--no-such-option" not in help_options(capsys, "gptlab.sweep")


def test_the_report_command_on_a_trained_quick_sweep(data_dir, tmp_path, monkeypatch, capsys):
    from helpers import skip_figures

    quick = yaml.safe_load((REPO / "ablations" / "quick.yaml").read_text())
    quick["grid"] = {"model.norm": quick["grid"]["model.norm"]}  # 2 cells, one seed: the report, not the grid
    quick["seeds"] = 1
    (tmp_path / "quick.yaml").write_text(yaml.safe_dump(quick))
    monkeypatch.chdir(tmp_path)
    with pytest.MonkeyPatch.context() as mp:
        skip_figures(mp)  # the sweep's own report: only the README's report command below draws figures
        # shortened: a smaller model at a higher lr, long enough to learn (10 steps of quick.yaml's model leave every
        # run at the unigram loss: collapsed, and no effect to call)
        code, out = run_readme(capsys, "python -m gptlab.sweep quick.yaml", "--set", "train.max_iters=100",
                                "--set", "train.eval_interval=50", "--set", "train.warmup_iters=5", "--set",
                                "train.lr=2e-2", "--set", "train.min_lr=1e-3", "--set", "model.n_layer=1",
                                "--set", "model.n_embd=32", "--set", "model.block_size=32",
                                "--set", "data.val_fraction=0.01")
    assert code == 0, out
    (tmp_path / "reports").rename(tmp_path / "reports_of_the_sweep")
    for command in commands("report"):
        code, out = run_readme(capsys, command)
        assert code == 0, out
    report = tmp_path / "reports" / "quick"
    assert Path(out.strip()).resolve() == (report / "report.md").resolve()
    assert "| norm=post vs pre |" in (report / "report.md").read_text()  # the calls table's row
    assert list((report / "figures").glob("*.png")) and (report / "report.html").is_file()


# -- the sweep YAML and the plugin example -------------------------------------------------------------------

def readme_block(language: str, index: int = 0) -> str:
    blocks = re.findall(rf"^```{language}\n(.*?)^```$", README.read_text(), re.M | re.S)
    assert len(blocks) > index, f"the README has no ```{language} block {index}"
    return blocks[index]


def planned_runs(spec: dict) -> int:
    """The runs a grid sweep trains: its cells less those an `exclude` rule matches, times its seeds."""
    cells = [dict(zip(spec["grid"], levels)) for levels in itertools.product(*spec["grid"].values())]
    kept = [c for c in cells if not any(all(c.get(k) == v for k, v in rule.items()) for rule in spec.get("exclude", []))]
    seeds = spec["seeds"]
    return len(kept) * (seeds if isinstance(seeds, int) else len(seeds))


@pytest.mark.parametrize("with_plugin", [False, True])
def test_the_readme_sweep_yaml_and_plugin_dry_run(with_plugin, data_dir, tmp_path, monkeypatch, capsys):
    text = README.read_text()
    pasted = readme_block("yaml")
    spec = yaml.safe_load(pasted)
    assert "plugins" not in spec, "the README's sweep YAML runs as pasted, before any plugin file is saved"
    (command,) = commands("yaml")
    name = shlex.split(command)[3]
    if with_plugin:  # the README: save the file, then add `plugins: [FILE]` and the new level to the grid
        plugin = readme_block("python")
        file = re.match(r"# (\w+\.py)\n", plugin).group(1)
        (tmp_path / file).write_text(plugin)
        assert f"`plugins: [{file}]`" in text, "the README names the plugin file its example saves"
        grid = yaml.safe_load(re.search(r"`(model\.activation: \[[^]`]*\bsoftplus\b[^]`]*\])`", text).group(1))
        assert set(spec["grid"]["model.activation"]) < set(grid["model.activation"])  # the new level added
        spec = {**spec, "plugins": [file], "grid": {**spec["grid"], **grid}}
        (tmp_path / name).write_text(yaml.safe_dump(spec, sort_keys=False))
    else:
        (tmp_path / name).write_text(pasted)
    monkeypatch.chdir(tmp_path)
    code, out = run_readme(capsys, command, "--dry-run")
    assert code == 0, out
    n_runs = planned_runs(spec)
    assert f"{n_runs} runs: 0 finished, {n_runs} to train" in out, out
    assert ("softplus" in out) == with_plugin
    written = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # the plugin's bytecode aside
    assert written == sorted([name] + spec.get("plugins", [])), written  # a dry run writes nothing


# -- links ---------------------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown page (anchors dropped) that name no file or folder."""
    targets = [t.split("#", 1)[0] for t in LINK.findall(page.read_text()) if not re.match(r"\w+:", t)]
    return [t for t in targets if t and not (page.parent / t).exists()]


def test_the_readme_and_the_docs_link_to_files_that_exist(tmp_path):
    pages = [README, REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert {p.name for p in pages} >= {"STATISTICS.md", "SEEDS_AND_TUNING.md", "CLUSTER.md", "CONTRACTS.md"}
    assert {p: broken_links(p) for p in pages if broken_links(p)} == {}
    (tmp_path / "page.md").write_text("[a](missing.md) [b](https://example.org) [c](page.md#top)")
    assert broken_links(tmp_path / "page.md") == ["missing.md"]
