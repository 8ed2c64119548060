"""`python -m gptlab.sweep SPEC.yaml`: the sweep's command line (`gptlab.sweep_cli.main`), exit status and all."""
import sys

from gptlab.executors.local import release_workers
from gptlab.sweep_cli import main

status = main(program=True)
release_workers()  # the process ends now, not once loky's manager thread has wound down
sys.exit(status)
