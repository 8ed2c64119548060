"""The report's section of `scale:`: the effects by scale, after the cells; whether each call holds, changes or
reverses, and whether each effect changes between scale levels (paired by seed, or unpaired across texts).

Its numbers are the kind's (`tables.ScaleView`), its sentences the kind's (`sentences.ScaleWords`), its figure the
kind's (`figures/effects_by_scale.png`); the schedule's note on a length factor is the report's own.
"""
from __future__ import annotations

import pandas as pd

from gptlab.kinds.scale.sentences import ScaleWords
from gptlab.kinds.scale.spec import KEY
from gptlab.kinds.scale.tables import ScaleView
from gptlab.report.document.blocks import Block, Bullets, Heading, Para, image
from gptlab.report.document.sections import table_blocks
from gptlab.report.figures import Figures
from gptlab.report.load import Results
from gptlab.report.sentences import Sentences
from gptlab.report.tables import ReportTables
from gptlab.run.config import LENGTH_KEY
from gptlab.stats.transfer import PAIRED, UNPAIRED


def scale_section(res: Results, tables: ReportTables, words: Sentences, figs: Figures) -> list[Block]:
    """Sweeps with `scale:`: every scientific effect at each level of each scale factor, and whether its call holds."""
    if not res.scale:
        return []
    view: ScaleView = tables.kinds[KEY]
    said: ScaleWords = words.kinds[KEY]
    table, sentences = view.by_scale, said.scale
    scales = ", ".join(f"`{s}`" for s in res.scale)
    blocks: list[Block] = [Heading("Effects by scale"), Para(
        f"Scale factors: {scales}. They are not reported as effects: each scientific factor's main effect "
        f"({res.unit}, level - baseline, averaged over the other scientific factors) is estimated at every level of "
        "each scale factor, the other scale factors at their baseline, each level its own model and Holm family. "
        "A call holds (the same at every level), changes, or reverses (better at one level, worse at another). "
        "Table: `tables/effects_by_scale.csv`.")]
    blocks += [Para(n) for n in words.schedule if LENGTH_KEY in res.scale]
    if not len(table):
        return blocks + [Para("No scale level has successful runs of every scientific cell.")]
    blocks.append(Bullets(sentences))
    blocks += table_blocks(table, list(table.columns), "effects_by_scale.csv", "rows")
    blocks += image(figs.kinds.get(KEY, {}).get("effects_by_scale"), "Effects at each level of each scale factor")
    changes = view.changes
    if not len(changes):
        return blocks
    pairing = changes["pairing"] if "pairing" in changes else pd.Series(PAIRED, index=changes.index)
    paired, unpaired = (pairing == PAIRED).any(), (pairing == UNPAIRED).any()
    blocks += [Para(
        "Does an effect change with scale? Comparing the CIs above is not that test: a seed's runs share their "
        "initialisation and batches at every level. Each effect's change from a scale factor's first level to "
        "another (effect at the level - effect at the first level, in the same seeds) is computed per seed, with a "
        "t interval over the seeds, Holm across each scale factor's rows: `changes` when the adjusted p < 0.05, "
        f"`no change within margin` when the 90% CI lies inside +/- {res.margin:g}, else `inconclusive`. "
        "Table: `tables/effect_changes.csv`.")] if paired else []
    if unpaired:
        blocks.append(Para(
            "Does an effect hold on the other text? The rows marked `unpaired` compare two independent estimates: "
            "each text's own analysis, whose CI counts its seeds and its test split's blocks (texts share no block "
            "and a seed's runs on two texts share no batch; in an arms design the baseline's extra seeds have no "
            "partner either). The change is the difference of the two effects, its variance the sum of theirs, "
            "with Welch-Satterthwaite degrees of freedom, Holm across each scale factor's rows: `reverses` when the "
            "adjusted p < 0.05 and the effect is called better on one and worse on the other, `changes` when the "
            f"adjusted p < 0.05 otherwise, `holds` when the change's 90% CI lies inside +/- {res.margin:g} "
            f"{res.unit}, else `inconclusive` (never read as `holds`); in a tuned sweep each change is also checked "
            "against both texts' picks (`tuning`). Calibrated by simulation: docs/STATISTICS.md. "
            "Table: `tables/effect_changes.csv`."))
    blocks.append(Bullets(said.changes))
    return blocks + table_blocks(changes, list(changes.columns), "effect_changes.csv", "rows")
