"""`figures/effects_by_scale.png` of a sweep with `scale:`: each scientific effect with its 95% CI at every level of
each scale factor, one panel per scale factor, in the report's figure style (`gptlab.report.figures.figstyle`)."""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from gptlab.report.figures import figstyle  # noqa: F401  first: it selects Agg before seaborn loads pyplot
from gptlab.report.figures.figstyle import to_png
from gptlab.report.load import Results


def effects_by_scale(table: pd.DataFrame, res: Results) -> bytes | None:
    """Each scientific effect with its 95% CI at every level of each scale factor (one panel per scale factor)."""
    table = table[table["estimate"].notna()]
    if table.empty:
        return None
    scales = list(dict.fromkeys(table["scale_factor"]))
    fig = Figure(figsize=(5 * len(scales) + 2, 4.5), layout="constrained")
    axes = fig.subplots(1, len(scales), squeeze=False)[0]
    effects = list(dict.fromkeys(zip(table["factor"], table["level"])))
    for ax, s in zip(axes, scales):
        part = table[table["scale_factor"] == s]
        order = list(dict.fromkeys(part["scale_level"]))
        for i, (f, lv) in enumerate(effects):
            rows = part[(part["factor"] == f) & (part["level"] == lv)]
            x = [order.index(v) + (i - (len(effects) - 1) / 2) * 0.12 for v in rows["scale_level"]]
            ax.errorbar(x, rows["estimate"], yerr=[rows["estimate"] - rows["ci_low"], rows["ci_high"] - rows["estimate"]],
                        fmt="o-", capsize=3, label=res.label(f, lv))
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(order)), [str(v) for v in order])
        ax.set(xlabel=f"{res.short(s)} (other scale factors at baseline)", ylabel=f"effect ({res.unit}, level - baseline)",
               title=f"Effects by {res.short(s)}")
    axes[-1].legend(fontsize="small", loc="best")
    return to_png(fig)
