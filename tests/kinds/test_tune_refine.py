"""The refining tuner (`tune.method: refine`): its decisions, its validation, and its rounds from fake finished runs."""
from __future__ import annotations

import io
import math
from pathlib import Path

import pytest
from fakes import FakeBackend, csv_rows, train_spec
from helpers import tiny_config

from gptlab.errors import GptlabError
from gptlab.kinds.tune.refine import Refine
from gptlab.run.config import RunConfig
from gptlab.run.resultsdir import SUMMARY_CSV, TUNING_CSV
from gptlab.stats.refine import Lattice, RefineRule, decide, decide_all, geometric_ratio, judge, pooled_sigma
from gptlab.sweep.kinds import planned_range
from gptlab.sweep.runs import SELECTION_SEED_OFFSET
from gptlab.sweep.spec import validate_spec

LRS = [5e-4, 1e-3, 2e-3, 4e-3, 8e-3]
LATTICE = Lattice(tuple(LRS))


def _raw(corpus: Path, **tune) -> dict:
    config = tiny_config(corpus)
    config["train"].pop("lr")
    config["train"]["min_lr"] = 1e-5
    return {"name": "refined", "base": {k: config[k] for k in ("model", "train", "data")},
            "grid": {"model.activation": ["gelu", "relu"]}, "seeds": 2,
            "tune": {"method": "refine", "space": {"train.lr": list(LRS)}, **tune}}


def _spec(corpus: Path, **tune):
    return validate_spec(_raw(corpus, **tune), corpus.parent / "sweep.yaml", {}, {})


# -- the decisions (gptlab.stats.refine) ----------------------------------------------------------

def curve(k: float, best: float, a: float = 0.01) -> float:
    """A quadratic in half-steps: a nats per half-step^2 away from half-step `best`."""
    return 1.7 + a * (k - best) ** 2


def test_the_lattice_is_the_spaces_half_steps_with_its_own_levels_exact():
    assert geometric_ratio(LRS) == pytest.approx(2.0) and geometric_ratio([1e-3, 2e-3, 5e-3]) is None
    assert [LATTICE.value(k) for k in LATTICE.coarse()] == LRS  # the YAML's values, not 5e-4 * 2 ** 1.0 rounded
    assert LATTICE.value(1) == pytest.approx(5e-4 * 2 ** 0.5, rel=1e-6) and LATTICE.bounds == (-4, 12)
    assert Lattice(tuple(LRS), limits=(-1, 10)).bounds == (-1, 10)


def test_an_edge_best_extends_by_one_coarse_step_and_stops_at_the_bound():
    obs = {k: [curve(k, 11)] for k in LATTICE.coarse()}  # the best lies beyond 8e-3
    assert decide(obs, LATTICE, RefineRule(), math.nan).add == (10,)
    obs = {k: [curve(k, -9)] for k in (-4, -2, *LATTICE.coarse())}  # below even the extended grid
    assert -6 not in decide(obs, LATTICE, RefineRule(), math.nan).add


def test_the_half_steps_around_the_best_come_next_then_seeds_where_it_is_close():
    obs = {k: [curve(k, 4.4)] for k in LATTICE.coarse()}
    first = decide(obs, LATTICE, RefineRule(), math.nan)
    assert (first.reason, first.add) == ("refine", (3, 5))
    obs.update({k: [curve(k, 4.4)] for k in (3, 5)})
    unknown = decide(obs, LATTICE, RefineRule(), math.nan)  # no noise estimate yet: no pick is trusted
    assert unknown.reason == "replicate" and set(unknown.add) == {4, 5}
    noisy = decide(obs, LATTICE, RefineRule(tolerance=0.0), 0.01)
    assert noisy.reason == "replicate" and noisy.p_best < 0.8
    clear = decide(obs, LATTICE, RefineRule(), 1e-4)
    assert clear.reason == "confident" and clear.pick == 4 and clear.p_best >= 0.8 and not clear.add


