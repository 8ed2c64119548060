"""The report's text samples, gathered by the load step: one text from the best run of each cell (same prompt and seed).

Owns which run speaks for a cell (`best_runs`) and where its text comes from, in order: the sample
the run wrote at the end of its training (`sample.txt`, the same checkpoint and settings); a text
drawn from its best checkpoint now, through `gptlab.run.sampling.sample_from_run` (imported lazily);
else a text drawn before and kept, in the report's own `samples.json` (reports/NAME/, which the
render step writes: `Samples.cache_text`) or in results/NAME/samples.json, where reports before the
report's folder kept them (read, never written: no report step writes into results/NAME/). A run
with none of these gives "(no checkpoint available)"; any other sampling error is logged and shown
in the report; sampling never makes the report fail. A run may use a plugin's registry entry: the
load step imported the plugins its sweep named when it read sweep.yaml back (`gptlab.sweep.stored`).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from gptlab.report.load.results import Results
from gptlab.run.rundir import RunDir

log = logging.getLogger(__name__)

NO_CHECKPOINT = "(no checkpoint available)"
SAMPLES_JSON = "samples.json"  # in reports/NAME/: run id -> text drawn from a checkpoint, for reports without them


class Sample(NamedTuple):
    """One cell's text sample, from its best run."""

    cell: str
    run_id: str
    text: str


@dataclass(frozen=True)
class Samples:
    """The samples a report shows, and the texts drawn from checkpoints that its folder keeps."""

    shown: list[Sample] = field(default_factory=list)  # one per cell with an ok run, in the cells' order
    drawn: dict[str, str] = field(default_factory=dict)  # run id -> text drawn from a checkpoint, now or by a report before

    def cache_text(self) -> str | None:
        """reports/NAME/samples.json's text (None when nothing was drawn from a checkpoint: no file)."""
        return json.dumps(self.drawn, indent=1, sort_keys=True) + "\n" if self.drawn else None


def best_runs(res: Results) -> pd.DataFrame:
    """The ok run with the lowest best val loss of each cell (cells without one are left out)."""
    ok = res.runs[res.runs["ok"] & res.runs["best_val_loss"].notna()]
    best = ok.loc[ok.groupby("cell", sort=False)["best_val_loss"].idxmin()]
    order = {c: i for i, c in enumerate(res.cells["cell"])}
    return best.sort_values("cell", key=lambda s: s.map(order))


def read_stored(path: Path) -> dict[str, str]:
    """A samples.json (run id -> text); {} when it is missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def run_sample(folder: RunDir) -> str | None:
    """The sample the run wrote at the end of its training (`sample.txt`), if any."""
    try:
        return (folder / RunDir.SAMPLE).read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None


def gather(res: Results, report_dir: Path | str | None = None) -> Samples:
    """The sample of the best run of every cell that has an ok run; `report_dir` (reports/NAME/) holds the texts
    a report drew before (its `samples.json`), kept with the ones drawn now in `Samples.drawn`."""
    try:
        from gptlab.run.sampling import MAX_NEW_TOKENS, SEED, sample_from_run
    except Exception as exc:  # module missing or broken: the report still renders
        log.info("no sampling available (%s)", exc)
        sample_from_run = None
    kept = read_stored(Path(report_dir) / SAMPLES_JSON) if report_dir is not None else {}
    stored = {**read_stored(res.results_dir.samples_json), **kept}
    fresh: dict[str, str] = {}
    out = []
    for run in best_runs(res).itertuples():
        folder = res.results_dir.run(str(run.run_id))
        own = run_sample(folder)  # written by the run from the same checkpoint and settings
        text = own or stored.get(str(run.run_id), NO_CHECKPOINT)
        if own is None and sample_from_run is not None:
            try:
                text = fresh[str(run.run_id)] = sample_from_run(
                    folder.path, prompt=None, max_new_tokens=MAX_NEW_TOKENS, seed=SEED)  # the run's: `default_prompt`
            except FileNotFoundError:
                pass
            except Exception as exc:  # a broken checkpoint must not break the report
                log.warning("sampling %s failed: %s", run.run_id, exc)
                text = f"(sampling failed: {type(exc).__name__}: {exc})"
        out.append(Sample(cell=str(run.cell), run_id=str(run.run_id), text=text))
    return Samples(shown=out, drawn={**kept, **fresh})
