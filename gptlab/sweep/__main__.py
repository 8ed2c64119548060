"""`python -m gptlab.sweep SPEC.yaml`: the sweep's command line (`gptlab.sweep.cli.main`), exit status and all."""
import sys

from gptlab.sweep.cli import main

sys.exit(main(program=True))
