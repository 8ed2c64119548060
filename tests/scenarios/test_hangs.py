"""Waits on something outside the process end: a scheduler address that never answers as dask is one line after
3 x CONNECT_TIMEOUT_S, whether it is silent or speaks another protocol (before, both hung for good)."""
from __future__ import annotations

import http.server
import socket
import threading

import pytest
import yaml
from helpers import tiny_config

from gptlab.executors import scheduler
from gptlab.sweep_cli import main as sweep_main


@pytest.fixture
def silent_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(5)  # accepts connections, never says a word
        yield f"tcp://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def http_listener():
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("listener", ["silent_listener", "http_listener"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_a_scheduler_address_that_is_not_dask_is_one_line_in_seconds(listener, dry_run, request, tmp_path, corpus,
                                                                     monkeypatch, capsys):
    address = request.getfixturevalue(listener)
    monkeypatch.setattr(scheduler, "CONNECT_TIMEOUT_S", 0.4)  # a local listener answers (or not) within it
    config = tiny_config(corpus)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "s", "base": {k: config[k] for k in ("model", "train", "data")},
                                    "grid": {"model.activation": ["gelu", "relu"]}, "seeds": [0],
                                    "executor": {"backend": "dask", "scheduler": address}}))
    code = sweep_main([str(spec), "--results-dir", str(tmp_path / "results")] + (["--dry-run"] if dry_run else []))
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and f"cannot reach the dask scheduler at {address}" in err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_importing_dask_jobqueue_keeps_the_sigint_handler():
    """dask_jobqueue's first import sets SIGINT to sys.exit(): Ctrl-C then ended a SLURM sweep with exit 0 and no
    resume line. The import goes through `slurm.import_jobqueue`, which keeps the handler (in a fresh interpreter:
    the replacement happens once per process)."""
    import subprocess
    import sys

    from helpers import REPO

    code = ("import signal\n"
            "def mine(*a): pass\n"
            "signal.signal(signal.SIGINT, mine)\n"
            "from gptlab.executors.slurm import import_jobqueue\n"
            "import_jobqueue()\n"
            "print(signal.getsignal(signal.SIGINT) is mine)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.stdout.strip() == "True", out.stderr
