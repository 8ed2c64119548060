"""The `ladder:` kind: named rungs of run settings, smallest first, every arm tuned and estimated at every rung, each
rung predicted from the ones below before it trains.

One folder, both sides. The sweep's: the section (`spec`: `LadderSpec`, its rungs and their compute), its check and
hooks (`kind`: `LadderKind`), the rungs' stages (`stages`: `LadderStages`) and what a finished rung measured and
predicts (`measure`: predictions.csv). The report's (`report`: `LadderReport`, its hooks): the top rung as the
report's scope and every rung read on its own, the trends, ranking, picks and predictions beside measurements
(`tables`), their words (`sentences`), ladder.png (`figure`) and the section (`section`). The statistics are
`gptlab.stats.ladder`'s. Both sides register themselves under the kind's key, as a plugin's kind does in its file.
"""
from gptlab.kinds.ladder import kind, report  # noqa: F401 (their classes register the kind's two sides)
