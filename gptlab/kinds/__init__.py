"""The shipped kinds of sweep, one folder each, named by its key: `seeds` (the adaptive rule), `scale`, `tune`, `worth`,
`ladder`.

A kind owns one top-level key of the sweep file and everything of it on both sides: its section's check, its
planner or stages (`gptlab.sweep.kinds.SWEEP_KINDS`, the hooks of `gptlab.sweep.planners.SweepKind`), and its
tables, sentences, figures and report section (`gptlab.report.kinds.REPORT_KINDS`, the hooks of
`gptlab.report.kinds.ReportKind`), registered under its key as a plugin's kind is in its file
(`ablations/plugins/recheck_kind.py`). Neither the sweep's core nor the report's names a kind: they ask every kind
through those hooks, and a kind reads another's results through them too. Importing this package registers the
shipped kinds in the order below, the order in which they join a spec and wrap its planner (the adaptive rule's
rounds first, then the tuner that runs them at its picks, then `worth:`'s lengths after both, and last the ladder,
whose rungs each run all of them); the spec's validation imports it by name before a sweep's plugins
(`gptlab.sweep.kinds.import_shipped_kinds`).
"""
# The order is the registration's: each import registers its kind (so no sorting here).
# isort: off
from gptlab.kinds import seeds  # noqa: F401
from gptlab.kinds import scale  # noqa: F401
from gptlab.kinds import tune  # noqa: F401
from gptlab.kinds import worth  # noqa: F401
from gptlab.kinds import ladder  # noqa: F401
# isort: on
