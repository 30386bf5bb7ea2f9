"""``read_rollouts`` / ``write_rollouts``: pick the format, check the arguments, hand over."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from labkit.core.checks import check_bool, check_choice
from labkit.core.rollouts import Rollouts, check_rollouts

__all__ = ["FORMATS", "FILE_FORMATS", "read_rollouts", "write_rollouts", "format_of"]

FORMATS = ("jsonl", "parquet", "verl", "trl")
FILE_FORMATS = ("jsonl", "parquet")
SUFFIXES = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def _is_path(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike))


def format_of(source: Any, fmt: str | None = None, argument: str = "source") -> str:
    """The format of ``source``: ``fmt`` when given; else from a path's suffix (``.jsonl``,
    ``.json``, ``.ndjson`` -> jsonl; ``.parquet``, ``.pq`` -> parquet; a trailing ``.gz`` is
    looked through), or from an in-memory object's shape (verl: ``responses``; TRL:
    ``completion``)."""
    if fmt is not None:
        return check_choice("fmt", fmt, FORMATS)
    if _is_path(source):
        path = Path(source)
        suffixes = path.suffixes[-2:] if path.suffix == ".gz" else path.suffixes[-1:]
        found = SUFFIXES.get(suffixes[0].lower()) if suffixes else None
        if found is None:
            raise ValueError(f"{argument}: cannot tell the format of {path.name!r} from its suffix; name it "
                             f".jsonl or .parquet, or pass fmt= one of {FILE_FORMATS}")
        return found
    keys = None
    if hasattr(source, "batch") and hasattr(source, "non_tensor_batch"):
        return "verl"
    if hasattr(source, "keys"):
        keys = set(source.keys())
    elif isinstance(source, (list, tuple)) and source and isinstance(source[0], dict):
        keys = set(source[0])
    if keys is not None and "responses" in keys:
        return "verl"
    if keys is not None and "completion" in keys:
        return "trl"
    raise ValueError(f"{argument}: expected a path (.jsonl / .parquet), a verl batch (a dict with 'responses') or "
                     f"TRL rows (with 'completion'), got {type(source).__name__}; pass fmt= to say which")


def read_rollouts(source: Any, fmt: str | None = None, *, progress: bool | None = None) -> Rollouts:
    """Read trajectories into a validated ``Rollouts``: a file in the record format or a batch
    in a training engine's shape.

    ``source`` is a path (``.jsonl`` JSON Lines or ``.parquet``; ``fmt`` then defaults from the
    suffix) or an in-memory object with ``fmt="verl"`` (a dict / TensorDict / DataProto of
    tensors: ``responses``, ``response_mask``, ``token_level_scores`` or ``token_level_rewards``,
    ``uid``) or ``fmt="trl"`` (dict of lists or list of dicts: ``prompt``, ``completion``,
    ``reward``, optional ``completion_ids``); see ``labkit.io`` for each shape. ``progress``:
    a tqdm bar; ``None`` shows one for large inputs only. A bad record raises ``RecordError``
    with its number and field; nothing is returned half-read. ``info`` of the result says where
    it came from (``source``, ``format``), which fields were ignored (``ignored_fields``) and the
    original group ids when they were not non-negative integers (``group_names``).
    """
    fmt = format_of(source, fmt)
    if progress is not None:
        progress = check_bool("progress", progress)
    if fmt in FILE_FORMATS:
        if not _is_path(source):
            raise TypeError(f"source: fmt={fmt!r} reads a file; expected a path, got {type(source).__name__}")
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"source: no such file {path}")
        if fmt == "jsonl":
            from labkit.io.jsonl import read_jsonl
            return read_jsonl(path, progress=progress)
        from labkit.io.parquet import read_parquet
        return read_parquet(path, progress=progress)
    if _is_path(source):
        raise TypeError(f"source: fmt={fmt!r} reads an in-memory batch, got a path; write it as .jsonl or "
                        f".parquet, or load it first")
    if fmt == "verl":
        from labkit.io.verl import read_verl
        return read_verl(source)
    from labkit.io.trl import read_trl
    return read_trl(source, progress=progress)


def write_rollouts(rollouts: Rollouts, path: str | os.PathLike, fmt: str | None = None) -> Path:
    """Write ``rollouts`` to ``path`` in the record format, as JSON Lines or Parquet (``fmt``,
    default from the suffix); returns the path. ``read_rollouts`` gives the same trajectories
    back (``labkit.io`` says what is stored: every Rollouts field but ``truth`` and ``info``;
    padding after a trajectory's last generated position is not)."""
    check_rollouts(rollouts)
    if not _is_path(path):
        raise TypeError(f"path: expected a file path, got {type(path).__name__}")
    fmt = format_of(path, fmt, argument="path")
    if fmt not in FILE_FORMATS:
        raise ValueError(f"fmt: write_rollouts writes files ({FILE_FORMATS}); for {fmt!r} use "
                         f"to_verl_batch / to_trl")
    path = Path(path)
    if fmt == "jsonl":
        from labkit.io.jsonl import write_jsonl
        return write_jsonl(rollouts, path)
    from labkit.io.parquet import write_parquet
    return write_parquet(rollouts, path)
