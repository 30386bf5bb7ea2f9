"""Parquet: the record format as columns, one row per trajectory (``.parquet``).

Per-position fields are list columns, per-record fields plain columns, with the record format's
names. Rows are numbered **from 0**. The reader converts column by column, list arrays straight
to numpy (no Python loop over rows), and holds one column's Arrow buffers at a time; a null list
means "not given for this record" (the field's default, or an error for a field that has none).

Streaming (:func:`iter_parquet`) converts the same way one Arrow record batch at a time, read
without pre-buffering whole row groups, so a chunk's memory follows ``batch_rows``, not the row
group's size; reading selected rows (``rows=``) decodes only the row groups that hold one. The
writer writes row groups of :data:`ROW_GROUP_ROWS` rows so that a sample decodes little else.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.core.segments import default_labels
from labkit.io.assemble import GroupNumbering, Padded, assemble, pad_flat
from labkit.io.errors import record_error
from labkit.io.record import ALL_OR_NONE, FIELDS, LOWEST, PER_POSITION, REQUIRED, record_lengths
from labkit.io.text_positions import position_texts

__all__ = ["read_parquet", "iter_parquet", "write_parquet", "LARGE_ROWS", "ROW_GROUP_ROWS"]

#: Files with at least this many rows get a progress bar when ``progress=None``.
LARGE_ROWS = 50_000
#: Rows per row group written by :func:`write_parquet`: small enough that reading a sample of
#: rows (``read_rollouts(rows=...)``) decodes little beyond it, large enough to compress well.
ROW_GROUP_ROWS = 16_384
#: Rows decoded at once when reading selected rows (``rows=``); bytes read at once when streaming.
STREAM_ROWS = 8192
STREAM_BUFFER = 1 << 20
NAMES = {"tokens": "tokens", "mask": "generated", "rewards": "rewards", "group_ids": "group_id", "prompts": "prompt",
         **{n: n for n in ("step_ids", "turn_ids", "agent_ids", "logprobs", "entropies", "states", "anchor_keys", "text")}}


class _Reader:
    """One file's columns, checked and converted; errors name the row and the column.

    Whole-file mode reads one column at a time from the file. Chunk mode (``table`` set, by
    :func:`iter_parquet` and by ``rows=``) converts the columns of an Arrow table holding some
    of the file's rows; ``numbers[i]`` is then the file row of the table's row i, so every
    error names the row in the file, not in the chunk.
    """

    def __init__(self, path: Path, stream: bool = False):
        import pyarrow.parquet as pq

        self.where = str(path)
        try:
            # streaming: no pre-buffering, so a reader holds a page's bytes, not a row group's
            kw = dict(pre_buffer=False, buffer_size=STREAM_BUFFER) if stream else {}
            self.file = pq.ParquetFile(path, **kw)
        except Exception as err:  # pyarrow raises its own ArrowInvalid for a file that is not Parquet
            raise record_error("source", "row", None, None, f"not a readable Parquet file ({err})", self.where) from None
        self.n = self.file.metadata.num_rows
        self.total = self.n
        self.columns = set(self.file.schema_arrow.names)
        self.table = None
        self.numbers: np.ndarray | None = None

    def check(self) -> list[str]:
        """Refuse an empty file or a missing required column; the record fields present."""
        if self.total == 0:
            raise self.error(None, None, "empty file: no rows")
        for name in REQUIRED:
            if name not in self.columns:
                raise record_error("source", "row", 0, name, "missing (a required column)", self.where)
        return [n for n in FIELDS if n in self.columns]

    def use(self, table, numbers: np.ndarray) -> None:
        """Convert ``table`` (some of the file's rows; ``numbers``: their rows in the file) next."""
        self.table, self.numbers, self.n = table, numbers, table.num_rows

    def error(self, row, name, detail):
        if row is not None and self.numbers is not None:
            row = int(self.numbers[row])
        return record_error("source", "row", row, name, detail, self.where)

    def read(self, name: str):
        import pyarrow as pa

        if self.table is not None:
            col = self.table.column(name)
        else:
            # Arrow's allocator keeps freed buffers for reuse: hand the previous column's back to
            # the system first, so the peak holds one column's Arrow buffers, not all of them
            pa.default_memory_pool().release_unused()
            col = self.file.read(columns=[name]).column(0)
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        return col

    def nulls(self, col) -> np.ndarray:
        return col.is_null().to_numpy(zero_copy_only=False)

    def list_column(self, name: str):
        """(flat values, lengths (n,), given (n,)) of a list column; element type checked."""
        import pyarrow as pa
        import pyarrow.compute as pc

        col = self.read(name)
        kind = PER_POSITION[name]
        given = ~self.nulls(col)
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type) or pa.types.is_fixed_size_list(col.type)):
            raise self.error(int(given.argmax()) if given.any() else 0, name,
                             f"expected a list per row, the column's type is {col.type}")
        vt = col.type.value_type
        ok = {"int": pa.types.is_integer(vt), "num": pa.types.is_integer(vt) or pa.types.is_floating(vt),
              "str": pa.types.is_string(vt) or pa.types.is_large_string(vt),
              "01": pa.types.is_boolean(vt) or pa.types.is_integer(vt)}[kind]
        if not ok:
            want = {"int": "integers", "num": "numbers", "str": "strings", "01": "booleans or 0/1"}[kind]
            raise self.error(int(given.argmax()) if given.any() else 0, name, f"expected a list of {want}, got {col.type}")
        lengths = pc.list_value_length(col).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        values = col.flatten()
        if values.null_count:
            i = int(np.argmax(values.is_null().to_numpy(zero_copy_only=False)))
            row, pos = self.locate(i, lengths)
            raise self.error(row, name, f"null at position {pos} (every position needs a value)")
        if kind == "str":
            return values, lengths, given
        flat = values.to_numpy(zero_copy_only=False)
        if kind == "01":
            bad = (flat != 0) & (flat != 1)
            if bad.any():
                row, pos = self.locate(int(bad.argmax()), lengths)
                raise self.error(row, name, f"expected 0/1 per position, got {flat[bad.argmax()]} at position {pos}")
            flat = flat.astype(bool)
        elif flat.dtype.kind == "f":
            bad = ~np.isfinite(flat)
            if bad.any():
                row, pos = self.locate(int(bad.argmax()), lengths)
                raise self.error(row, name, f"must be finite, got {flat[bad.argmax()]} at position {pos}")
        elif name in LOWEST and flat.size and int(flat.min()) < LOWEST[name]:
            i = int((flat < LOWEST[name]).argmax())
            row, pos = self.locate(i, lengths)
            raise self.error(row, name, f"must be >= {LOWEST[name]}, got {int(flat[i])} at position {pos}")
        return flat, lengths, given

    @staticmethod
    def locate(i: int, lengths: np.ndarray) -> tuple[int, int]:
        """Row and position of the i-th value of a flattened list column."""
        ends = np.cumsum(lengths)
        row = int(np.searchsorted(ends, i, side="right"))
        return row, i - int(ends[row] - lengths[row])


