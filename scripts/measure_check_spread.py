"""Measure how far each banded notebook number moves across CPU configurations.

    python scripts/measure_check_spread.py                  # the test matrix's configurations
    python scripts/measure_check_spread.py default:1 avx512:2 native:4 --write
    python scripts/measure_check_spread.py --from-log runs.jsonl --write   # no execution

Executes (in memory; nothing is stored) every notebook that has banded checks under each
configuration, logging every checked number (``LABKIT_CHECK_LOG``), then prints, for every
check, the largest distance from the stored value over the configurations (per column where
the check's band is per column) next to its band. ``--write`` stores those spreads in
data/notebook_checks/*.json, where the band's note says how the band was chosen from them.
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from lib.matrix_configs import DEFAULT_MATRIX, environment, parse

ROOT = Path(__file__).resolve().parent.parent
CHECKS = ROOT / "data" / "notebook_checks"


def execute(notebook: Path, env: dict[str, str]) -> None:
    """Run ``notebook`` in memory in a kernel started with the environment ``env``."""
    nb = nbformat.read(notebook, as_version=4)
    NotebookClient(nb, kernel_name="python3", timeout=900,
                   resources={"metadata": {"path": str(notebook.parent)}}).execute(env=env)


def spreads(log: Path) -> dict[tuple[str, str], dict[str, float]]:
    """{(notebook, key): {column: largest |value - stored|}} over every logged run (the column
    is a label's last ``/`` part: a table's column, or the key itself for a scalar)."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    stored = {p.stem: json.loads(p.read_text()) for p in CHECKS.glob("*.json")}
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        entry = stored[rec["notebook"]][rec["key"]]
        dist = out.setdefault((rec["notebook"], rec["key"]), {})
        for label, value in rec["values"].items():
            want = entry["values"].get(label)
            if want is None:
                continue
            column = label.rsplit("/", 1)[-1]
            dist[column] = max(dist.get(column, 0.0), abs(value - want))
    return out


def main(argv: list[str]) -> int:
    write = "--write" in argv
    from_log = argv[argv.index("--from-log") + 1] if "--from-log" in argv else None
    configs = [a for a in argv if ":" in a and not a.endswith(".jsonl")] or list(DEFAULT_MATRIX)
    for c in configs:
        parse(c)
    notebooks = [ROOT / "notebooks" / f"{p.stem}.ipynb" for p in sorted(CHECKS.glob("*.json"))]
    chosen = [a for a in argv if a.endswith(".ipynb")]
    if chosen:
        notebooks = [Path(a).resolve() for a in chosen]
    log = Path(from_log) if from_log else Path(tempfile.mkdtemp()) / "checks.jsonl"
    for config in ([] if from_log else configs):
        env = environment(config)
        env["LABKIT_CHECK_LOG"] = str(log)
        for k in ("LABKIT_STRICT_CHECKS", "LABKIT_RECORD_CHECKS"):
            env.pop(k, None)
        for nb in notebooks:
            print(f"{config}: executing {nb.name}", flush=True)
            execute(nb, env)
    found = spreads(log)
    seen = sorted({json.dumps(json.loads(l)["config"], sort_keys=True) for l in log.read_text().splitlines()})
    print(f"\nlargest |value - stored| over {len(seen)} configurations ({log}):")
    for (notebook, key), dist in sorted(found.items()):
        entry = json.loads((CHECKS / f"{notebook}.json").read_text())[key]
        for column, d in sorted(dist.items()):
            band = entry["band"].get(column) if isinstance(entry.get("band"), dict) else entry.get("band")
            flag = "" if band is not None and d <= band else "   <- outside the band"
            print(f"  {notebook:30s} {key + ('/' + column if column else ''):40s} spread {d:.4f}  band {band}{flag}")
    if write:
        for notebook in {n for n, _ in found}:
            path = CHECKS / f"{notebook}.json"
            entries = json.loads(path.read_text())
            for (nb, key), dist in found.items():
                if nb == notebook:
                    per_column = isinstance(entries[key].get("band"), dict)
                    entries[key]["spread"] = ({c: round(d, 4) for c, d in sorted(dist.items())} if per_column
                                              else round(max(dist.values()), 4))
            path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n")
        print(f"spreads written to {CHECKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
