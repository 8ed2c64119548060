"""Run roles: what a run is for, summary.csv's `role` column; the one owner of the names the sweep writes and the report reads.

Only `ESTIMATION` runs enter the effects. `SELECTION` runs choose a setting (a tuning method's: any `tune.method`,
`gptlab.kinds.tune.tuning`), which the report sets apart (`Results.selection`). Other roles are a kind's own
(`tune:`'s `earlier_pick` in `gptlab.kinds.tune.spec`, `worth:`'s in `gptlab.kinds.worth.spec`) or a plugin's,
in no effect.
"""
ESTIMATION = "estimation"  # a run whose result enters the effects (the only one that does)
SELECTION = "selection"  # a run that chooses a setting