def read_parquet(path: Path, *, rows: np.ndarray | None = None, progress: bool | None = None) -> Rollouts:
    """Read a Parquet file of records into a validated Rollouts (RecordError on a bad row).

    ``rows``: sorted, distinct 0-based row indices (checked by the caller) to read only those
    rows: only the row groups that hold one are decoded, a batch at a time, and only the wanted
    rows are kept; errors still name the row in the file."""
    import pyarrow as pa

    if rows is None:
        r = _Reader(Path(path))
        present = r.check()
        show_bar = r.n >= LARGE_ROWS if progress is None else progress
        with progress_bar(present, desc=Path(path).name, unit="column", enabled=show_bar) as bar:
            p = _padded(r, present, bar.update)
        pa.default_memory_pool().release_unused()
        return assemble(p)
    r = _Reader(Path(path), stream=True)
    present = r.check()
    if rows.size and int(rows[-1]) >= r.total:
        raise ValueError(f"rows: row {int(rows[-1])} is past the file's last row ({r.total:,} rows)")
    starts = np.concatenate([[0], np.cumsum([r.file.metadata.row_group(i).num_rows
                                             for i in range(r.file.metadata.num_row_groups)])])
    parts = []
    show_bar = len(rows) >= LARGE_ROWS if progress is None else progress
    with progress_bar(total=len(rows), desc=Path(path).name, unit="row", enabled=show_bar) as bar:
        for g in np.unique(np.searchsorted(starts, rows, side="right") - 1).tolist():
            offset = int(starts[g])
            for batch in r.file.iter_batches(batch_size=STREAM_ROWS, row_groups=[g], columns=present):
                lo, hi = np.searchsorted(rows, [offset, offset + batch.num_rows])
                if hi > lo:
                    parts.append(batch.take(pa.array(rows[lo:hi] - offset)))
                    bar.update(int(hi - lo))
                offset += batch.num_rows
    r.use(pa.Table.from_batches(parts), np.asarray(rows, dtype=np.int64))
    return assemble(_padded(r, present))


