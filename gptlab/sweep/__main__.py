import sys

from gptlab.sweep.cli import main

sys.exit(main(program=True))
