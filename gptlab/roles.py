"""Run roles: what a run is for, summary.csv's `role` column; the one owner of the names the sweep writes and the report reads.

Only `ESTIMATION` runs enter the effects. `SELECTION` runs choose a tuned setting (`gptlab.sweep.tuning`);
`WORTH` runs are a `worth:` study's baseline trained to several lengths and `WORTH_TUNING` its lr
re-tuned at the shortest and longest (`gptlab.sweep.worth`). Other roles are a plugin method's own.
"""
ESTIMATION = "estimation"  # a run whose result enters the effects (the only one that does)
SELECTION = "selection"  # a run that chooses a setting
WORTH = "worth"  # the baseline at its pick, under wsd, at one of the `worth:` lengths
WORTH_TUNING = "worth_tuning"  # the baseline at an lr around its pick, at the shortest or longest length
