"""How long a student waits after moving a dashboard control, kernel side (compute + redraw).

How it measures. Each notebook's code cells run in-process, in order, in one IPython shell (the
notebook's own code, presets and closures, so the dashboards are exactly the notebook's; no
runner is re-imported by hand). Right after a cell that builds dashboards, every control of each
new dashboard is moved to its minimum, middle and maximum (sliders: min / the grid point nearest
the middle / max; selection sliders, dropdowns and toggle buttons: first / middle / last option;
checkboxes: False / True; a text box: a search word, then empty); a move to the value the control
already holds triggers nothing and is not counted. Each move is timed from setting
``control.value`` to the return of the dashboard's recompute and redraw (compute, then the chart
handed to the persistent ``alt.JupyterChart``, i.e. serialised to its Vega-Lite spec, with no
browser attached). After a control's moves it goes back to its start value (not timed), so every
control is moved from the notebook's own settings. Cells after the last dashboard are not run.

Threads: 2 (OMP/MKL and torch; ``--threads`` to change), what a student on a 2-core laptop or
Binder pod has; a notebook that sets its own thread count (``use_threads``) keeps it, as in a real
kernel. The CSV also has each move's CPU seconds (all threads of this process), which other
processes on a shared machine disturb less than the wall time the table reports.

Usage:
    python benchmarks/slider_latency.py [--notebooks 01,03] [--csv out.csv]
Prints every move, then per notebook and overall: median, p90, max and the number of moves,
and the 10 slowest moves by name. Targets: p90 <= 0.2 s, max <= 1 s.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("MKL_NUM_THREADS", "2")
os.environ.setdefault("PYTHONHASHSEED", "0")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
P90_TARGET, MAX_TARGET = 0.2, 1.0


def _targets(w):
    """The values a control is moved to (min, middle, max), or [] for a control we cannot move."""
    import ipywidgets as W

    if isinstance(w, W.Checkbox):
        return [False, True]
    if isinstance(w, W.Text):
        return ["grpo", ""]
    if isinstance(w, (W.IntSlider, W.FloatSlider)):
        lo, hi, step = w.min, w.max, w.step
        n = int(round((hi - lo) / step))
        mid = lo + (n // 2) * step
        if isinstance(w, W.FloatSlider):
            mid = round(mid, 12)
        return [lo, mid, hi]
    opts = getattr(w, "options", None)
    if opts:
        vals = [o[1] if isinstance(o, tuple) else o for o in opts]
        # Dropdown/ToggleButtons with (label, value) pairs: .value is the value
        return [vals[0], vals[len(vals) // 2], vals[-1]]
    return []


def _label(w, v) -> str:
    opts = getattr(w, "options", None)
    if opts and isinstance(opts[0], tuple):
        for lab, val in opts:
            if val == v:
                return str(lab)
    return repr(v)


def run_notebook(path: Path, echo: bool = True) -> list[dict]:
    """Execute one notebook in-process and move every control of every dashboard; one dict per move."""
    from IPython.core.interactiveshell import InteractiveShell

    from labkit.viz import widgets as vw

    made: list = []
    orig_init = vw.Dashboard.__init__

    def spy(self, *a, **k):
        orig_init(self, *a, **k)
        made.append(self)

    vw.Dashboard.__init__ = spy
    shell = InteractiveShell.instance()
    shell.reset(new_session=True)
    cwd = os.getcwd()
    os.chdir(path.parent)  # the notebooks run from their own folder
    moves: list[dict] = []
    try:
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        last = max((i for i, c in enumerate(cells) if "interact(" in "".join(c["source"])), default=-1)
        for i, c in enumerate(cells[: last + 1]):
            src = "".join(c["source"])
            before = len(made)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                res = shell.run_cell(src, silent=True, store_history=False)
            if not res.success:
                raise RuntimeError(f"{path.name}: code cell {i} failed: {res.error_in_exec or res.error_before_exec!r}")
            for d_i, dash in enumerate(made[before:]):
                for name, w in dash.controls.items():
                    start = w.value
                    for v in _targets(w):
                        if v == w.value:
                            continue
                        n0 = dash.n_updates
                        c0, t0 = time.process_time(), time.perf_counter()
                        w.value = v
                        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                        if dash.n_updates == n0:  # snapped to the value it held: nothing ran
                            continue
                        if dash.error is not None:
                            raise RuntimeError(f"{path.name} cell {i} {name}={v!r}: {dash.error!r}")
                        m = {"notebook": path.stem[:2], "cell": i, "dashboard": d_i, "control": name,
                             "value": _label(w, v), "seconds": dt, "cpu_seconds": cpu}
                        moves.append(m)
                        if echo:
                            print(f"  {path.stem[:2]} cell {i:2d} {name:>16s} -> {m['value']:<24s} {dt:7.3f} s",
                                  flush=True)
                    with contextlib.redirect_stdout(io.StringIO()):
                        w.value = start
    finally:
        vw.Dashboard.__init__ = orig_init
        os.chdir(cwd)
    return moves


def _row(name: str, s: np.ndarray) -> str:
    return (f"{name:10s} {np.median(s):8.3f} {np.percentile(s, 90):8.3f} {s.max():8.3f} {len(s):6d}"
            + ("" if np.percentile(s, 90) <= P90_TARGET and s.max() <= MAX_TARGET else "   <-- over target"))


def report(moves: list[dict]) -> None:
    """Print the distribution per notebook and overall, and the 10 slowest moves."""
    print(f"\n{'notebook':10s} {'median':>8s} {'p90':>8s} {'max':>8s} {'moves':>6s}   (seconds)")
    for nb in sorted({m["notebook"] for m in moves}):
        print(_row(nb, np.array([m["seconds"] for m in moves if m["notebook"] == nb])))
    allv = np.array([m["seconds"] for m in moves])
    print(_row("overall", allv))
    print("\nslowest 10 moves:")
    for m in sorted(moves, key=lambda m: -m["seconds"])[:10]:
        print(f"  {m['seconds']:7.3f} s  notebook {m['notebook']} cell {m['cell']} {m['control']} -> {m['value']}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--notebooks", default="", help="comma-separated numbers, e.g. 01,03 (default: all)")
    ap.add_argument("--csv", default="", help="also write every move to this CSV file")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2, a 2-core laptop)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.notebooks:
        want = {n.strip().zfill(2) for n in args.notebooks.split(",") if n.strip()}
        paths = [p for p in paths if p.name[:2] in want]
    moves: list[dict] = []
    for p in paths:
        t0 = time.perf_counter()
        got = run_notebook(p)
        moves += got
        print(f"{p.name}: {len(got)} moves ({time.perf_counter() - t0:.0f} s including the notebook's cells)",
              flush=True)
    report(moves)
    if args.csv:
        import pandas as pd

        pd.DataFrame(moves).to_csv(args.csv, index=False)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
