"""`python -m gptlab.sweep SPEC.yaml`: the sweep's command line (`gptlab.sweep_cli.main`), exit status and all.

A stop signal in the command's first second or two, while it imports torch and the rest of the lab, ends it with
one line and the status of a stopped sweep (130), as a stop later does: nothing has been trained or written yet.
Without this a Ctrl-C there printed a KeyboardInterrupt traceback (or, inside numpy's import, a RecursionError).
"""
import os
import signal
import sys

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # the command line's own (`sweep_cli.STOP_SIGNALS`)


def stopped_while_starting(signum: int, frame: object) -> None:
    """Exit at once: an exception raised inside an import may be caught and mangled by the module being imported."""
    os.write(2, b"interrupted while starting: nothing was trained or written\n")
    os._exit(130)


def run() -> int:
    """Import the command line under `stopped_while_starting`, give the signals back as they were, and run it."""
    caught = [sig for sig in STOP_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN]  # nohup's stay ignored
    for sig in caught:
        signal.signal(sig, stopped_while_starting)
    from gptlab.executors.local import release_workers
    from gptlab.sweep_cli import main

    for sig in caught:
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    status = main(program=True)
    release_workers()  # the process ends now, not once loky's manager thread has wound down
    return status


sys.exit(run())
