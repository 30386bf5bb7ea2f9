"""Checks for the numbers a notebook prints: exact ones as text, learned ones within a band.

The rule (README, "What a stored output may pin"):

* An **exact** quantity (a DP value, a count, a closed form) is printed rounded, with
  negative zero turned into zero (:func:`tidy`), and its cell keeps ``# NBVAL_CHECK_OUTPUT``:
  nbval compares the text.
* A **learned, trained or sampled** quantity (a critic's fit, an RL curve, a Monte Carlo
  estimate) depends on the CPU's vector width, the thread count and the library build, and a
  fit or a training run amplifies those differences. Its cell prints it for the reader and
  calls :meth:`NotebookChecks.expect`, which fails the cell when a number leaves the band
  stored for it in ``data/notebook_checks/<notebook>.json``. The band is measured: the
  spread over the test matrix's configurations (``make test-matrix``), widened by a margin,
  and never wider than what would still catch a broken method.

Under the tests (``$LABKIT_STRICT_CHECKS=1``, set by ``make test`` and ``make test-matrix``) a
number outside its band fails the cell. In a reader's own session it prints a short note
instead: a student who changes a seed or a slider-free setting should see the effect, not a
traceback that stops "Run All".

``make notebooks`` re-executes every notebook with ``LABKIT_RECORD_CHECKS=1``: the values in
the JSON files are rewritten from that one seeded run; the bands are kept. A run with
``LABKIT_CHECK_LOG=<file>`` appends every checked number to that file (one JSON line per
check): ``scripts/measure_check_spread.py`` turns those logs into the spreads the bands are
chosen from.
"""
from __future__ import annotations

import json
import math
import os
from numbers import Real
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd
import torch

from labkit.core.checks import strict_checks_enabled
from labkit.core.paths import data_path

CHECKS_DIR = data_path("notebook_checks")
RECORD_ENV = "LABKIT_RECORD_CHECKS"
LOG_ENV = "LABKIT_CHECK_LOG"
THREADS_ENV = "LABKIT_THREADS"