def iter_parquet(path: Path, *, batch_rows: int, progress: bool | None = None) -> Iterator[Rollouts]:
    """Read a Parquet file as consecutive Rollouts of at most ``batch_rows`` rows each (Arrow
    record batches of the file's row groups, decoded as they are needed). Group ids are numbered
    alike in every chunk (:class:`labkit.io.assemble.GroupNumbering`); ``info['offset']`` and
    ``info['first_record']`` are the chunk's first row in the file."""
    import pyarrow as pa

    r = _Reader(Path(path), stream=True)
    present = r.check()
    numbering = GroupNumbering()
    show_bar = r.total >= LARGE_ROWS if progress is None else progress
    offset = 0
    with progress_bar(total=r.total, desc=Path(path).name, unit="row", enabled=show_bar) as bar:
        for batch in r.file.iter_batches(batch_size=batch_rows, columns=present):
            n = batch.num_rows
            r.use(pa.Table.from_batches([batch]), np.arange(offset, offset + n))
            del batch
            p = _padded(r, present)
            p.numbering = numbering
            p.info.update(offset=offset, first_record=offset)
            r.table = None
            pa.default_memory_pool().release_unused()  # the decoded batch goes back, not into a cache
            chunk = assemble(p)
            del p
            yield chunk
            offset += n
            bar.update(n)


def _padded(r: _Reader, present: list[str], tick=lambda: None) -> Padded:
    """The reader's rows (the whole file, or its current table) as a checked ``Padded`` batch."""
    import pyarrow as pa

    flat, lengths, given = r.list_column("tokens")
    tick()
    if not given.all():
        raise r.error(int((~given).argmax()), "tokens", "missing (null; a required field)")
    T = int(lengths.max())
    valid = np.arange(T)[None, :] < lengths[:, None]
    tokens = pad_flat(flat, valid, 0, np.int64)
    del flat

    reward = r.read("reward")
    nulls = r.nulls(reward)
    if nulls.any():
        raise r.error(int(nulls.argmax()), "reward", "missing (null; a required field)")
    if not (pa.types.is_integer(reward.type) or pa.types.is_floating(reward.type)):
        raise r.error(0, "reward", f"expected a number, the column's type is {reward.type}")
    reward = reward.to_numpy(zero_copy_only=False)
    reward_dtype = np.float32 if reward.dtype == np.float32 else np.float64
    reward = reward.astype(np.float64)
    if not np.isfinite(reward).all():
        row = int((~np.isfinite(reward)).argmax())
        raise r.error(row, "reward", f"must be finite, got {reward[row]}")
    tick()

    group = r.read("group_id")
    nulls = r.nulls(group)
    if nulls.any():
        raise r.error(int(nulls.argmax()), "group_id", "missing (null; a required field)")
    if pa.types.is_integer(group.type):
        group = group.to_numpy(zero_copy_only=False)
        if group.size and int(group.min()) < 0:
            row = int((group < 0).argmax())
            raise r.error(row, "group_id", f"expected a non-negative integer or a string, got {int(group[row])}")
    elif pa.types.is_string(group.type) or pa.types.is_large_string(group.type):
        group = group.to_pylist()
    else:
        raise r.error(0, "group_id", f"expected integers or strings, the column's type is {group.type}")
    tick()

    ignored = sorted(r.columns - set(FIELDS))
    info = {"source": r.where, "format": "parquet"}
    if ignored:
        info["ignored_fields"] = tuple(ignored)
    numbers = np.arange(r.n) if r.numbers is None else r.numbers
    p = Padded(argument="source", unit="row", numbers=numbers, names=NAMES, where=r.where, tokens=tokens,
               valid=valid, group=group, reward=reward, reward_dtype=reward_dtype, info=info)
    for name in present:
        if name in REQUIRED:
            continue
        if name == "prompt":
            col = r.read(name)
            if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_null(col.type)):
                raise r.error(0, name, f"expected a string, the column's type is {col.type}")
            p.prompts = col.to_pylist()
        elif name == "anchor_keys":
            p.anchor_keys = _anchor_keys(r)
        else:
            _position_field(r, p, name, lengths, valid)
        tick()
    return p


def _anchor_keys(r: _Reader) -> list:
    import pyarrow as pa

    col = r.read("anchor_keys")
    given = ~r.nulls(col)
    if not given.all():
        raise r.error(int((~given).argmax()), "anchor_keys",
                      "missing (null), but other rows have it (give 'anchor_keys' in every row or in none)")
    vt = getattr(col.type, "value_type", None)
    if vt is None or not (pa.types.is_integer(vt) or pa.types.is_string(vt) or pa.types.is_large_string(vt)):
        raise r.error(0, "anchor_keys", f"expected a list of strings or integers per row, the column's type is {col.type}")
    return col.to_pylist()


