"""`figures/precision.png` of an adaptive sweep: each called effect's 95% half-width against seeds per cell.

Drawn from the kind's numbers (`tables.AdaptiveView.curve`: the half-widths with round 1's variance at each seed
count), with the target as a dashed line, in the report's figure style (`gptlab.report.figures.figstyle`).
"""
from __future__ import annotations

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from gptlab.report.figures import figstyle  # noqa: F401  first: it selects Agg before seaborn loads pyplot
from gptlab.report.figures.figstyle import to_png


def precision_curves(curve: pd.DataFrame) -> bytes | None:
    """Adaptive sweeps: each called effect's 95% half-width against seeds per cell, with the target."""
    curve = curve[curve["half_width"].notna()]
    if curve.empty:
        return None
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    sns.lineplot(data=curve, x="seeds", y="half_width", hue="effect", marker="o", ax=ax)
    ax.axhline(float(curve["target"].iloc[0]), color="black", linestyle="--", linewidth=1, label="target precision")
    ax.set(title="95% CI half-width of each called effect against seeds per cell (round 1's variance)",
           xlabel="seeds per cell", ylabel="95% CI half-width (nats)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(fontsize="small", loc="upper right")
    return to_png(fig)
