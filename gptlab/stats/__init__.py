"""The statistics: numbers only, below the report and the sweep (no sentences, no files, no figures).

Modules: `levels` (when two levels are one), `outcome` (which runs count, the unit of every loss and which loss the
effects are on), `design` (which cells a sweep has, and every effect as a contrast over them), `models` (the
models, stated once, and the error of a contrast), `calls` (Holm, TOST, the call words and the
equivalence margin), `effects` (every effect of one outcome), `adaptive_seeds` (the adaptive-seed rule),
`picks` (a tuned sweep's per-cell pick), `scale_change` (whether an effect changes with a scale
factor, paired by seed), `text_share` (CIs that count the test text's blocks too), `worth` (effects as the baseline's
training-step and wall-time multipliers), `worth_lr`
(whether the baseline's lr optimum moves with length). The simulations
that check them live outside the package, in the checkout's `calibration/`. Nothing is imported here, so
importing one module loads only what it needs.
"""
