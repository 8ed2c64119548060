"""`python -m gptlab.sweep SPEC.yaml`: the sweep's command line (`gptlab.sweep.cli.main`), exit status and all."""
import sys

from gptlab.executors.local import release_workers
from gptlab.sweep.cli import main

status = main(program=True)
release_workers()  # the process ends now, not once loky's manager thread has wound down
sys.exit(status)
