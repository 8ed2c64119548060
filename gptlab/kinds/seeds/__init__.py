"""The `seeds:` kind in its mapping form, the adaptive rule (`seeds: {min, max, precision}`): round 1, then as many
seeds as round 1's noise asks for (Stein's two stages, `gptlab.stats.adaptive_seeds`).

One folder, both sides. The sweep's (`stages`: `AdaptiveSeedsKind` and its planner, `AdaptiveSeeds`, which writes
rounds.csv): the rule's check, its seeds, its seed plan and its rounds, wherever estimation runs train (a tuned
sweep's picks included). The report's (`report`: `AdaptiveReport`, its hooks): rounds.csv read back (`load`), the
rounds and each called effect's half-width (`tables`), their words (`sentences`), precision.png (`figure`) and the
section (`section`). Both register themselves under the kind's key, as a plugin's kind does in its file.
"""
from gptlab.kinds.seeds import report, stages  # noqa: F401 (their classes register the kind's two sides)
