"""Fuzz campaign of the sweep spec loader: thousands of generated specs through `--dry-run`.

The generators and the property are those of `tests/scenarios/test_fuzz_spec.py` (which runs a few hundred
specs in CI): specs mutated from the shipped ablations, specs of the right shape with random
contents, shipped specs with generated `tune:` and `executor:` sections (SLURM's `cluster` included),
and mutated specs with bytes inserted, cut or doubled (often not UTF-8); the first three with
random `--set`, `--jobs` and `--margin` options. Every spec is dry-run in this process by
`gptlab.sweep_cli.main`, as `python -m gptlab.sweep SPEC --dry-run` would; the property is that
it is accepted, or refused with exit status 2 and exactly one line `error: ...` naming a key, and
that nothing is written (the results folder and the working directory stay as they were).

Printed: specs tried, accepted, refused, tracebacks (must be 0), property violations (must be 0),
specs over the time limit, the slowest spec's seconds (wall, and CPU: under load the wall time is
mostly waiting for a core) and the largest memory growth of one spec
(the peak resident set during the spec, reset before each through /proc/self/clear_refs, minus the
resident set before it; tracemalloc's peak where /proc is missing). The slowest, the largest and
any failing document are kept under --keep for reproduction.

An accepted spec's dry run would time six training steps (seconds each, with the data loaded): the
estimator is replaced by a constant, as in the tests, since the campaign is about validation.

    python benchmarks/fuzz_spec.py [--specs 10000] [--seed 0] [--timeout 60] [--keep DIR]
"""
from __future__ import annotations

import argparse
import collections
import logging
import os
import re
import signal
import sys
import tempfile
import time
import traceback
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers import SHARED_DATA  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from scenarios import test_fuzz_spec as fuzz  # noqa: E402  (the generators and the property of the CI tests)

import gptlab.sweep.estimate  # noqa: E402

# A spec whose mutation drops its corpus falls back to Tiny Shakespeare: found where the tests find it (the
# shared data, or $GPTLAB_DATA_DIR), never downloaded (a failed download is a second line, the INFO that announced it)
os.environ.setdefault("GPTLAB_DATA_DIR", str(SHARED_DATA))


class SpecTimeout(Exception):
    """Raised by SIGALRM in the spec being dry-run."""


