"""`ladder:`, the kind of sweep that asks whether an effect holds at scale: named rungs of compute, every arm tuned and
estimated at each, its effect's trend in compute (`gptlab.stats.ladder`) and each rung predicted from the ones below.

What is here so far: the section's check and each rung's compute (`spec`). The kind's stages and report section
join it (issue 57).
"""
