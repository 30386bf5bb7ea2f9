"""The test matrix's configurations: CPU kernels x thread count, as environment variables.

A configuration is written ``KERNELS:THREADS``: ``default:1``, ``avx2:2``, ``native:4``.
``KERNELS`` is PyTorch's ``ATEN_CPU_CAPABILITY`` (``default``, ``avx2``, ``avx512`` on x86;
``native`` leaves it unset, so this machine's best kernels run). ``THREADS`` goes to torch
through ``LABKIT_THREADS`` (which overrides a notebook's ``use_threads``) and to OpenMP/BLAS.
Together they emulate a machine with a narrower or wider vector unit and another core count:
the float differences a student's laptop or a Binder pod would show.
"""
from __future__ import annotations

import os

DEFAULT_MATRIX = ("default:1", "avx2:2", "native:4")
KERNELS = ("default", "avx2", "avx512", "native")


def parse(config: str) -> tuple[str, int]:
    """``"avx2:2"`` -> ``("avx2", 2)``, with a clear error for anything else."""
    kernels, _, threads = config.partition(":")
    if kernels not in KERNELS or not threads.isdigit() or int(threads) < 1:
        raise SystemExit(f"configuration {config!r}: expected KERNELS:THREADS with KERNELS in {KERNELS} "
                         "and THREADS a positive integer, e.g. avx2:2")
    return kernels, int(threads)


def environment(config: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of ``base`` (default: this process's environment) set up for ``config``."""
    kernels, threads = parse(config)
    env = dict(os.environ if base is None else base)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if kernels != "native":
        env["ATEN_CPU_CAPABILITY"] = kernels
    for var in ("LABKIT_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env.setdefault("PYTHONHASHSEED", "0")
    return env
