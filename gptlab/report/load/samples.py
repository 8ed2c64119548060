"""Text samples from the best checkpoint of each cell (same prompt and seed for every cell).

Owns the call to `gptlab.run.sampling.sample_from_run`, imported lazily, and `results/NAME/samples.json`
(run id -> text), where every sample drawn from a checkpoint is kept so that a report regenerated
without checkpoints (a fresh clone: checkpoints are never committed) still shows it. A run with
neither gives "(no checkpoint available)"; any other sampling error is logged and shown in the
report; sampling never makes the report fail. Before it samples a checkpoint it imports the plugins
the sweep named (`gptlab.run.sampling.import_sweep_plugins`): a run may use a plugin's registry entry.
"""
from __future__ import annotations

import json
import logging

import pandas as pd

from gptlab.run.rundir import RunDir
from gptlab.report.load.results import Results

log = logging.getLogger(__name__)

NO_CHECKPOINT = "(no checkpoint available)"


def best_runs(res: Results) -> pd.DataFrame:
    """The ok run with the lowest best val loss of each cell (cells without one are left out)."""
    ok = res.runs[res.runs["ok"] & res.runs["best_val_loss"].notna()]
    best = ok.loc[ok.groupby("cell", sort=False)["best_val_loss"].idxmin()]
    order = {c: i for i, c in enumerate(res.cells["cell"])}
    return best.sort_values("cell", key=lambda s: s.map(order))


def _stored(res: Results) -> dict[str, str]:
    try:
        data = json.loads(res.results_dir.samples_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _run_sample(folder: RunDir) -> str | None:
    """The sample the run wrote at the end of its training (`sample.txt`), if any."""
    try:
        return (folder / RunDir.SAMPLE).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def samples(res: Results) -> list[tuple[str, str, str]]:
    """(cell, run_id, text) for the best run of every cell that has an ok run; new texts are stored."""
    try:
        from gptlab.run.sampling import MAX_NEW_TOKENS, PROMPT, SEED, sample_from_run
    except Exception as exc:  # module missing or broken: the report still renders
        log.info("no sampling available (%s)", exc)
        sample_from_run = None
    try:
        from gptlab.run.sampling import import_sweep_plugins
    except ImportError:  # a stand-in sampler without it (or none): nothing to import
        import_sweep_plugins = None
    plugins_ready = import_sweep_plugins is None
    stored = _stored(res)
    fresh: dict[str, str] = {}
    out = []
    for run in best_runs(res).itertuples():
        folder = res.results_dir.run(str(run.run_id))
        own = _run_sample(folder)  # written by the run from the same checkpoint and settings
        text = own or stored.get(str(run.run_id), NO_CHECKPOINT)
        if own is None and sample_from_run is not None:
            if not plugins_ready and (folder / RunDir.BEST).is_file():
                plugins_ready = True  # once, and only when there is a checkpoint to sample
                try:
                    import_sweep_plugins(folder.path)
                except Exception as exc:  # the sample of a run that needs them then says why it failed
                    log.warning("samples: %s", exc)
            try:
                text = fresh[str(run.run_id)] = sample_from_run(
                    folder.path, prompt=PROMPT, max_new_tokens=MAX_NEW_TOKENS, seed=SEED)
            except FileNotFoundError:
                pass
            except Exception as exc:  # a broken checkpoint must not break the report
                log.warning("sampling %s failed: %s", run.run_id, exc)
                text = f"(sampling failed: {type(exc).__name__}: {exc})"
        out.append((str(run.cell), str(run.run_id), text))
    if fresh and any(stored.get(k) != v for k, v in fresh.items()):
        from gptlab.runio import atomic_write_text
        try:
            atomic_write_text(res.results_dir.samples_json, json.dumps({**stored, **fresh}, indent=1, sort_keys=True) + "\n")
        except OSError as exc:  # a read-only results folder still gets its report
            log.warning("could not store samples in %s: %s", res.results_dir.samples_json, exc)
    return out
