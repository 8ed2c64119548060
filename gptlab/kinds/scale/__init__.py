"""The `scale:` kind: grid keys whose levels are scales, every effect at each of their levels and none of their own.
Registered under its key, as a plugin's kind is in its file."""
from gptlab.kinds.scale.report import ScaleReport
from gptlab.report.kinds import REPORT_KINDS
from gptlab.sweep.kinds import SWEEP_KINDS
from gptlab.sweep.scale_spec import ScaleKind

SWEEP_KINDS.register("scale")(ScaleKind)
REPORT_KINDS.register("scale")(ScaleReport)