class CurrentStderr(logging.Handler):
    """Log records to whatever sys.stderr is now, so that a log line counts as a line of the spec's output."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(self.format(record) + "\n")


def _status_kib(field: str) -> int | None:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return None
    match = re.search(rf"{field}:\s+(\d+) kB", text)
    return int(match.group(1)) if match else None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set (Linux >= 4.0)
        return True
    except OSError:
        return False


class Campaign:
    """Counts and extremes over the generated specs."""

    def __init__(self, files: fuzz.FuzzFiles, timeout: int, keep: Path) -> None:
        self.files, self.timeout, self.keep = files, timeout, keep
        self.kinds: collections.Counter[str] = collections.Counter()
        self.accepted = self.refused = self.tracebacks = self.violations = self.timeouts = 0
        self.refusal_keys: collections.Counter[str] = collections.Counter()
        self.slowest = (0.0, "")
        self.most_cpu = (0.0, "")
        self.largest = (0, "")
        self.proc = _reset_peak() and _status_kib("VmHWM") is not None
        self.stopped = False

    def run(self, kind: str, document: str | bytes, argv: list[str]) -> None:
        self.kinds[kind] += 1
        n = sum(self.kinds.values())
        if self.proc:
            _reset_peak()
            before = _status_kib("VmRSS") or 0
        else:
            tracemalloc.start()
        signal.alarm(self.timeout)
        tick, cpu = time.perf_counter(), time.process_time()
        try:
            outcome, cwd_before = fuzz.run_spec(document, argv, self.files)
            if outcome.code == 130:  # Ctrl-C or a kill, taken by the sweep's CLI as its own interrupt
                self.stopped = True
            else:
                fuzz.assert_property(outcome, self.files, cwd_before)
        except SpecTimeout:
            self.timeouts += 1
            self._keep(n, "timeout", document, argv, "")
        except AssertionError as err:
            self.violations += 1
            self._keep(n, "violation", document, argv, str(err))
        except Exception:  # what a user would see as a traceback
            self.tracebacks += 1
            self._keep(n, "traceback", document, argv, traceback.format_exc())
        else:
            if self.stopped:
                pass
            elif outcome.code == 0:
                self.accepted += 1
            else:
                self.refused += 1
                self.refusal_keys[_refusal_key(outcome.err)] += 1
        finally:
            seconds, cpu = time.perf_counter() - tick, time.process_time() - cpu
            signal.alarm(0)
            if self.proc:
                grown = ((_status_kib("VmHWM") or 0) - before) * 1024
            else:
                grown = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
        if self.stopped:  # Ctrl-C or a kill: the sweep's CLI took it as its own interrupt; stop the campaign
            raise KeyboardInterrupt
        what = f"spec {n} ({kind}): {_preview(document)}"
        if seconds > self.slowest[0]:
            self.slowest = (seconds, f"{cpu:.2f} s of CPU; {what}")
            self._save("slowest", document, argv)
        if cpu > self.most_cpu[0]:  # under load from other work, wall time is mostly waiting for a core
            self.most_cpu = (cpu, f"{seconds:.2f} s wall; {what}")
            self._save("most-cpu", document, argv)
        if grown > self.largest[0]:
            self.largest = (grown, what)
            self._save("largest", document, argv)
        if n % 500 == 0:
            print(f"  {n} specs: {self.accepted} accepted, {self.refused} refused, {self.tracebacks} tracebacks, "
                  f"{self.violations} violations", flush=True)

    def _save(self, name: str, document: str | bytes, argv: list[str]) -> None:
        """The slowest and the largest spec so far, to rerun: `python -m gptlab.sweep FILE --dry-run ARGV`."""
        self.keep.mkdir(parents=True, exist_ok=True)
        data = document.encode("utf-8", "surrogatepass") if isinstance(document, str) else document
        (self.keep / f"{name}.yaml").write_bytes(data)
        (self.keep / f"{name}.argv").write_text(" ".join(argv) + "\n", encoding="utf-8")

    def _keep(self, n: int, what: str, document: str | bytes, argv: list[str], detail: str) -> None:
        self.keep.mkdir(parents=True, exist_ok=True)
        data = document.encode("utf-8", "surrogatepass") if isinstance(document, str) else document
        (self.keep / f"{n:05d}-{what}.yaml").write_bytes(data)
        (self.keep / f"{n:05d}-{what}.txt").write_text(f"argv: {argv}\n{detail}\n", encoding="utf-8")


def _refusal_key(err: str) -> str:
    """The first words of a refusal, for the breakdown: 'base: train.lr', 'invalid YAML', 'grid'."""
    line = err.strip().removeprefix("error: ")
    if "invalid YAML" in line:
        return "invalid YAML (" + ("duplicate key" if "written twice" in line else
                                   "too many values" if "values" in line else
                                   "too deep" if "levels deep" in line else
                                   "cycle" if "cycle" in line else "syntax or value") + ")"
    if "not UTF-8" in line:
        return "not UTF-8"
    return re.split(r"[:( ]", line, maxsplit=1)[0][:40]


def _preview(document: str | bytes) -> str:
    text = document if isinstance(document, str) else document.decode("utf-8", "replace")
    text = text.replace("\n", " | ")
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text):,} characters)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--specs", type=int, default=10_000, help="specs to generate (default 10,000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generators (default 0)")
    p.add_argument("--timeout", type=int, default=60, help="seconds before a spec counts as hung (default 60)")
    p.add_argument("--keep", type=Path, default=None, help="folder for the slowest, largest and failing documents "
                   "(default: a temp folder)")
    args = p.parse_args()

    # The constant estimator: see the module docstring.
    gptlab.sweep.estimate.time_run = lambda config, steps=6, **kwargs: gptlab.sweep.estimate.StepTiming(1e-3, 1e-2)
    logging.basicConfig(level=logging.INFO, handlers=[CurrentStderr()])  # before the CLI's own basicConfig
    signal.signal(signal.SIGALRM, _alarm)
    scratch = Path(tempfile.mkdtemp(prefix="gptlab-fuzz-"))
    files = fuzz.FuzzFiles(scratch)
    campaign = Campaign(files, args.timeout, args.keep or scratch / "kept")

    kinds = ["mutated", "mutated", "random", "sectioned", "mangled"]

    @seed(args.seed)
    @settings(max_examples=args.specs, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(kinds))
        extras = data.draw(fuzz.cli_extras(big=True)) if kind != "mangled" else []
        make = {"random": fuzz.random_specs, "sectioned": fuzz.sectioned_specs}.get(kind, fuzz.mutated_specs)
        spec = data.draw(make(big=True))
        text, argv = fuzz.render(spec, extras, files)
        document = data.draw(fuzz.byte_mutations(text)) if kind == "mangled" else text
        campaign.run(kind, document, argv)

    def stop(signum: int, frame: object) -> None:
        campaign.stopped = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, stop)  # the sweep's CLI replaces SIGTERM's handler while a spec runs
    tick = time.perf_counter()
    try:
        one()
    except KeyboardInterrupt:
        print("\ninterrupted: the figures below cover the specs tried so far")
    c = campaign
    tried = sum(c.kinds.values())
    print(f"\nspecs tried: {tried:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(c.kinds.items()))}) "
          f"in {time.perf_counter() - tick:.0f} s, seed {args.seed}")
    print(f"accepted: {c.accepted:,}")
    print(f"refused in one line: {c.refused:,}; by first words: "
          + ", ".join(f"{k} {v:,}" for k, v in c.refusal_keys.most_common(12)))
    for section in ("tune", "executor", "executor.cluster"):  # the sections generated on their own too
        named = {k: v for k, v in c.refusal_keys.items() if k == section or k.startswith(section + ".")}
        print(f"refusals naming {section} keys: {sum(named.values()):,} ({len(named)} distinct keys)")
    print(f"tracebacks: {c.tracebacks}")
    print(f"property violations (not one line, no key named, a file written): {c.violations}")
    print(f"over {args.timeout} s: {c.timeouts}")
    print(f"slowest spec: {c.slowest[0]:.2f} s wall, {c.slowest[1]}")
    print(f"most CPU: {c.most_cpu[0]:.2f} s, {c.most_cpu[1]}")
    how = "peak RSS growth" if c.proc else "tracemalloc peak"
    print(f"largest memory of one spec ({how}): {c.largest[0] / 2**20:.0f} MiB, {c.largest[1]}")
    print(f"the slowest and largest specs (and any failing one): {c.keep}")
    if c.tracebacks or c.violations or c.timeouts:
        return 1
    return 0


def _alarm(signum: int, frame: object) -> None:
    raise SpecTimeout


if __name__ == "__main__":
    sys.exit(main())
