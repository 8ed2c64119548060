"""The `seeds:` kind in its mapping form, the adaptive rule (`seeds: {min, max, precision}`): round 1, then as many
seeds as round 1's noise asks for. Registered under its key, as a plugin's kind is in its file."""
from gptlab.kinds.seeds.report import AdaptiveReport
from gptlab.report.kinds import REPORT_KINDS
from gptlab.sweep.adaptive_seeds import AdaptiveSeedsKind
from gptlab.sweep.kinds import SWEEP_KINDS

SWEEP_KINDS.register("seeds")(AdaptiveSeedsKind)  # a count or a list of seeds joins no kind
REPORT_KINDS.register("seeds")(AdaptiveReport)
