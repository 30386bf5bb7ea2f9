"""JSON Lines: one record per line (``.jsonl``, ``.json``; ``.gz`` compressed too).

Record numbers are **1-based line numbers**, blank lines included (what an editor shows); blank
lines are skipped. Each line is checked field by field as it is read (``record.parse_record``),
then the batch once more as a whole (``assemble``).
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from tqdm.auto import tqdm

from labkit.core.rollouts import Rollouts
from labkit.io.assemble import assemble
from labkit.io.errors import record_error
from labkit.io.record import FIELDS, parse_record, records_to_padded, rollout_records

__all__ = ["read_jsonl", "write_jsonl", "LARGE_BYTES"]

#: Files at least this large get a progress bar when ``progress=None``.
LARGE_BYTES = 32 * 2 ** 20
_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:')
_FIELD_SET = frozenset(FIELDS)


def _open(path: Path, mode: str):
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def _bad_json(line: str, err: json.JSONDecodeError, number: int, where: str):
    """Where a line stops being JSON: the last field name before the fault, when there is one."""
    keys = [k for k in _KEY.findall(line[:err.pos]) if k in _FIELD_SET]
    cut = "" if line.rstrip("\n").rstrip().endswith("}") else " (the line looks cut off: a truncated file?)"
    return record_error("source", "line", number, keys[-1] if keys else None,
                        f"not valid JSON at character {err.pos + 1}: {err.msg}{cut}", where)


def read_jsonl(path: Path, *, progress: bool | None = None) -> Rollouts:
    """Read a JSON Lines file of records into a validated Rollouts (RecordError on a bad line)."""
    path = Path(path)
    size = path.stat().st_size
    show_bar = size >= LARGE_BYTES if progress is None else progress
    records, numbers, ignored = [], [], set()
    where = str(path)
    with _open(path, "r") as f, tqdm(total=size, unit="B", unit_scale=True, desc=path.name,
                                     disable=not show_bar) as bar:
        for number, line in enumerate(f, 1):
            bar.update(len(line))
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise _bad_json(line, err, number, where) from None
            records.append(parse_record(obj, "source", "line", number, where))
            numbers.append(number)
            ignored.update(obj.keys() - _FIELD_SET)
    if not records:
        raise record_error("source", "line", None, None, "empty file: no records", where)
    info = {"source": where, "format": "jsonl"}
    if ignored:
        info["ignored_fields"] = tuple(sorted(ignored))
    return assemble(records_to_padded(records, numbers, "source", "line", where, info))


def write_jsonl(rollouts: Rollouts, path: Path) -> Path:
    """Write one record per line (compact JSON; see ``record.rollout_records`` for what is kept)."""
    path = Path(path)
    records = rollout_records(rollouts)
    with _open(path, "w") as f:
        for rec in records:
            f.write(json.dumps(rec, separators=(",", ":"), ensure_ascii=False, allow_nan=False))
            f.write("\n")
    return path
