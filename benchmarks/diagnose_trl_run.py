"""Speed and memory of ``labkit.diagnose`` on a TRL-shaped run: 1,000 steps x 256 completions of
about 1,000 characters, 2 threads.

Prints figures (no assertions; the target is read + diagnose <= 60 s and <= 2 GB peak memory on
2 cores). The run is synthetic, written with pyarrow into a temporary folder with a fixed seed,
in the shape GRPOTrainer's ``log_completions=True`` writes it: one
``completions/completions_NNNNN.parquet`` per step with the columns ``step``, ``prompt``,
``completion``, two reward-function columns and ``advantage``. Each step draws 256 / 8 prompts
from a pool of ``--prompts`` (so prompts repeat across steps, and a prompt at two steps is two
groups) and 8 completions per prompt: text of 900-1,100 characters from a 24-character alphabet
(two of them outside ASCII), ``correct_reward`` 0/1 and ``format_reward`` 0/0.5 with per-group
rates that are often 0 or 1 (so some groups have zero variance), and the advantage as TRL
computes it (the group's rewards minus their mean, over their standard deviation + 1e-4).

A fresh process then runs ``diagnose(folder)`` with its defaults (the text read in chunks and
measured into a ``Tally``; the estimator comparison on a sample of 2,048 trajectories read back
with ``read_rollouts(rows=...)``), writes its report (every chart, the per-step ones included,
rendered to PNG) and prints the wall time of each stage from
``Diagnosis.seconds``, the CPU time, and the peak resident set size sampled every 5 ms (as
``benchmarks/diagnose_speed.py`` does; ``ru_maxrss`` would carry the parent's peak into the
child). Wall time is what the target is about; on a shared machine it also counts waiting for a
core, so the load average is printed before and after.

Run: ``OMP_NUM_THREADS=2 LABKIT_THREADS=2 python benchmarks/diagnose_trl_run.py [--steps 1000]
[--rows 256]`` (``--steps 20`` for a quick look).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnose_speed import PhasePeak, current_mb  # noqa: E402  (the same memory probe)

TARGET_SECONDS, TARGET_GB = 60.0, 2.0
ALPHABET = "0123456789+-*=;#() xyzéλ"
GROUP = 8


def write_run(folder: Path, steps: int, rows: int, prompts: int, seed: int = 0) -> Path:
    """Write the synthetic run (see the module docstring) into ``folder/completions``; returns
    that folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if rows % GROUP:
        raise ValueError(f"--rows: must be a multiple of the group size {GROUP}, got {rows}")
    rng = np.random.default_rng(seed)
    out = folder / "completions"
    out.mkdir(parents=True)
    pool = [f"Problem {i}: " + "".join(rng.choice(list("0123456789+*"), size=60)) + " = ?" for i in range(prompts)]
    codes = np.array([ord(c) for c in ALPHABET], dtype=np.uint32)
    n_groups = rows // GROUP
    for step in range(1, steps + 1):
        chosen = rng.choice(prompts, size=n_groups, replace=False if n_groups <= prompts else True)
        lengths = rng.integers(900, 1101, size=rows)
        chars = codes[rng.integers(0, len(codes), size=(rows, int(lengths.max())))]
        texts = [chars[i, :n].tobytes().decode("utf-32-le") for i, n in enumerate(lengths.tolist())]
        # per-group success rates, often 0 or 1: those groups have zero variance
        p_correct = rng.choice([0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0], size=n_groups).repeat(GROUP)
        p_format = rng.choice([0.0, 0.9, 1.0, 1.0], size=n_groups).repeat(GROUP)
        correct = (rng.random(rows) < p_correct).astype(np.float64)
        fmt = 0.5 * (rng.random(rows) < p_format)
        reward = (correct + fmt).reshape(n_groups, GROUP)
        # TRL's GRPO advantage: (r - group mean) / (group std + 1e-4), torch's (unbiased) std
        advantage = (reward - reward.mean(1, keepdims=True)) / (reward.std(1, ddof=1, keepdims=True) + 1e-4)
        table = pa.table({"step": pa.array(np.full(rows, step, dtype=np.int64)),
                          "prompt": pa.array([pool[c] for c in chosen.repeat(GROUP)], type=pa.large_string()),
                          "completion": pa.array(texts, type=pa.large_string()),
                          "correct_reward": pa.array(correct), "format_reward": pa.array(fmt),
                          "advantage": pa.array(advantage.reshape(-1))})
        pq.write_table(table, out / f"completions_{step:05d}.parquet")
    return out


