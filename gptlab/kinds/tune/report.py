"""`TuneReport`: the report's hooks of `tune:` (`gptlab.report.kinds.ReportKind`), each a step's part of the kind.

The load step reads the selection runs' cap (`load`). The tables step makes the tuned comparison before the effects
(`tables.tuning_view`: every call is checked against the loss its cell's pick leaves, `loss_left`) and adds the
report's own effects at the picks after them (`tables.with_effects`), with the given picks; it gives an arms
sweep's table each arm's pick (`picks`), its scorecard each arm's untuned effect (`tables.with_untuned`), and what
would decide an effect that depends on the picks (`to_decide`: its tuning cell's curve). The sentences step words
them (`sentences`) and adds the picks' warnings to the summary's (`warnings`); the figures step draws isolation.png
(`figure`); the document places the section after the effects (`section`). The report's own stability table splits
runs by the tuned keys (`setting_keys`), and says no untuned note for a sweep whose settings the kind chose (`tunes`).
Each step's module is imported when the report runs that step.
"""
from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from gptlab.kinds.tune.spec import KEY, tuned_space
from gptlab.report.kinds import REPORT_KINDS, KindSection, ReportKind


@REPORT_KINDS.register(KEY)
class TuneReport(ReportKind):
    """`tune:`'s side: the tuned comparison (or the settings given per cell), its tables, words, figure and section."""

    def load(self, res: Any) -> Any:
        from gptlab.kinds.tune.load import load

        return load(res)

    def before_effects(self, res: Any) -> Any:
        from gptlab.kinds.tune.tables import TuneTables, given_picks, tuning_view

        return TuneTables(view=tuning_view(res), given=given_picks(res))

    def loss_left(self, res: Any, numbers: Any) -> Mapping[tuple[str, ...], tuple[float, ...]] | None:
        from gptlab.kinds.tune.tables import loss_left_high

        return loss_left_high(res, numbers.view)

    def tables(self, res: Any, tables: Any) -> Any:
        import dataclasses

        from gptlab.kinds.tune.tables import with_effects

        numbers = tables.kinds[KEY]
        view = with_effects(numbers.view, res, tables.main, tables.interactions) if numbers.view else None
        return dataclasses.replace(numbers, view=view)

    def files(self, tables: Any) -> Mapping[str, pd.DataFrame]:
        return tables.kinds[KEY].files

    def picks(self, res: Any, tables: Any) -> Mapping[tuple[str, ...], str]:
        from gptlab.kinds.tune.tables import picks_text

        return picks_text(tables.kinds[KEY].view)

    def scorecard(self, res: Any, tables: Any, card: pd.DataFrame) -> pd.DataFrame:
        from gptlab.kinds.tune.tables import with_untuned

        return with_untuned(res, card, tables.kinds[KEY].view) if len(card) else card

    def to_decide(self, res: Any, tables: Any, cell: str) -> Mapping[str, Any]:
        from gptlab.kinds.tune.tables import open_curve

        view = tables.kinds[KEY].view
        return open_curve(res, view.curves if view is not None else None, cell)

    def setting_keys(self, res: Any) -> list[str]:
        return list(tuned_space(res.spec))

    def tunes(self, res: Any) -> bool:
        return True

    def sentences(self, res: Any, tables: Any) -> Any:
        from gptlab.kinds.tune.sentences import words

        return words(res, tables.kinds[KEY])

    def warnings(self, res: Any, tables: Any) -> list[str]:
        from gptlab.kinds.tune.sentences import tuning_warnings

        view = tables.kinds[KEY].view
        return tuning_warnings(view) if view is not None else []

    def seeds_only(self, res: Any) -> list[str]:
        return ["the fixed-setting effects of the tuning runs"] if len(res.selection) else []

    def figures(self, res: Any, tables: Any) -> Mapping[str, bytes | None]:
        from gptlab.kinds.tune.figure import isolation_plot

        view = tables.kinds[KEY].view
        return {"isolation": isolation_plot(res, view.table, view.keys, view.ceiling, view.curves)
                if view is not None and view.n_selection else None}

    def section(self, res: Any, tables: Any, words: Any, figures: Any) -> KindSection:
        from gptlab.kinds.tune.section import tuning_section

        return KindSection(blocks=tuple(tuning_section(res, tables, words, figures)), after="effects")