def _position_field(r: _Reader, p: Padded, name: str, lengths: np.ndarray, valid: np.ndarray) -> None:
    values, n, given = r.list_column(name)
    bad = given & (n != lengths)
    if bad.any():
        row = int(bad.argmax())
        raise r.error(row, name, f"has {int(n[row])} entries but 'tokens' has {int(lengths[row])} (one per position)")
    if name in ALL_OR_NONE and not given.all():
        raise r.error(int((~given).argmax()), name,
                      f"missing (null), but other rows have it (give {name!r} in every row or in none)")
    if name == "text":
        p.text = _split(values.to_pylist(), n)
        return
    where = valid & given[:, None]
    if name == "generated":
        p.generated = (pad_flat(values, where, False, bool), given)
    elif name == "rewards":
        p.rewards = (pad_flat(values, where, 0.0, np.float64), given)
        if values.dtype != np.float32:
            p.reward_dtype = np.float64
    elif name in ("step_ids", "turn_ids", "agent_ids"):
        p.labels[name] = (pad_flat(values, where, -1, np.int64), given)
    elif name == "states":
        p.states = pad_flat(values, where, 0, np.int64)
    else:  # logprobs, entropies: keep float32 as float32
        dtype = np.float32 if values.dtype == np.float32 else np.float64
        setattr(p, name, pad_flat(values, where, 0.0, dtype))


def _split(flat: list, lengths: np.ndarray) -> list[list]:
    out, i = [], 0
    for n in lengths.tolist():
        out.append(flat[i:i + n])
        i += n
    return out


def write_parquet(rollouts: Rollouts, path: Path) -> Path:
    """Write one row per trajectory (zstd-compressed); the record format's columns, list columns
    for per-position fields, only the optional columns that carry something."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ro = check_rollouts(rollouts)
    lengths, last = record_lengths(ro)
    B, T = ro.tokens.shape
    valid = torch.from_numpy(np.arange(T)[None, :] < lengths[:, None])
    total = int(lengths.sum())
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    large = total >= 2 ** 31 - 1
    offsets = pa.array(offsets, type=pa.int64() if large else pa.int32())
    make = pa.LargeListArray if large else pa.ListArray

    def listed(values: torch.Tensor, kind=None) -> "pa.Array":
        flat = values[valid].numpy()
        if kind == "int" and flat.size and int(np.abs(flat).max()) < 2 ** 31:
            flat = flat.astype(np.int32)  # half the bytes; the reader widens to int64
        return make.from_arrays(offsets, pa.array(flat))

    rows = np.arange(B)
    has = lengths > 0
    rewards = ro.rewards.detach().clone()
    outcome = torch.zeros(B, dtype=rewards.dtype)
    outcome[has] = rewards[rows[has], last[has]]
    rewards[rows[has], last[has]] = 0
    cols: dict[str, "pa.Array"] = {}
    groups = ro.group_ids.numpy()
    names = ro.info.get("group_names")
    if isinstance(names, tuple) and len(names) > int(groups.max()):
        kinds = {type(x) for x in names}
        names = [str(x) for x in names] if kinds != {int} else list(names)
        cols["group_id"] = pa.array([names[g] for g in groups.tolist()])
    else:
        cols["group_id"] = pa.array(groups)
    if ro.prompts is not None:
        cols["prompt"] = pa.array(ro.prompts, type=pa.string())
    cols["tokens"] = listed(ro.tokens, "int")
    cols["reward"] = pa.array((outcome + 0.0).numpy())
    if bool((~ro.mask & valid).any()):
        cols["generated"] = listed(ro.mask)
    if bool((rewards != 0).any()):
        cols["rewards"] = listed(rewards + 0.0)
    for name, default in default_labels(ro.mask).items():
        if bool((getattr(ro, name) != default).any()):
            cols[name] = listed(getattr(ro, name), "int")
    for name in ("logprobs", "entropies"):
        if getattr(ro, name) is not None:
            cols[name] = listed(getattr(ro, name).detach())
    if ro.states is not None:
        cols["states"] = listed(ro.states, "int")
    if ro.anchor_keys is not None:
        kinds = {type(k) for row in ro.anchor_keys for k in row}
        if not kinds <= {str, int} or kinds == {str, int}:
            raise TypeError(f"rollouts: anchor_keys must be all strings or all integers to be written as Parquet, "
                            f"got {sorted(k.__name__ for k in kinds)}")
        cols["anchor_keys"] = pa.array(ro.anchor_keys, type=pa.list_(pa.int64() if kinds == {int} else pa.string()))
    text = position_texts(ro)
    if text is not None:
        cols["text"] = make.from_arrays(offsets, pa.array([s for row, n in zip(text, lengths.tolist())
                                                           for s in row[:n]], type=pa.string()))
    table = pa.table(cols).replace_schema_metadata({"labkit.record_format": "1"})
    path = Path(path)
    pq.write_table(table, path, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    return path
