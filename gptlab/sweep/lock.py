"""One sweep per results folder: `SweepLock` holds `results/NAME/.lock` while a sweep writes there.

The lock is an OS file lock (the `filelock` package, flock on Linux and macOS): the kernel drops
it when its process ends, however it ends, so a lock left by a killed sweep is simply taken over.
Beside it, `.lock.json` says who holds it, for the message a second sweep gets.
"""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from filelock import FileLock, Timeout

from gptlab.errors import GptlabError
from gptlab.run.resultsdir import ResultsDir
from gptlab.runio import atomic_write_text


class SweepLock:
    """Context manager: hold the results folder, or refuse in one line naming who holds it."""

    def __init__(self, results_dir: ResultsDir | Path, command: str = "") -> None:
        self.results_dir, self.command = ResultsDir(results_dir), command
        self.lock = FileLock(str(self.results_dir.lock), timeout=0)

    def __enter__(self) -> "SweepLock":
        self.results_dir.path.mkdir(parents=True, exist_ok=True)
        try:
            self.lock.acquire()
        except Timeout:
            raise GptlabError(f"{self.results_dir} is in use by another sweep ({self.results_dir.holder()}); wait for it "
                              "to finish or stop it, then rerun (finished runs are kept)") from None
        atomic_write_text(self.results_dir.lock_holder, json.dumps(
            {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S"),
             "command": self.command}))
        return self

    def __exit__(self, *exc: object) -> None:
        (self.results_dir.lock_holder).unlink(missing_ok=True)
        self.lock.release()
