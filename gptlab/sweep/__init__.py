"""The sweep: a YAML grid x seeds (`spec`), its planners and execution, summary.csv (`summary`) and progress.

`python -m gptlab.sweep SPEC.yaml` runs `gptlab.sweep_cli.main`, the command line that joins the sweep and
its report; nothing in this package imports the report.
"""
