"""`figures/ladder.png`: each arm's effect against the baseline with its 95% CI at every rung, against training compute
(log scale), one line per arm, in the report's figure style; only the rungs trained, nothing extrapolated."""
from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from gptlab.kinds.ladder.tables import LadderView, effects_only
from gptlab.report.figures import figstyle  # noqa: F401  first: it selects Agg before seaborn loads pyplot
from gptlab.report.figures.figstyle import to_png


def ladder_figure(view: LadderView, res: Any) -> bytes | None:
    """One line per arm: its effect (95% CI) at each rung, against the rung's training FLOPs."""
    table = effects_only(view.rungs)
    table = table[table["estimate"].notna()]
    if table.empty:
        return None
    fig = Figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.subplots()
    arms = list(dict.fromkeys(table["arm"]))
    for i, arm in enumerate(arms):
        rows = table[table["arm"] == arm]
        shift = 2 ** ((i - (len(arms) - 1) / 2) * 0.04)  # a few percent apart, so that the bars do not overlap
        ax.errorbar(rows["flops"] * shift, rows["estimate"],
                    yerr=[rows["estimate"] - rows["ci_low"], rows["ci_high"] - rows["estimate"]],
                    fmt="o-", capsize=3, label=f"arm={arm}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    rungs = table.drop_duplicates("rung")
    ax.set_xticks(rungs["flops"], [f"{r.rung}\n{r.flops:.2g}" for r in rungs.itertuples()])
    ax.minorticks_off()
    ax.set(xlabel="rung (training FLOPs, 6 N D)", ylabel=f"effect ({view.unit}, arm - baseline)",
           title="Each arm's effect up the ladder")
    ax.legend(fontsize="small", loc="best")
    return to_png(fig)
