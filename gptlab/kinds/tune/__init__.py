"""The `tune:` kind: each cell's settings tried on selection seeds, then its estimation seeds at its pick.
Registered under its key, as a plugin's kind is in its file."""
from gptlab.kinds.tune.report import TuneReport
from gptlab.report.kinds import REPORT_KINDS
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.tune_spec import TuneKind

SWEEP_KINDS.register("tune")(TuneKind)
REPORT_KINDS.register("tune")(TuneReport)
