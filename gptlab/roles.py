"""Run roles: what a run is for, summary.csv's `role` column; the one owner of the names the sweep writes and the report reads.

Only `ESTIMATION` runs enter the effects. `SELECTION` runs choose a tuned setting (`gptlab.sweep.tuning`);
`WORTH` runs are a `worth:` study's baseline trained to several lengths and `WORTH_TUNING` its lr
re-tuned at the shortest and longest (`gptlab.sweep.worth`). `EARLIER_PICK` runs are estimation runs of a
pick that the cell's curve, read with them, moved from (`gptlab.sweep.tuning`): points of the curve, in
no effect. Other roles are a plugin method's own.
"""
ESTIMATION = "estimation"  # a run whose result enters the effects (the only one that does)
SELECTION = "selection"  # a run that chooses a setting
WORTH = "worth"  # the baseline at its pick, under wsd, at one of the `worth:` lengths
WORTH_TUNING = "worth_tuning"  # the baseline at an lr around its pick, at the shortest or longest length
EARLIER_PICK = "earlier_pick"  # an estimation run of a pick the cell's curve moved from: a point of it, in no effect
