"""The `scale:` kind: grid keys whose levels are scales, every effect at each of their levels and none of their own.

One folder, both sides. The sweep's (`spec`: `ScaleSpec` and `ScaleKind`, which gives the sweep its scale keys):
the keys' check (an arms sweep's come from its design, `gptlab.sweep.arms_spec`). The report's (`report`:
`ScaleReport`, its hooks): effects_by_scale.csv and effect_changes.csv (`tables`, over the report's own slices,
`gptlab.report.tables.scale`), their words (`sentences`), effects_by_scale.png (`figure`) and the section
(`section`). Both register themselves under the kind's key, as a plugin's kind does in its file.
"""
from gptlab.kinds.scale import report, spec  # noqa: F401 (their classes register the kind's two sides)
