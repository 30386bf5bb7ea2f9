"""verl's rollout dump: the JSON Lines ``RayPPOTrainer`` writes with ``trainer.rollout_data_dir``.

One file per training step, ``<rollout_data_dir>/<step>.jsonl``, one line per trajectory:
``input`` (the prompt, decoded without special tokens), ``output`` (the response, likewise),
``gts`` (the ground truth, if the data has one), ``score`` (the sum of the token-level scores),
``step``, and whatever the reward function returned beside its score (``reward_extra_info``,
e.g. ``acc``). No token ids and no ``uid``: rows are grouped by (step, input) (the same prompt
text twice in one step's batch counts as one group), the text is cut into positions by
``labkit.io.text_positions``, the reward is ``score`` (or ``reward=``: any numeric column, or
several, summed), and the numeric extras are kept in ``info['reward_parts']``
(``labkit.io.text_rows``). Lines are numbered **from 1**, blank lines included, per file.

``read_verl_dump`` reads one file or the folder (files in step order).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from labkit.core.rollouts import Rollouts
from labkit.io.errors import record_error
from labkit.io.text_rows import TextRows, numeric_columns, read_text_rows

__all__ = ["read_verl_dump", "dump_files", "looks_like_verl_dump", "DUMP_KEYS"]

#: The keys every line of verl's rollout dump has.
DUMP_KEYS = ("input", "output", "score", "step")
_NOT_REWARDS = {"input", "output", "gts", "step", "score", "request_id"}


def looks_like_verl_dump(names) -> bool:
    """Keys of a line of verl's rollout dump (``input``, ``output`` and ``score``)."""
    return {"input", "output", "score"} <= set(names)


def _step_key(path: Path) -> tuple:
    return (0, int(path.stem)) if path.stem.isdigit() else (1, path.name)


def dump_files(path: Path) -> list[Path]:
    """The dump's files: ``path`` itself, or a folder's ``*.jsonl`` in step order ([] if none)."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(path.glob("*.jsonl"), key=_step_key) if path.is_dir() else []


def read_verl_dump(path: Path, *, tokenizer: Any = None, reward: str | Sequence[str] | None = None,
                   progress: bool | None = None) -> Rollouts:
    """verl's rollout dump (a file or its folder) -> validated Rollouts (RecordError naming the
    file, the line and the field)."""
    files = dump_files(path)
    if not files:
        raise FileNotFoundError(f"source: no rollout dump (<step>.jsonl files) in {path}")
    lines: list[dict] = []
    numbers: list[int] = []
    wheres: list[str] = []
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as err:
                    raise record_error("source", "line", number, None, f"not valid JSON at character {err.pos + 1}: "
                                       f"{err.msg}", str(f)) from None
                if not isinstance(obj, dict):
                    raise record_error("source", "line", number, None,
                                       f"expected a JSON object (one trajectory), got {type(obj).__name__}", str(f))
                for key in ("input", "output", "score"):
                    if key not in obj:
                        raise record_error("source", "line", number, key,
                                           "missing (verl's rollout dump has input, output, score and step)", str(f))
                lines.append(obj)
                numbers.append(number)
                wheres.append(str(f))
    if not lines:
        raise record_error("source", "line", None, None, "no records (empty files)", str(path))
    names = list(dict.fromkeys(k for obj in lines for k in obj))
    cols = {k: [obj.get(k) for obj in lines] for k in names}
    extras = numeric_columns(cols, _NOT_REWARDS)
    rows = TextRows(source=str(path), format="verl", unit="line", columns=cols, numbers=numbers, wheres=wheres,
                    prompt="input", completion="output", step="step", reward="score", reward_columns=extras)
    return read_text_rows(rows, tokenizer=tokenizer, reward=reward, progress=progress)
