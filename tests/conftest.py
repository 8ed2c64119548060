"""Shared fixtures: an isolated data cache, a small generated corpus, one torch thread, `no_figures`; and the
order of tests for pytest-xdist (`-n`, on by default in pyproject.toml).

Plain helpers (paths, `make_corpus`, `tiny_config`) live in helpers.py; only fixtures and hooks are here.
No test uses the network: downloads go to a local HTTP server, the real text comes from
`../shared/data` (or $GPTLAB_DATA_DIR), and most tests train on a corpus generated here.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from helpers import SHARED_DATA, make_corpus, skip_figures

import gptlab.kinds  # noqa: F401 (the shipped kinds registered first, as validating a spec does, whatever a test imports)


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist the `slow` tests come first. `--dist loadscope` hands out whole modules (a module's
    tests share its module-scoped fixtures: a trained sweep, a simulation, a SLURM or dask cluster, built once on
    one worker) in collection order, so the slow modules start first and the quick ones fill the workers' last
    minutes instead of one worker finishing a minute-long test alone (tests/README.md)."""
    if hasattr(config, "workerinput"):  # an xdist worker: its order is the schedule's (all workers sort alike)
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: modules stay in order


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """One torch thread here and in the processes the tests start (OMP_NUM_THREADS): the models are
    tiny, and on a busy 2-core machine a second thread makes every step several times slower.
    Sweep workers get their thread count from the plan, whatever this says."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def loky_workers_stay_warm():
    """The sweeps trained in this process keep their loky workers between tests.

    loky ends a worker idle for 10 s, and the next sweep then starts (and imports torch in) new ones:
    seconds each, and most gaps between two sweeps of the suite are longer than 10 s. Here workers idle
    for up to 10 minutes; everything else about the executor is what the sweep asked for (a dead or
    stopped executor is still replaced by a new one)."""
    from joblib.externals import loky

    get = loky.get_reusable_executor

    def warm(*args, **kwargs):
        kwargs.setdefault("timeout", 600)
        return get(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(loky, "get_reusable_executor", warm)
        yield


@pytest.fixture(autouse=True)
def one_torch_thread_again():
    """Before and after each test: a dry run in this process sets torch's thread count to its plan's. After, too:
    the next module's fixtures are built before this fixture runs for its first test, and a run trained on two
    threads differs from the same run on one in the last bits of its losses."""
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)


@pytest.fixture
def no_figures(monkeypatch):
    """The report without its figures, for tests of its text and tables (figures take seconds each)."""
    skip_figures(monkeypatch)


@pytest.fixture(autouse=True, scope="session")
def shared_texts():
    """Every test, module fixtures included, finds the shared texts where CI puts them (`../shared/data`, or the
    caller's $GPTLAB_DATA_DIR), whether or not the caller set the variable."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPTLAB_DATA_DIR", str(SHARED_DATA))
        yield


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets an empty user cache, so nothing depends on this machine's ~/.cache."""
    monkeypatch.setenv("GPTLAB_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    return make_corpus(tmp_path_factory.mktemp("corpus") / "tiny.txt")
