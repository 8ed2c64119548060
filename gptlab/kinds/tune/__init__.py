"""The `tune:` kind: each cell's settings tried on selection seeds, then its estimation seeds at its pick (or each
cell's setting given, `tune.picks`).

One folder, both sides. The sweep's: the section (`spec`: `TuneSpec`, and the kind's role `earlier_pick`), its
check and hooks, the tuning methods' registry and the given picks (`kind`: `TuneKind`, `TUNERS` with `grid` and
`refine`, `check_given`), the planner they extend (`tuning`: `TuneThenEstimate`, whose estimation runs in the
seeds kind's rounds where it has them) and the refining method (`refine`). The report's (`report`: `TuneReport`, its
hooks): the selection runs' cap (`load`), the tuned comparison and the given picks (`tables`), their words
(`sentences`), isolation.png (`figure`) and the section (`section`). The statistics are `gptlab.stats.picks`,
`lr_model`, `lr_curves`, `refine` and `robustness`'s. Both sides register themselves under the kind's key, as a
plugin's kind does in its file.
"""
from gptlab.kinds.tune import kind, report  # noqa: F401 (their classes register the kind's two sides)
