"""Fuzz labkit's public API with bad and edge inputs and count the outcomes.

Every probe (tests/fuzz_cases.py) calls one public entry point with one thing changed from a
call that works, and lands in one of five classes: clear (ValueError/TypeError naming the
argument), edge-ok (finite result of the right shape), deep (any other exception), silent-nan
(NaN/inf returned), accepted (nonsense returned a result). Deterministic (fixed seeds).

    python scripts/fuzz_public_api.py                   # counts per class and per group
    python scripts/fuzz_public_api.py --list deep       # every probe of one class
    python scripts/fuzz_public_api.py --json out.json   # all results
    python scripts/fuzz_public_api.py --gaps            # KNOWN_GAPS dict for tests/fuzz_cases.py
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import torch

torch.set_num_threads(1)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import fuzz_cases as fc  # noqa: E402

SHORT = {"clear": "clear", "edge-ok": "edge", "deep": "deep", "silent-nan": "nan", "accepted": "acc"}


def run_all() -> list[dict]:
    rows = []
    for p in fc.build_probes():
        o = fc.run_probe(p)
        rows.append({"id": p.id, "group": p.group, "entry": p.entry, "desc": p.desc, "kind": p.kind,
                     "arg": list(p.arg), "class": o.cls, "exc": o.exc, "msg": o.msg,
                     "as_expected": fc.expected_ok(p, o)})
    return rows


def print_counts(rows: list[dict]) -> None:
    total = Counter(r["class"] for r in rows)
    print(f"{len(rows)} probes")
    print("| outcome | probes |\n| --- | --- |")
    for c in fc.CLASSES:
        print(f"| {c} | {total.get(c, 0)} |")
    kinds = Counter((r["kind"], r["class"]) for r in rows)
    print("\nby kind: " + ", ".join(f"{k}->{c}: {n}" for (k, c), n in sorted(kinds.items())))
    print(f"missed their expected class: {sum(not r['as_expected'] for r in rows)}\n")
    by = defaultdict(Counter)
    for r in rows:
        g = "estimators" if r["group"].startswith("estimator:") else r["group"]
        by[g][r["class"]] += 1
        if r["group"].startswith("estimator:"):
            by[r["group"]][r["class"]] += 1
    width = max(len(g) for g in by)
    print(f"{'group':<{width}} " + " ".join(f"{SHORT[c]:>5}" for c in fc.CLASSES) + "  total")
    for g in sorted(by, key=lambda g: (g.startswith("estimator:"), g)):
        print(f"{g:<{width}} " + " ".join(f"{by[g].get(c, 0):>5}" for c in fc.CLASSES) + f"  {sum(by[g].values()):>5}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", choices=fc.CLASSES, help="print every probe of this class")
    ap.add_argument("--json", help="write all results to this path")
    ap.add_argument("--gaps", action="store_true", help="print the KNOWN_GAPS dict (probes off their expected class)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = run_all()
    elapsed = time.perf_counter() - t0
    print_counts(rows)
    print(f"\nran in {elapsed:.1f} s")
    if args.list:
        print(f"\n# probes in class {args.list}, by entry point")
        for r in sorted((r for r in rows if r["class"] == args.list), key=lambda r: (r["group"], r["entry"], r["desc"])):
            print(f"{r['entry']:<28} {r['desc']:<45} [{r['kind']}] {r['exc']}: {r['msg'][:120]}")
    if args.gaps:
        print("\nKNOWN_GAPS: dict[str, str] = {")
        for r in rows:
            if not r["as_expected"]:
                print(f"    {r['id']!r}: {r['class']!r},")
        print("}")
    if args.json:
        Path(args.json).write_text(json.dumps({"seconds": round(elapsed, 2), "results": rows}, indent=1))


if __name__ == "__main__":
    main()