def measure(folder: Path, sample: int) -> None:
    """The measured process: ``diagnose(folder)`` and nothing else, with its peak memory."""
    import torch

    from labkit.diagnose import diagnose

    torch.set_num_threads(2)
    imports = current_mb()
    with PhasePeak() as mem, tempfile.TemporaryDirectory() as out:
        start, cpu = time.perf_counter(), time.process_time()
        d = diagnose(folder, sample=sample or None, progress=False)
        mid = time.perf_counter()
        d.save(out)  # the report with every chart (the per-step ones included) rendered to PNG
        report = time.perf_counter() - mid
        sec, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"after imports: {imports:.0f} MB resident")
    print(f"{'stage':32s} {'wall s':>7s}")
    for stage, s in d.seconds.items():
        print(f"{'  ' + stage:32s} {s:7.2f}")
    print(f"{'  report (charts rendered)':32s} {report:7.2f}")
    print(f"{'diagnose(folder) + report':32s} {sec:7.2f}   ({cpu:.1f} s CPU, 2 threads)")
    chars = d.lengths.generated_mean * d.n_trajectories
    print(f"\n{d.n_trajectories:,} completions, {chars / 1e6:,.0f} M characters: {sec:.1f} s wall "
          f"(target {TARGET_SECONDS:.0f} s), peak RSS {mem.peak / 1024:.2f} GB (target {TARGET_GB:.0f} GB); "
          f"{'within' if sec <= TARGET_SECONDS and mem.peak / 1024 <= TARGET_GB else 'OUTSIDE'} the targets")
    if d.comparison is not None:
        print(f"estimators on {int(d.comparison.rows.numel()):,} trajectories: {', '.join(d.comparison.ran)}")
    print(d.summary())


def load() -> str:
    return "load average " + " / ".join(f"{x:.2f}" for x in os.getloadavg()) + f" (1 / 5 / 15 min, {os.cpu_count()} cores)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="training steps (one file each)")
    parser.add_argument("--rows", type=int, default=256, help="completions per step (a multiple of 8)")
    parser.add_argument("--prompts", type=int, default=64, help="distinct prompts the steps draw from")
    parser.add_argument("--sample", type=int, default=2048, help="trajectories for the estimator comparison (0 = all)")
    parser.add_argument("--keep", metavar="FOLDER", help="write the run here and keep it (default: a temporary folder)")
    parser.add_argument("--measure", metavar="FOLDER", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.measure:
        measure(Path(args.measure), args.sample)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep) if args.keep else Path(tmp)
        start = time.perf_counter()
        out = write_run(folder, args.steps, args.rows, args.prompts)
        size = sum(f.stat().st_size for f in out.iterdir())
        print(f"wrote {args.steps:,} steps x {args.rows} completions ({args.steps * args.rows:,} rows, "
              f"{size / 2**20:.0f} MB of Parquet) in {time.perf_counter() - start:.1f} s", flush=True)
        print(f"before: {load()}", flush=True)
        env = {**os.environ, "OMP_NUM_THREADS": "2", "LABKIT_THREADS": "2"}
        subprocess.run([sys.executable, __file__, "--measure", str(folder), "--sample", str(args.sample)],
                       env=env, check=True)
        print(f"after: {load()}")


if __name__ == "__main__":
    main()
