"""The caches scripts write to ``data/``, stamped with where they came from and read back only while
that still holds.

A cache is one or more files plus a JSON meta file whose ``provenance`` entry records the script
that built it (``scripts/build_x.py``), the arguments it ran with (or, for a cache a script builds
piece by piece, the arguments of every piece), and the SHA-256 of every input file it read, by its
path inside the data folder (``tiny_lm/model.safetensors``). A script writes
the meta with ``write_meta``; a loader reads it with ``read_meta``, which refuses

* a missing cache (``FileNotFoundError``),
* a foreign one, built by another script than the loader expects, or carrying no stamp,
* a stale one, whose input file has changed since it was built (both ``ValueError``),

with a message that starts with the loader's argument name and ends with the exact command that
rebuilds the cache. ``read_cache`` does that for a folder and hands back the paths of the files
the cache holds beside its meta, each checked to exist.
An input file that is not in the data folder at all is not compared: the loader that needs it
fails on its own, naming it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from labkit.core.paths import data_path

__all__ = ["PROVENANCE", "file_sha256", "script_name", "rebuild_command", "cli_args", "provenance", "write_meta",
           "read_meta", "require", "read_cache"]

PROVENANCE = "provenance"  # the meta file's key for the stamp


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, hex; computed once per file version (size and mtime)."""
    stat = Path(path).stat()
    return _sha256(str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=64)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def script_name(script: str | Path) -> str:
    """``scripts/<file name>`` for a script's path (``__file__``) or name, as a stamp records it."""
    name = Path(script).name
    if not name.endswith(".py"):
        raise ValueError(f"script: expected a Python file name such as build_x.py, got {script!r}")
    return f"scripts/{name}"


def _pieces(args: Sequence) -> list[list[str]]:
    """``args`` as a list of runs: one run's arguments (strings), or several runs' (lists)."""
    args = list(args)
    if args and all(isinstance(a, (list, tuple)) for a in args):
        return [[str(x) for x in a] for a in args]
    if any(isinstance(a, (list, tuple)) for a in args):
        raise ValueError("args: expected one run's arguments (strings) or a list of runs (lists), not a mix")
    return [[str(a) for a in args]]


def rebuild_command(script: str | Path, args: Sequence = ()) -> str:
    """The shell command that runs ``script`` with ``args``: ``python scripts/build_x.py --k 9``;
    a cache built in pieces (``args`` a list of argument lists) gets one command per piece,
    joined by ``&&``, in the order they were run."""
    return " && ".join(shlex.join(["python", script_name(script), *piece]) for piece in _pieces(args))


def cli_args(namespace: argparse.Namespace, *, skip: Iterable[str] = ("out",)) -> list[str]:
    """An argparse result written back as command-line arguments, every option spelled out (so a
    stamp keeps the values even when a default changes later): ``dest`` ``truth_k`` becomes
    ``--truth-k``, a list its values, ``True`` a bare flag; ``False`` and ``None`` are left out,
    and so are the ``skip`` options (``out``: where the cache is written is where it is read)."""
    args: list[str] = []
    skip = set(skip)
    for dest, value in vars(namespace).items():
        flag = "--" + dest.replace("_", "-")
        if dest in skip or value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, *map(str, value)]
        else:
            args += [flag, str(value)]
    return args


def provenance(script: str | Path, args: Sequence = (), inputs: Iterable[str] = ()) -> dict:
    """The stamp: ``{"script", "args", "inputs"}``, ``args`` one run's arguments or a list of the
    pieces' (see ``rebuild_command``), ``inputs`` mapping each input file's path inside the data
    folder to its SHA-256 now (a ValueError naming ``inputs`` if one is missing)."""
    hashes = {}
    for rel in inputs:
        path = data_path(*Path(rel).parts)
        if not path.is_file():
            raise ValueError(f"inputs: {rel} is not a file in the data folder ({path})")
        hashes[str(rel)] = file_sha256(path)
    pieces = _pieces(args)
    return {"script": script_name(script), "args": pieces if len(pieces) > 1 else pieces[0], "inputs": hashes}


def write_meta(path: Path, meta: dict, *, script: str | Path, args: Sequence = (), inputs: Iterable[str] = (),
               **dump) -> Path:
    """Write ``meta`` as JSON to ``path`` with the stamp of ``script`` run with ``args`` on
    ``inputs`` (see ``provenance``) under ``"provenance"``; ``dump`` goes to ``json.dumps``
    (indent, sort_keys, default). Returns the path."""
    path = Path(path)
    body = {k: v for k, v in meta.items() if k != PROVENANCE}
    body[PROVENANCE] = provenance(script, args, inputs)
    path.write_text(json.dumps(body, **dump) + "\n")
    return path


def read_meta(path: Path, *, script: str | Path, args: Sequence = (), argument: str = "path",
              what: str = "cache") -> dict:
    """The meta file at ``path`` (a dict, stamp included) once it is known to be ``script``'s and
    current. ``args`` are the arguments that build the cache the loader expects, for the command
    a missing or foreign cache's error gives; a stale cache's error gives the command it was
    built with. Errors start with ``argument`` (the loader's argument that chose the folder)."""
    path, expected = Path(path), script_name(script)
    if not path.is_file():
        raise FileNotFoundError(f"{argument}: no {what} at {path}; build it with: {rebuild_command(script, args)}")
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{argument}: {path} is not JSON ({err.msg}); rebuild it with: "
                         f"{rebuild_command(script, args)}") from None
    stamp = meta.get(PROVENANCE) if isinstance(meta, dict) else None
    if not isinstance(stamp, dict) or "script" not in stamp:
        raise ValueError(f"{argument}: {path} carries no provenance stamp, so nothing says what built it; "
                         f"rebuild it with: {rebuild_command(script, args)}")
    if stamp["script"] != expected:
        raise ValueError(f"{argument}: {path} was built by {stamp['script']}, not by {expected}; "
                         f"rebuild it with: {rebuild_command(script, args)}")
    for rel, digest in stamp.get("inputs", {}).items():
        source = data_path(*Path(rel).parts)
        if source.is_file() and file_sha256(source) != digest:
            raise ValueError(f"{argument}: {path} is stale: {rel} has changed since {expected} built it; "
                             f"rebuild it with: {rebuild_command(stamp['script'], stamp.get('args', []))}")
    return meta


def require(path: Path, *, script: str | Path, args: Sequence = (), argument: str = "path",
            what: str = "cache file") -> Path:
    """``path`` if it is a file; otherwise a FileNotFoundError naming ``argument`` and the command
    that builds it (for the files a cache holds beside its meta)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{argument}: no {what} at {path}; build it with: {rebuild_command(script, args)}")
    return path


def read_cache(folder: Path, *, script: str | Path, meta: str = "meta.json", files: Iterable[str] = (),
               args: Sequence = (), argument: str = "path", what: str = "cache") -> tuple[dict, dict[str, Path]]:
    """``(meta, paths)`` of the cache ``script`` writes to ``folder``: the meta file ``meta``
    checked by ``read_meta``, and ``{name: path}`` for each of ``files`` (checked by ``require``).
    ``args``, ``argument`` and ``what`` shape the errors as in ``read_meta``."""
    folder = Path(folder)
    found = read_meta(folder / meta, script=script, args=args, argument=argument, what=what)
    return found, {name: require(folder / name, script=script, args=args, argument=argument, what=what)
                   for name in files}
