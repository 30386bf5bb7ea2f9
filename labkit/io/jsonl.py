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
from typing import Iterator

import numpy as np

from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.io.assemble import GroupNumbering, assemble
from labkit.io.errors import record_error
from labkit.io.record import ALL_OR_NONE, FIELDS, parse_record, records_to_padded, rollout_records

__all__ = ["read_jsonl", "iter_jsonl", "write_jsonl", "LARGE_BYTES", "RecordPicker"]

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


class RecordPicker:
    """Which records of a JSON Lines stream to parse: all of them, or the sorted 0-based record
    indices ``want`` (blank lines are not records). Call :meth:`take` on each record in order;
    lines not asked for are counted, never parsed. :meth:`finish` refuses indices past the end."""

    def __init__(self, want: np.ndarray | None = None) -> None:
        self.want, self.index, self.k = want, 0, 0

    @property
    def done(self) -> bool:
        """Every wanted record has been taken (the rest of the stream need not be read)."""
        return self.want is not None and self.k == len(self.want)

    def take(self) -> int | None:
        """The next record's index when it is to be parsed, else None (it is skipped)."""
        index = self.index
        self.index += 1
        if self.want is None:
            return index
        if self.k < len(self.want) and self.want[self.k] == index:
            self.k += 1
            return index
        return None

    def finish(self, what: str = "the file's last record") -> None:
        if self.want is not None and self.k < len(self.want):
            raise ValueError(f"rows: record {int(self.want[self.k])} is past {what} ({self.index:,} records)")


def _lines(path: Path, progress: bool | None, want: np.ndarray | None = None):
    """(record index, line number, parsed record, ignored field names) of each record of the
    file, in order; with ``want`` (sorted record indices) only those records are parsed."""
    size = path.stat().st_size
    show_bar = size >= LARGE_BYTES if progress is None else progress
    where = str(path)
    picker = RecordPicker(want)
    with _open(path, "r") as f, progress_bar(total=size, unit="B", unit_scale=True, desc=path.name,
                                             enabled=show_bar) as bar:
        for number, line in enumerate(f, 1):
            bar.update(len(line))
            if not line.strip():
                continue
            if picker.done:
                return
            index = picker.take()
            if index is None:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise _bad_json(line, err, number, where) from None
            yield index, number, parse_record(obj, "source", "line", number, where), obj.keys() - _FIELD_SET
    picker.finish()


def read_jsonl(path: Path, *, rows: np.ndarray | None = None, progress: bool | None = None) -> Rollouts:
    """Read a JSON Lines file of records into a validated Rollouts (RecordError on a bad line).

    ``rows``: sorted, distinct 0-based record indices (blank lines are not records; checked by
    the caller) to read only those records; the other lines are skipped without parsing.
    String group ids are then numbered within the records read."""
    path = Path(path)
    records, numbers, ignored = [], [], set()
    for _, number, rec, extra in _lines(path, progress, rows):
        records.append(rec)
        numbers.append(number)
        ignored.update(extra)
    if not records:
        raise record_error("source", "line", None, None, "empty file: no records", str(path))
    return assemble(records_to_padded(records, numbers, "source", "line", str(path), _info(path, ignored)))


def _info(path: Path, ignored: set) -> dict:
    info = {"source": str(path), "format": "jsonl"}
    if ignored:
        info["ignored_fields"] = tuple(sorted(ignored))
    return info


def iter_jsonl(path: Path, *, batch_rows: int, progress: bool | None = None) -> Iterator[Rollouts]:
    """Read a JSON Lines file as consecutive Rollouts of at most ``batch_rows`` records each.

    Errors name the line in the file. Group ids are numbered alike in every chunk
    (:class:`labkit.io.assemble.GroupNumbering`); the all-or-none fields (``text``, ``logprobs``,
    ...) are checked across chunks as well as within one: a chunk that lacks (or has) one that
    the first chunk had (or lacked) is refused at the record that differs.
    ``info['offset']``: the chunk's first record index (0-based, blank lines not counted);
    ``info['first_record']``: its line number."""
    path = Path(path)
    where = str(path)
    numbering = GroupNumbering()
    first: dict | None = None  # all-or-none field -> the first line that has it (None: absent)
    first_line = None
    records, numbers, ignored, offset = [], [], set(), 0

    def chunk():
        nonlocal first, first_line
        here = {name: next((n for r, n in zip(records, numbers) if name in r), None) for name in ALL_OR_NONE}
        if first is None:
            first, first_line = here, numbers[0]
        for name in ALL_OR_NONE:
            if first[name] is not None and here[name] is None:
                raise record_error("source", "line", numbers[0], name, f"missing, but line {first[name]} has it "
                                   f"(give {name!r} in every record or in none)", where)
            if first[name] is None and here[name] is not None:
                raise record_error("source", "line", first_line, name, f"missing, but line {here[name]} has it "
                                   f"(give {name!r} in every record or in none)", where)
        p = records_to_padded(records, numbers, "source", "line", where, _info(path, ignored))
        p.numbering = numbering
        p.info.update(offset=offset, first_record=numbers[0])
        return assemble(p)

    for index, number, rec, extra in _lines(path, progress):
        records.append(rec)
        numbers.append(number)
        ignored.update(extra)
        if len(records) == batch_rows:
            out = chunk()
            records, numbers, ignored, offset = [], [], set(), index + 1
            yield out
    if records:
        yield chunk()
    elif first is None:
        raise record_error("source", "line", None, None, "empty file: no records", where)


def write_jsonl(rollouts: Rollouts, path: Path) -> Path:
    """Write one record per line (compact JSON; see ``record.rollout_records`` for what is kept)."""
    path = Path(path)
    records = rollout_records(rollouts)
    with _open(path, "w") as f:
        for rec in records:
            f.write(json.dumps(rec, separators=(",", ":"), ensure_ascii=False, allow_nan=False))
            f.write("\n")
    return path