def use_threads(n: int) -> None:
    """Set torch's intra-op thread count to ``n`` unless ``$LABKIT_THREADS`` overrides it.

    A notebook picks the count that is fastest for its work; the test matrix sets
    ``LABKIT_THREADS`` to emulate a machine with another count (reduction order, and so the
    last bits of a float, depend on it). ``torch.get_num_threads()`` tells the count in force.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    override = os.environ.get(THREADS_ENV)
    if override:
        if not override.isdigit() or int(override) < 1:
            raise ValueError(f"${THREADS_ENV} must be a positive integer, got {override!r}")
        n = int(override)
    torch.set_num_threads(n)


def tidy(x: Any, decimals: int = 3) -> Any:
    """``x`` rounded to ``decimals``, with negative zero turned into zero.

    For printing exact quantities as text: ``-0.0004`` and ``0.0004`` both print as ``0.000``
    (adding +0.0 turns IEEE negative zero positive), so the sign of a rounding residue that
    depends on summation order never reaches the stored output. Accepts a float, a numpy
    array, a torch tensor, a pandas Series or DataFrame (non-numeric columns are left alone).
    """
    if not isinstance(decimals, int) or isinstance(decimals, bool) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative int, got {decimals!r}")
    if isinstance(x, pd.DataFrame):
        out = x.copy()
        for col in out.columns:
            if pd.api.types.is_float_dtype(out[col]):
                out[col] = out[col].round(decimals) + 0.0
        return out
    if isinstance(x, pd.Series):
        return x.round(decimals) + 0.0 if pd.api.types.is_float_dtype(x) else x
    if isinstance(x, torch.Tensor):
        return torch.round(x.double(), decimals=decimals) + 0.0
    if isinstance(x, np.ndarray):
        return np.round(x.astype(float), decimals) + 0.0
    if isinstance(x, Real) and not isinstance(x, bool):
        return round(float(x), decimals) + 0.0
    raise TypeError(f"x must be a number, array, tensor, Series or DataFrame, got {type(x).__name__}")


def flatten(value: Any) -> dict[str, float]:
    """The numbers in ``value`` as ``{label: float}``: a scalar is ``{"": v}``, a Series is
    keyed by its index, a DataFrame by ``"row/column"``, a mapping by its keys (nested
    mappings joined with ``/``). Booleans count as 0/1; non-numeric cells are skipped."""
    def num(v: Any) -> float | None:
        if isinstance(v, (bool, np.bool_)):
            return float(v)
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            return float(v)
        if isinstance(v, (Real, np.number)):
            return float(v)
        return None

    out: dict[str, float] = {}
    if isinstance(value, pd.DataFrame):
        for row, series in value.iterrows():
            for col, v in series.items():
                f = num(v)
                if f is not None:
                    out[f"{_label(row)}/{_label(col)}"] = f
    elif isinstance(value, pd.Series):
        for k, v in value.items():
            f = num(v)
            if f is not None:
                out[_label(k)] = f
    elif isinstance(value, Mapping):
        for k, v in value.items():
            inner = flatten(v)
            for sub, f in inner.items():
                out[f"{_label(k)}/{sub}" if sub else _label(k)] = f
    else:
        f = num(value)
        if f is None:
            raise TypeError(f"value must hold numbers (scalar, Series, DataFrame or mapping), got {type(value).__name__}")
        out[""] = f
    return out


def _label(k: Any) -> str:
    if isinstance(k, tuple):
        return "|".join(_label(x) for x in k)
    if isinstance(k, float):
        return f"{k:g}"
    return str(k)


class NotebookChecks:
    """The banded checks of one notebook, stored in ``data/notebook_checks/<name>.json``.

    Each entry: ``{"band": atol, "spread": measured spread, "note": why this band,
    "values": {label: stored value}}``. ``band`` may also be ``{column: atol}`` for a table
    whose columns need different bands (labels end in ``/column``).
    """

    def __init__(self, notebook: str, *, directory: str | Path | None = None):
        if not isinstance(notebook, str) or not notebook:
            raise ValueError(f"notebook must be a notebook's file stem such as '02_critics_gae', got {notebook!r}")
        self.notebook = notebook
        self.path = Path(directory or CHECKS_DIR) / f"{notebook}.json"
        self.entries: dict[str, dict] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def expect(self, key: str, value: Any) -> Any:
        """Fail (AssertionError) when a number in ``value`` leaves the band stored for ``key``.

        Returns ``value`` unchanged, so a cell can write ``print(checks.expect("k", table))``.
        In record mode (``$LABKIT_RECORD_CHECKS=1``, set by ``make notebooks``) the stored
        values are replaced by these; the band is kept.
        """
        if not isinstance(key, str) or not key:
            raise ValueError(f"key must be a non-empty string, got {key!r}")
        got = flatten(value)
        self._log(key, got)
        if os.environ.get(RECORD_ENV) == "1":
            self._record(key, got)
            return value
        entry = self.entries.get(key)
        if entry is None:
            raise KeyError(f"no stored check {key!r} in {self.path}: run `make notebooks` to record it "
                           "and give it a measured band")
        stored = entry["values"]
        if set(stored) != set(got):
            missing, extra = sorted(set(stored) - set(got)), sorted(set(got) - set(stored))
            raise AssertionError(f"check {key!r} of {self.notebook}: the numbers changed shape "
                                 f"(missing {missing[:5]}, new {extra[:5]}); re-record with `make notebooks`")
        failures = []
        for label, want in stored.items():
            band = self._band(entry, label)
            have = got[label]
            if want is None or (isinstance(want, float) and math.isnan(want)):
                ok = math.isnan(have)
            else:
                ok = abs(have - want) <= band + 1e-12
            if not ok:
                failures.append(f"  {label or key}: {have:.4g}, stored {want if want is None else round(want, 4)} "
                                f"± {band:g}")
        if failures:
            message = (f"{len(failures)} number(s) of check {key!r} in {self.notebook} left their band "
                       f"(measured spread across the test matrix: {entry.get('spread')}; {entry.get('note', '')}):\n"
                       + "\n".join(failures[:20]))
            if strict_checks_enabled():
                raise AssertionError(message)
            print(f"note: {len(failures)} number(s) above differ from the course's stored run by more than "
                  "their band; expected if you changed this notebook's settings.")
        return value

    @staticmethod
    def _band(entry: dict, label: str) -> float:
        band = entry.get("band")
        if isinstance(band, Mapping):
            column = label.rsplit("/", 1)[-1]
            if column not in band:
                raise KeyError(f"band of {label!r} not given (bands for columns {sorted(band)})")
            return float(band[column])
        if band is None:
            raise KeyError(f"no band set for {label!r}: measure the spread (`make test-matrix`) and set one")
        return float(band)

    def _record(self, key: str, got: dict[str, float]) -> None:
        entry = self.entries.setdefault(key, {"band": None, "spread": None, "note": "", "values": {}})
        entry["values"] = {k: (None if math.isnan(v) else round(v, 6)) for k, v in got.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.entries, indent=1, ensure_ascii=False) + "\n")

    def _log(self, key: str, got: dict[str, float]) -> None:
        log = os.environ.get(LOG_ENV)
        if not log:
            return
        record = {"notebook": self.notebook, "key": key, "values": got,
                  "config": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", THREADS_ENV, "OMP_NUM_THREADS")}}
        with open(log, "a") as fh:
            fh.write(json.dumps(record) + "\n")
