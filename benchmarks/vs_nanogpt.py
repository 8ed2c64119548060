"""gptlab vs karpathy/nanoGPT on the same CPU, side by side, as a tokens/s ratio.

Both train the nanoGPT CPU configuration (pre-LN, GELU, learned positions, tied head, n_layer=4,
n_head=4, n_embd=128, block_size=64, batch_size=12, dropout 0, float32, lr 1e-3 -> 1e-4 over
2000 iterations, warmup 100). The two are alternated `--rounds` times, because these machines are
noisy; the figure is the ratio of steady-state training throughput (median time per iteration,
evaluation excluded) in each round. `--loss-check` also trains both for the full 2000
iterations and prints their final validation losses.

nanoGPT is not part of this project: give the path of your own checkout with `--reference`.
Its data files (train.bin, val.bin, meta.pkl in its char format) are written by this script
from the same text, into a temporary folder.

    python benchmarks/vs_nanogpt.py --reference ~/src/nanoGPT [--rounds 3] [--iters 400] [--loss-check]
"""
from __future__ import annotations

import argparse
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gptlab.run.data import load_dataset, resolve_dataset
from gptlab.runio import read_json

SETTINGS = dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12, dropout=0.0, lr=1e-3,
                min_lr=1e-4, warmup_iters=100, lr_decay_iters=2000, beta2=0.99, weight_decay=0.1, grad_clip=1.0)
TOKENS_PER_ITER = SETTINGS["batch_size"] * SETTINGS["block_size"]


def prepare_reference_data(workdir: Path) -> None:
    """nanoGPT's shakespeare_char format: uint16 ids, 90/10 split, meta.pkl with the vocabulary."""
    ds = load_dataset("tinyshakespeare")
    folder = workdir / "data" / "shakespeare_char"
    folder.mkdir(parents=True, exist_ok=True)
    ds.train.numpy().astype(np.uint16).tofile(folder / "train.bin")
    ds.val.numpy().astype(np.uint16).tofile(folder / "val.bin")
    chars = ds.tokenizer.chars
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)


def run_reference(reference: Path, workdir: Path, iters: int, eval_interval: int, eval_iters: int, threads: int) -> dict:
    s = SETTINGS
    cmd = [sys.executable, str(reference / "train.py"), str(reference / "config" / "train_shakespeare_char.py"),
           "--device=cpu", "--compile=False", f"--eval_iters={eval_iters}", "--log_interval=1",
           f"--block_size={s['block_size']}", f"--batch_size={s['batch_size']}", f"--n_layer={s['n_layer']}",
           f"--n_head={s['n_head']}", f"--n_embd={s['n_embd']}", f"--max_iters={iters}",
           f"--lr_decay_iters={s['lr_decay_iters']}", f"--dropout={s['dropout']}", f"--eval_interval={eval_interval}",
           f"--out_dir={workdir / 'out'}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, check=True).stdout
    wall = time.perf_counter() - start
    iter_ms = {int(i): float(ms) for i, ms in re.findall(r"iter (\d+): loss [\d.]+, time ([\d.]+)ms", out)}
    steady = [ms for i, ms in iter_ms.items() if i > 10 and i % eval_interval != 0]
    vals = re.findall(r"step (\d+): train loss [\d.]+, val loss ([\d.]+)", out)
    return {"ms_per_iter": statistics.median(steady), "wall_s": wall, "val_loss": float(vals[-1][1]) if vals else None}


def run_gptlab(workdir: Path, iters: int, eval_interval: int, threads: int, compile_: bool | None) -> dict:
    s = SETTINGS
    out = workdir / f"gptlab-{time.time_ns()}"
    cmd = [sys.executable, "-m", "gptlab.train", "--out", str(out), "--train.device", "cpu",
           "--train.max_iters", str(iters), "--train.eval_interval", str(eval_interval), "--train.log_interval", "50",
           "--train.lr_decay_iters", str(s["lr_decay_iters"])]
    for key in ("n_layer", "n_head", "n_embd", "block_size", "dropout"):
        cmd += [f"--model.{key}", str(s[key])]
    for key in ("batch_size", "lr", "min_lr", "warmup_iters", "beta2", "weight_decay", "grad_clip"):
        cmd += [f"--train.{key}", str(s[key])]
    if compile_ is not None:
        cmd += ["--train.compile", str(compile_).lower()]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - start
    rows = [line.split(",") for line in (out / "metrics.csv").read_text().splitlines()[1:]]
    # Median time per iteration over metric rows whose interval holds no evaluation or compilation.
    deltas = [(float(b[6]) - float(a[6])) / (int(b[0]) - int(a[0])) * 1000
              for a, b in zip(rows[1:], rows[2:]) if not a[2] and int(a[0]) >= 100]
    summary = read_json(out / "summary.json")
    return {"ms_per_iter": statistics.median(deltas), "wall_s": wall, "val_loss": summary["final_val_loss"],
            "eval_share": summary["eval_s"] / summary["wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, help="path of a karpathy/nanoGPT checkout")
    parser.add_argument("--rounds", type=int, default=3, help="alternations of the two programs")
    parser.add_argument("--iters", type=int, default=400, help="iterations per throughput run")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="torch/OpenMP threads for both")
    parser.add_argument("--compile", choices=["default", "on", "off"], default="default", help="gptlab's torch.compile")
    parser.add_argument("--loss-check", action="store_true", help="also train both for 2000 iterations and compare val loss")
    args = parser.parse_args()
    if args.reference is None or not (args.reference / "train.py").is_file():
        print("skipped: give --reference PATH, a checkout of karpathy/nanoGPT (its train.py and config/)")
        return
    compile_ = {"default": None, "on": True, "off": False}[args.compile]
    resolve_dataset("tinyshakespeare")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        prepare_reference_data(workdir)
        # nanoGPT's train.py reads configurator.py from its working directory.
        (workdir / "configurator.py").symlink_to(args.reference.resolve() / "configurator.py")
        ratios = []
        for r in range(args.rounds):
            ref = run_reference(args.reference, workdir, args.iters, 100_000, 1, args.threads)
            ours = run_gptlab(workdir, args.iters, 100_000, args.threads, compile_)
            ratio = ref["ms_per_iter"] / ours["ms_per_iter"]
            ratios.append(ratio)
            print(
                f"round {r + 1}: nanoGPT {ref['ms_per_iter']:.1f} ms/iter "
                f"({TOKENS_PER_ITER / ref['ms_per_iter'] * 1000:.0f} tok/s, "
                f"{ref['wall_s']:.1f} s wall), gptlab {ours['ms_per_iter']:.1f} ms/iter "
                f"({TOKENS_PER_ITER / ours['ms_per_iter'] * 1000:.0f} tok/s, {ours['wall_s']:.1f} s wall): ratio {ratio:.2f}x",
                flush=True,
            )
        print(f"tokens/s ratio gptlab/nanoGPT over {args.rounds} rounds: median {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f}); {args.threads} thread(s), {args.iters} iterations")
        if args.loss_check:
            ref = run_reference(args.reference, workdir, 2000, 250, 200, args.threads)
            ours = run_gptlab(workdir, 2000, 250, args.threads, compile_)
            print(f"2000 iterations: nanoGPT val loss {ref['val_loss']:.4f} (200-batch estimate), "
                  f"gptlab {ours['val_loss']:.4f} (full val split); wall {ref['wall_s']:.0f} s vs {ours['wall_s']:.0f} s; "
                  f"gptlab evaluation (9 full-val passes) {ours['eval_share']:.1%} of its wall time")


if __name__ == "__main__":
    main()