def test_the_budget_ends_a_cell_and_diverged_runs_are_never_picked():
    obs = {k: [curve(k, 4.4)] for k in (*LATTICE.coarse(), 3, 5)}
    spent = decide(obs, LATTICE, RefineRule(max_runs_per_cell=7, tolerance=0.0), 0.01)
    assert spent.reason == "budget" and not spent.add
    obs[8] = [math.inf]  # 8e-3 diverged: the best lr is not at an edge, nothing beyond it is tried
    assert judge(obs, 0.001).pick == 4 and 10 not in decide(obs, LATTICE, RefineRule(), 0.001).add


def test_the_pooled_noise_comes_from_replicates_alone():
    rng = __import__("numpy").random.default_rng(0)
    cells = [{k: list(curve(k, 5) + 0.006 * rng.standard_normal(3)) for k in range(1, 9)} for _ in range(4)]
    sigma, df = pooled_sigma(cells)
    assert df > 40 and sigma == pytest.approx(0.006, rel=0.25)
    assert pooled_sigma([{0: [1.0], 2: [1.1], 4: [1.3]}]) == (pytest.approx(math.nan, nan_ok=True), 0)


def test_decisions_are_the_same_every_time():
    obs = [{k: [curve(k, 4.4) + 0.003 * (k % 3)] for k in (*LATTICE.coarse(), 3, 5)} for _ in range(2)]
    assert decide_all(obs, LATTICE, RefineRule()) == decide_all(obs, LATTICE, RefineRule())


# -- validation ----------------------------------------------------------------------------------

BAD = [
    ({"space": {"train.lr": [1e-3, 2e-3, 5e-3]}}, "tune.space.train.lr: the refine method needs at least 3 positive "
                                                  "numbers spaced by one ratio"),
    ({"space": {"train.lr": [1e-3, 2e-3]}}, "the refine method needs at least 3"),
    ({"space": {"train.lr": LRS, "train.weight_decay": [0.0, 0.1]}}, "the refine method tunes one key"),
    ({"seeds": 2}, "tune.seeds: the refine method starts from one selection seed"),
    ({"confidence": 1.0}, "tune.confidence: must be a probability in [0.5, 1), got 1.0"),
    ({"confidence": "high"}, "tune.confidence: must be a probability"),
    ({"max_runs_per_cell": 3}, "tune.max_runs_per_cell: must be a whole number from 5"),
    ({"max_runs_per_cell": 10**6}, "tune.max_runs_per_cell: must be a whole number from 5 (the coarse grid's runs) to 100"),
    ({"tolerance": float("nan")}, "tune.tolerance: must be a loss in nats between 0 and 1, got nan"),
    ({"method": "bayes"}, "unknown tune.method 'bayes'"),
    ({"confidance": 0.9}, "unknown key 'tune.confidance' (did you mean 'tune.confidence'?)"),
]


@pytest.mark.parametrize("tune, message", BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_refine_section_is_one_line_naming_the_key(tune, message, corpus):
    with pytest.raises(GptlabError) as err:
        _spec(corpus, **tune)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_grid_keys_of_refine_are_refused_under_grid(corpus):
    raw = _raw(corpus, confidence=0.9)
    raw["tune"].pop("method")
    with pytest.raises(GptlabError, match="unknown key 'tune.confidence'.*with method grid"):
        validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})


def test_round_one_is_the_grids_selection_with_its_run_ids(corpus):
    refined = _spec(corpus)
    raw = _raw(corpus)
    raw["tune"].pop("method")
    grid = validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    assert [r.run_id for r in refined.runs] == [r.run_id for r in grid.runs]
    assert refined.kinds["tune"].options == (("confidence", 0.8), ("max_runs_per_cell", 10), ("tolerance", 0.002))
    assert planned_range(refined) == (10 + 2 * 2, 2 * 10 + 2 * 2)


