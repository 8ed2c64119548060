"""The lines the dry run and the sweep print about a design before it trains: an arms sweep's seed allocation and a
warning when the effects' noise would have too few degrees of freedom.

Both count the estimation seeds per cell as the spec's kinds plan them (`sweep.kinds.seed_plan`: round 1's and the
most where a kind decides them in rounds, else the sweep's `seeds:`), and a kind adds its own words to the
allocation (`SweepKind.allocation_note`).
"""
from __future__ import annotations

from gptlab.stats.arms import ARM, baseline_seed_count
from gptlab.stats.models import MIN_RESIDUAL_DF, planned_df, t_quantile
from gptlab.sweep.kinds import kinds_of, seed_plan
from gptlab.sweep.runs import SweepSpec


def arms_allocation(spec: SweepSpec) -> str | None:
    """One line on how an arms sweep's seeds are allocated (None for a grid): the dry-run and the sweep print it."""
    if spec.arms is None:
        return None
    k, name = spec.arms.n_compared, spec.arms.baseline
    plan = seed_plan(spec)
    counts = [plan.first, plan.most] if plan else [len(spec.seeds)]
    pairs = " (round 1), at most ".join(f"{baseline_seed_count(n, k)} where an arm trains {n}" for n in counts)
    notes = "".join(kind.allocation_note(spec) for _, kind in kinds_of(spec))
    return (f"arms: {k} arm(s) each compared with the baseline {name}, which enters every comparison: it trains "
            f"about sqrt({k}) = {k ** 0.5:.2f} times an arm's seeds (Dunnett's square-root rule): {pairs}{notes}")


def noise_df_warning(spec: SweepSpec) -> str | None:
    """A warning (dry run and sweep start) when the design leaves the effects' noise fewer than `MIN_RESIDUAL_DF`
    residual df (`stats.models.planned_df`: round 1's seeds where a kind decides them in rounds), naming the seeds
    that would give that many; None otherwise, and for a design without replication (1 seed: no CI to widen)."""
    cells = sorted({r.cell for r in spec.runs}, key=str)
    plan = seed_plan(spec)
    seeds = plan.first if plan else len(spec.seeds)
    base = [c for c in cells if spec.arms is not None and dict(c).get(ARM) == spec.arms.baseline]

    def df(n: int) -> float:
        return planned_df(len(cells), n, spec.seed_count(base[0], n) if base else None)

    if seeds < 2 or not cells or df(seeds) >= MIN_RESIDUAL_DF:
        return None
    enough = next((n for n in range(seeds + 1, 100) if df(n) >= MIN_RESIDUAL_DF), None)
    have = df(seeds)
    what = f"{len(cells)} cell(s) x {seeds} seeds" + (" (round 1)" if plan else "")
    fix = (f"; {enough} seeds per cell give {df(enough):.3g} (`--set seeds={enough}`" +
           (f", or {plan.fix})" if plan else ")") if enough else "")
    return (f"warning: {what} leave {have:.3g} residual degree(s) of freedom for the noise every effect's CI is "
            f"computed from: a 95% CI is then +/-{t_quantile(0.975, have):.1f} standard errors wide (+/-1.96 with "
            f"many), too wide to call most effects{fix}")
