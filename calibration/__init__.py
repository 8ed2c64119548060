"""The calibration of the lab's statistics: simulated studies with planted truths, and fake results folders.

Not part of the installed package (pyproject.toml installs `gptlab*` only) and never imported by it:
the tests (pytest puts the checkout on sys.path) and the scripts of benchmarks/ (each puts the checkout
first on sys.path) import it from the checkout. Each `*_sim` module checks the `gptlab.stats` module of
its name (`effects_sim` checks `effects`); `arms_scores` scores `arms_sim`'s studies; `synthetic` writes
results folders with planted effects for the report's tests. Nothing is imported here.
"""