def test_the_runs_a_refined_sweep_may_have_are_each_known_once(corpus):
    """Round one is among the possible runs too: counted twice, an interrupted sweep said "356 of 188 to 308"."""
    from gptlab.sweep.kinds import known_runs

    refined = _spec(corpus)
    ids = [r.run_id for r in known_runs(refined)]
    assert len(ids) == len(set(ids)) and set(r.run_id for r in refined.runs) <= set(ids)


# -- the rounds, from fake finished runs ---------------------------------------------------------

def planted(config: RunConfig) -> float:
    """gelu's best lr lies beyond the space (1.2e-2), relu's between two levels (2.8e-3); a little seed noise."""
    best = {"gelu": 1.2e-2, "relu": 2.8e-3}[config.model.activation]
    return 1.7 + 0.03 * math.log2(config.train.lr / best) ** 2 + 1e-4 * (config.seed % 7)






def test_refine_extends_an_edge_refines_around_the_optimum_and_estimates_at_the_refined_pick(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    backend = FakeBackend(planted)
    planned, out, planner = train_spec(spec, results, backend)
    assert isinstance(planner, Refine)
    selection = [r for r in planned if r.role == "selection"]
    lrs = {act: sorted({dict(r.setting)["train.lr"] for r in selection if dict(r.cell)["model.activation"] == act})
           for act in ("gelu", "relu")}
    assert 1.6e-2 in lrs["gelu"]  # one coarse step beyond the space's 8e-3
    assert any(abs(lr - 2e-3 * 2 ** 0.5) < 1e-8 for lr in lrs["relu"])  # a half-step next to relu's optimum
    assert all(sum(dict(r.cell)["model.activation"] == act for r in selection) <= 10 for act in ("gelu", "relu"))
    estimation = {dict(r.cell)["model.activation"]: dict(r.setting)["train.lr"] for r in planned
                  if r.role == "estimation"}
    assert estimation["gelu"] == pytest.approx(1.2e-2, rel=0.2) and estimation["relu"] == pytest.approx(2.8e-3, rel=0.2)
    summary = csv_rows(results / SUMMARY_CSV)
    assert [r["role"] for r in summary].count("estimation") == 4 and len(summary) == len(planned)
    assert all((int(r["seed"]) >= SELECTION_SEED_OFFSET) == (r["role"] == "selection") for r in summary)
    log = csv_rows(results / "refine.csv")
    assert log[0]["decision"] == "edge" and log[0]["adds"] == "0.016"
    assert {r["decision"] for r in log} >= {"edge", "refine"}
    assert [r["picked"] for r in csv_rows(results / TUNING_CSV)].count("True") == 2
    assert "selection round 2:" in out and "P(best)" in out
    rerun = FakeBackend(planted)  # a killed sweep, rerun, decides the same rounds from disk and trains nothing
    again, _, _ = train_spec(spec, results, rerun)
    assert [r.run_id for r in again] == [r.run_id for r in planned] and rerun.trained == []


def lagging(config: RunConfig) -> float:
    """`planted`, but at relu's refined pick one estimation seed lags far behind its siblings (it still trained)."""
    lags = config.model.activation == "relu" and abs(config.train.lr - 2.82843e-3) < 1e-8 and config.seed == 1
    return planted(config) + 0.6 * lags


def test_a_pick_where_an_estimation_seed_lagged_moves_to_a_neighbour_and_its_runs_stay_points_of_the_curve(
        tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    planned, out, planner = train_spec(spec, results, FakeBackend(lagging))
    relu = [r for r in planned if dict(r.cell)["model.activation"] == "relu"]
    earlier = [r for r in relu if r.role == "earlier_pick"]
    estimation = {dict(r.setting)["train.lr"] for r in relu if r.role == "estimation"}
    assert [dict(r.setting)["train.lr"] for r in earlier] == pytest.approx([2.82843e-3] * 2)  # seeds 0 and 1
    assert len(estimation) == 1 and estimation != {2.82843e-3} and planner.repicks == 1
    assert "activation=relu moves from lr=0.00282843 to lr=0.002" in out
    summary = csv_rows(results / SUMMARY_CSV)
    assert [r["role"] for r in summary].count("earlier_pick") == 2 and len(summary) == len(planned)
    picked = [r for r in csv_rows(results / TUNING_CSV) if r["picked"] == "True" and "relu" in r["cell"]]
    assert len(picked) == 1 and float(picked[0]["train.lr"]) in estimation
    rerun = FakeBackend(lagging)  # resumed: the same plan, nothing trained
    again, _, _ = train_spec(spec, results, rerun)
    assert [r.run_id for r in again] == [r.run_id for r in planned] and rerun.trained == []


def test_estimation_runs_of_an_earlier_pick_on_disk_join_the_curve_and_are_not_trained_again(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    whole, _, _ = train_spec(spec, results, FakeBackend(planted))
    gelu_pick = next(r for r in whole if r.role == "estimation" and dict(r.cell)["model.activation"] == "gelu")
    other = next(r for r in whole if r.role == "selection" and r.cell == gelu_pick.cell and r.setting != gelu_pick.setting)
    from gptlab.kinds.tune.tuning import runs_at
    from gptlab.run.rundir import RunDir

    stray = runs_at(spec, [other.setting], spec.seeds, "estimation", [other.cell])  # an earlier spec's picks
    for run in stray:
        RunDir(results / "runs" / run.run_id).path.mkdir(parents=True)
        RunDir(results / "runs" / run.run_id).write_summary({"run_id": run.run_id, "status": "ok", "best_val_loss": 1.9})
    again, _, _ = train_spec(spec, results, FakeBackend(planted))
    roles = {r.run_id: r.role for r in again}
    assert all(roles[r.run_id] == "earlier_pick" for r in stray)
    assert [r["role"] for r in csv_rows(results / SUMMARY_CSV)].count("earlier_pick") == len(stray)


def test_an_interrupted_round_resumes_with_the_same_decisions(tmp_path, corpus):
    spec, results = _spec(corpus), tmp_path / "results"
    whole, _, _ = train_spec(spec, tmp_path / "whole", FakeBackend(planted))
    first = FakeBackend(planted, fail={r.run_id for r in whole[12:14]})  # round 2 stops part-way
    train_spec(spec, results, first)
    assert not (results / "runs" / whole[-1].run_id).exists()
    for run_id in first.fail:
        (results / "runs" / run_id / "summary.json").unlink()  # as --rerun-failed would retrain them
    resumed, _, _ = train_spec(spec, results, FakeBackend(planted))
    assert [r.run_id for r in resumed] == [r.run_id for r in whole]


def test_the_dry_run_states_the_rounds_budget_and_worst_case(corpus, capsys, tmp_path):
    from gptlab.sweep_cli import main

    path = tmp_path / "refine.yaml"
    import yaml

    path.write_text(yaml.safe_dump(_raw(corpus)))
    assert main([str(path), "--dry-run", "--results-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "tuned sweep (refine): round 1 trains 2 cells x 5 levels of train.lr x 1 seed" in out
    assert ("selection, worst case: 10 runs per cell (tune.max_runs_per_cell), 20 runs, 10 to train, plus 10 whose "
            "settings the selection chooses (counted as untrained)") in out  # round 1's runs are known, the rest not
    assert "tuned in all (selection, worst case + estimation), 24 runs" in out


# -- a tuning method from a plugin: the planner seam -------------------------------------------------

PLUGIN = '''
"""A tuning method outside the package: one probe run per cell (role "probe") at the space's middle level,
then the grid's selection. It is one file, and neither the driver nor the command line names it."""
from gptlab.kinds.tune.kind import TUNERS
from gptlab.sweep.planners import Case, Stage
from gptlab.sweep.runs import SELECTION_SEED_OFFSET
from gptlab.kinds.tune.tuning import Grid, runs_at


@TUNERS.register("probe_first")
class ProbeFirst(Grid):
    """A probe per cell at the middle level, then every level (the grid)."""

    OPTIONS = {"probe_seed": 500}

    def probes(self):
        middle = self.tune.settings()[len(self.tune.settings()) // 2]
        return tuple(runs_at(self.spec, [middle], [SELECTION_SEED_OFFSET + self.tune.option("probe_seed")], "probe"))

    @classmethod
    def possible_runs(cls, spec):
        return [*super().possible_runs(spec), *cls(spec, None).probes()]

    def select(self, finished):
        probes = self.probes()
        if not finished.rows:
            return Stage("probes", probes, probes, tag="probes")
        if all(r.run_id in {p.run_id for p in probes} for r in self.selection):
            grid = tuple(self.spec.runs)
            return Stage("selection", grid, probes + grid, tag="selection")
        return super().select(finished)

    def selection_cases(self):
        return [Case("probes: 1 per cell", self.probes()), *super().selection_cases()]
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("plugin") / "probe_first.py"
    path.write_text(PLUGIN)
    return path


def test_a_plugin_tuning_method_plans_trains_resumes_and_stays_out_of_the_effects(plugin, corpus, tmp_path, capsys):
    import yaml

    from gptlab.report.load import load_results
    from gptlab.sweep import execute
    from gptlab.sweep_cli import main

    raw = _raw(corpus, method="probe_first", probe_seed=7)
    raw["tune"].pop("method")
    raw["tune"]["method"] = "probe_first"
    raw["plugins"] = [str(plugin)]
    spec = validate_spec(raw, corpus.parent / "sweep.yaml", {}, {})
    whole, out, planner = train_spec(spec, tmp_path / "whole", FakeBackend(planted))
    assert type(planner).__name__ == "ProbeFirst"
    roles = [r.role for r in whole]
    assert roles == ["probe"] * 2 + ["selection"] * 10 + ["estimation"] * 4
    rows = csv_rows(tmp_path / "whole" / SUMMARY_CSV)
    assert [r["role"] for r in rows].count("probe") == 2
    for row in rows:  # the loader needs each run's config beside its summary
        (tmp_path / "whole" / "runs" / row["run_id"] / "config.yaml").write_text("{}")
    (tmp_path / "whole" / "sweep.yaml").write_text(yaml.safe_dump(spec.to_dict()))
    res = load_results(tmp_path / "whole")
    assert set(res.runs["role"]) == {"estimation"} and len(res.runs) == 4  # the probes never reach an effect
    assert len(res.other_roles) == 2 and len(res.selection) == 10
    # A sweep killed in its second stage resumes with the same plan.
    results = tmp_path / "killed"
    train_spec(spec, results, FakeBackend(planted, fail={whole[3].run_id}))
    (results / "runs" / whole[3].run_id / "summary.json").unlink()
    resumed, _, _ = train_spec(spec, results, FakeBackend(planted))
    assert [r.run_id for r in resumed] == [r.run_id for r in whole]
    # The dry run shows the plugin's stages; the driver and the command line name no tuning method.
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main([str(path), "--dry-run", "--results-dir", str(tmp_path / "dry")]) == 0
    assert "probes: 1 per cell, 2 runs" in capsys.readouterr().out
    for module in (execute, __import__("gptlab.sweep_cli", fromlist=["x"])):
        source = Path(module.__file__).read_text()
        assert "probe_first" not in source and "Refine" not in source and "Grid" not in source



def test_the_dry_run_of_a_budget_that_round_one_fills_has_no_worst_case_stand_ins(corpus):
    """max_runs_per_cell equal to the space's levels leaves no run past round 1 (the preview once asked for 0 seeds)."""
    spec = _spec(corpus, max_runs_per_cell=len(LRS))
    cases = Refine(spec, io.StringIO()).preview().cases
    worst = next(c for c in cases if c.label.startswith("selection, worst case"))
    assert worst.stand_ins == () and len(worst.runs) == 2 * len(LRS)
