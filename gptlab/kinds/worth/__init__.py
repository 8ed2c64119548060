"""The `worth:` kind of an arms sweep: what each arm is worth in the baseline's training steps and wall time.

One folder, both sides. The sweep's: the section (`spec`: `WorthSpec`, and the kind's run roles), the stage
that trains the baseline at its pick to several lengths and re-tunes it at the ends (`stages`: `WorthKind`),
and the arms' steps timed side by side after the runs (`step_times`). The report's (`report`: `WorthReport`,
its hooks): what it reads of results/NAME/ (`load`), worth.csv and worth_retune.csv and its scorecard columns
(`tables`), their words (`sentences`), worth.png (`figure`) and the section (`section`). The statistics are
`gptlab.stats.worth` and `gptlab.stats.worth_lr`'s. `WorthKind` and `WorthReport` register themselves under the
kind's key, as a plugin's kind does in its file; `gptlab.kinds` imports this package in the shipped kinds' order.
"""
from gptlab.kinds.worth import report, stages  # noqa: F401 (their classes register the kind's two sides)
