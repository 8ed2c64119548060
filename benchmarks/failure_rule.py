"""Calibration of the status rule (`gptlab.statuses.judge`): its confusion table on simulated curves and on the shipped runs.

    python benchmarks/failure_rule.py [--runs 2000] [--seed 0] [--results results]

1. Simulated curves (`calibration.failure_sim`: healthy, slow starters, runs still learning at their end,
   runs that lag, loss spikes that recover, runs stuck on the unigram plateau, late collapses onto it and
   blow-ups that stay up), `--runs` of each kind at each curve length of 8, 12, 20, 40 and 80 metrics rows
   and at lengths drawn among them: the share of each kind given each status.
2. Every run folder under `--results`/*/runs/ with a summary: the status the earlier rule gave it (the 5%
   margin: best validation loss less than 5% below the unigram loss of its validation split reads `collapsed`)
   against the status the rule gives it from its own metrics.csv (its training split's unigram loss computed
   from the data it names), the runs where the two differ named, and the range of the rule's row noise.
   (The earlier on-read `unstable`, 10% above the median of a cell's other seeds, flagged one shipped run:
   study 8's SwiGLU seed 2 at 8e-3, `ok` under the rule.)

Deterministic for a given --seed. Needs the shipped corpora (GPTLAB_DATA_DIR) for part 2.
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from calibration.failure_sim import KINDS, LENGTHS, confusion  # noqa: E402
from gptlab.run.data import unigram_val_loss  # noqa: E402
from gptlab.run.reclassify import data_key, train_losses, unigram_of  # noqa: E402
from gptlab.run.rundir import RunDir  # noqa: E402
from gptlab.statuses import JUDGED, STATUSES, judge, row_noise  # noqa: E402


def simulated(runs: int, seed: int) -> None:
    shown = ("ok", "collapsed", "unstable")
    print(f"## Simulated curves ({runs} of each kind at each length; share given each status)\n")
    print("| kind | truth | rows | " + " | ".join(shown) + " |")
    print("|---|---|---|" + "---|" * len(shown))
    for rows in (*LENGTHS, None):
        table = confusion(runs, seed, rows)
        for kind in KINDS:
            counts = table[kind.name]
            cells = " | ".join(f"**{counts[s] / runs:.3f}**" if s == kind.truth else f"{counts[s] / runs:.3f}"
                               for s in shown)
            print(f"| {kind.name} | {kind.truth} | {rows or 'drawn'} | {cells} |")
    print()


def margin_status(summary: dict, key: tuple | None) -> str:
    """The status the 5% margin gave a run (`collapsed` below it), else the one it recorded."""
    status, best = summary.get("status"), summary.get("best_val_loss")
    if status != "ok" or key is None or not isinstance(best, (int, float)):
        return status
    dataset, path, val_fraction, tokenizer, vocab_size, test_fraction = key
    unigram = unigram_val_loss(dataset, path, val_fraction, False, tokenizer, vocab_size, test_fraction)
    return "collapsed" if (unigram - best) / unigram < 0.05 else status


def shipped(results: Path) -> None:
    pairs: collections.Counter = collections.Counter()
    changed, noise = [], []
    for folder in sorted(results.glob("*/runs/*")):
        recorded = RunDir(folder)
        try:
            raw = json.loads((folder / RunDir.SUMMARY).read_text())
        except (OSError, ValueError):
            continue
        train = train_losses(recorded.metric_rows())
        key = data_key(raw, folder / RunDir.CONFIG)
        plateau = None if key is None else unigram_of(key)
        status = margin_status(raw, key)
        if status not in JUDGED or train is None or plateau is None:
            pairs[(status, status)] += 1
            continue
        verdict = judge(train, plateau)
        pairs[(status, verdict.status)] += 1
        noise.append(row_noise(train))
        if verdict.status != status:
            changed.append(f"{folder.parent.parent.name}/{folder.name}: {status} -> {verdict.status}"
                           f" ({verdict.note or 'its curve shows no failure'})")
        assert recorded.summary()["status"] == verdict.status  # what every reader of the run now reads
    print(f"## Shipped runs ({sum(pairs.values())} run folders under {results}/*/runs/)\n")
    print("| the 5% margin | " + " | ".join(s for s in STATUSES) + " |")
    print("|---|" + "---|" * len(STATUSES))
    for before in STATUSES:
        if any(pairs[(before, s)] for s in STATUSES):
            print(f"| {before} | " + " | ".join(str(pairs[(before, s)]) for s in STATUSES) + " |")
    print(f"\nrow noise of the judged runs: {min(noise):.4f} to {max(noise):.4f} (median "
          f"{sorted(noise)[len(noise) // 2]:.4f}) nats a row")
    print("\nstatus changed:" if changed else "\nno run changes status.")
    for line in changed:
        print(f"- {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=REPO / "results")
    args = parser.parse_args()
    simulated(args.runs, args.seed)
    shipped(args.results)


if __name__ == "__main__":
    main()
