"""Speed and memory of labkit.io on a large dump: 100,000 trajectories x 256 tokens from Parquet.

A child process writes the file (token ids, outcome rewards, groups of 8, float32 log-probs and
entropies: what a verl or TRL run would dump) into a temporary folder; this process then reads it
with ``read_rollouts`` into a validated ``Rollouts`` and prints the wall time and the peak
resident memory (``resource.getrusage``: the process's high-water mark, imports included, and
the part the read added). Also: JSONL on a tenth of the trajectories, and what checking every
record against the JSON Schema with ``jsonschema`` would cost (measured on 1,000 records). Prints
figures, asserts nothing; the target for reading *and* diagnosing the Parquet file is <= 60 s
and <= 2 GB on 2 cores.

Usage: python benchmarks/io_speed.py [--trajectories 100000] [--tokens 256] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def write_dump(path: Path, n: int, T: int, seed: int = 0) -> None:
    """A synthetic dump in the record format, written column by column with pyarrow."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    offsets = pa.array(np.arange(0, n * T + 1, T, dtype=np.int32))

    def listed(flat):
        return pa.ListArray.from_arrays(offsets, pa.array(flat))

    table = pa.table({
        "group_id": pa.array(np.arange(n) // 8),
        "tokens": listed(rng.integers(0, 32_000, n * T, dtype=np.int32)),
        "reward": pa.array((rng.random(n) < 0.3).astype(np.float32)),
        "logprobs": listed(-rng.exponential(0.5, n * T).astype(np.float32)),
        "entropies": listed(rng.exponential(1.0, n * T).astype(np.float32)),
    })
    pq.write_table(table, path, compression="zstd")


def write_jsonl_dump(path: Path, n: int, T: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            rec = {"group_id": i // 8, "tokens": rng.integers(0, 32_000, T).tolist(), "reward": float(rng.random() < 0.3),
                   "logprobs": (-rng.exponential(0.5, T)).astype(np.float32).tolist(),
                   "entropies": rng.exponential(1.0, T).astype(np.float32).tolist()}
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trajectories", type=int, default=100_000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (and OMP_NUM_THREADS)")
    ap.add_argument("--write", help=argparse.SUPPRESS)
    ap.add_argument("--jsonl", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write:
        write_dump(Path(args.write), args.trajectories, args.tokens)
        return
    if args.jsonl:
        write_jsonl_dump(Path(args.jsonl), args.trajectories, args.tokens)
        return
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    from labkit.io import load_schema, read_rollouts

    n, T = args.trajectories, args.tokens
    with tempfile.TemporaryDirectory(prefix="labkit-io-") as tmp:
        path = Path(tmp) / "dump.parquet"
        start = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--write", str(path), "--trajectories", str(n),
                        "--tokens", str(T)], check=True)
        print(f"{'write the Parquet dump (child process)':52s} {time.perf_counter() - start:7.1f} s   "
              f"{path.stat().st_size / 2**20:7.0f} MiB on disk")
        before = peak_mib()
        start = time.perf_counter()
        ro = read_rollouts(path, progress=False)
        seconds = time.perf_counter() - start
        print(f"{'read_rollouts(parquet): %d x %d' % (ro.batch_size, ro.horizon):52s} {seconds:7.1f} s   "
              f"peak RSS {peak_mib():6.0f} MiB (imports {before:.0f} MiB, the read +{peak_mib() - before:.0f} MiB)")
        held = sum(t.numel() * t.element_size() for t in (ro.tokens, ro.mask, ro.rewards, ro.group_ids, ro.step_ids,
                                                             ro.turn_ids, ro.agent_ids, ro.logprobs, ro.entropies))
        print(f"{'the Rollouts holds':52s} {held / 2**20:7.0f} MiB of tensors")
        del ro

        m = max(n // 10, 1)
        jpath = Path(tmp) / "dump.jsonl"
        subprocess.run([sys.executable, __file__, "--jsonl", str(jpath), "--trajectories", str(m),
                        "--tokens", str(T)], check=True)
        start = time.perf_counter()
        ro = read_rollouts(jpath, progress=False)
        print(f"{'read_rollouts(jsonl): %d x %d' % (ro.batch_size, ro.horizon):52s} "
              f"{time.perf_counter() - start:7.1f} s   ({jpath.stat().st_size / 2**20:.0f} MiB file)")

        import jsonschema

        validator = jsonschema.Draft202012Validator(load_schema())
        lines = jpath.read_text().splitlines()[:1000]
        records = [json.loads(line) for line in lines]
        start = time.perf_counter()
        for rec in records:
            validator.validate(rec)
        per = (time.perf_counter() - start) / len(records)
        print(f"{'jsonschema on every record (measured on %d)' % len(records):52s} {per * 1e3:7.2f} ms per record "
              f"= {per * n:.0f} s for {n} records (the reader checks fields itself)")


if __name__ == "__main__":
    main()
