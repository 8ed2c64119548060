"""Run roles: what a run is for, summary.csv's `role` column; the one owner of the names the sweep writes and the report reads.

Only `ESTIMATION` runs enter the effects. `SELECTION` runs choose a tuned setting (`gptlab.sweep.tuning`);
`EARLIER_PICK` runs are estimation runs of a pick that the cell's curve, read with them, moved from
(`gptlab.sweep.tuning`): points of the curve, in no effect. Other roles are a kind's own (`worth:`'s, in
`gptlab.kinds.worth.spec`) or a plugin's, in no effect.
"""
ESTIMATION = "estimation"  # a run whose result enters the effects (the only one that does)
SELECTION = "selection"  # a run that chooses a setting
EARLIER_PICK = "earlier_pick"  # an estimation run of a pick the cell's curve moved from: a point of it, in no effect
