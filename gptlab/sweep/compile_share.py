"""The share of a sweep's training wall time spent compiling: one line at the end of the sweep.

Each run records `compile_s` in its summary.json: the seconds of its first steps through `torch.compile`
(a lone run's compiled forward, `Trainer.compile_s`; a population member's share of its worker's compiled
population step, `StepCache.compile_s`), which its `wall_s` includes. The share is their sum over the sum of
`wall_s`, over the sweep's runs that record it: the fraction of the workers' training time that went into
compiling, whatever the number of workers. Without `train.compile` (off by default on CPU) it is 0.
"""
from __future__ import annotations

from typing import Sequence

from gptlab.run.rundir import RunSummary


def compile_share(summaries: Sequence[RunSummary]) -> tuple[float, float, int]:
    """(compile seconds, wall seconds, runs) over the summaries that record their compile time."""
    timed = [s for s in summaries if isinstance(s.compile_s, (int, float)) and isinstance(s.wall_s, (int, float))]
    return sum(s.compile_s for s in timed), sum(s.wall_s for s in timed), len(timed)


def compile_line(summaries: Sequence[RunSummary]) -> str | None:
    """The sweep's compile share in one line; None when no run records it (runs of before the field)."""
    compile_s, wall_s, runs = compile_share(summaries)
    if not runs:
        return None
    if compile_s == 0:
        return f"compile: 0 s of {wall_s:.0f} s of training over {runs} run(s): no run was compiled (train.compile off)"
    return (f"compile: {compile_s:.0f} s of {wall_s:.0f} s of training over {runs} run(s) "
            f"({100 * compile_s / wall_s:.0f}% of the workers' time)")
