"""The one error every reader raises for bad input: which record, which field, what is wrong."""
from __future__ import annotations

__all__ = ["RecordError"]


class RecordError(ValueError):
    """A record of an input that cannot be loaded: nothing of the batch is returned.

    ``record`` is the record's number as the format counts it: the **1-based line number** for
    JSONL (blank lines count, so it is what an editor shows), the **0-based row** for Parquet,
    verl batches and TRL lists; ``None`` for a fault of the whole input (an empty file, a column
    of the wrong type in every row is reported at its first row). ``field`` is the record field
    at fault (``None`` when the record is not even a JSON object). The message starts with the
    reader's argument name and says which numbering it uses, e.g.
    ``source: line 17, field 'reward': expected a number, got 'abc'``.
    """

    def __init__(self, message: str, *, record: int | None = None, field: str | None = None,
                 unit: str | None = None) -> None:
        super().__init__(message)
        self.record = record
        self.field = field
        self.unit = unit


def record_error(argument: str, unit: str, record: int | None, field: str | None, detail: str,
                 where: str | None = None) -> RecordError:
    """Build a RecordError whose message reads ``argument: line 17, field 'x': detail (in where)``."""
    parts = []
    if record is not None:
        parts.append(f"{unit} {record}")
    if field is not None:
        parts.append(f"field {field!r}")
    head = ", ".join(parts)
    tail = f" (in {where})" if where else ""
    message = f"{argument}: {head + ': ' if head else ''}{detail}{tail}"
    return RecordError(message, record=record, field=field, unit=unit)


def show(value, limit: int = 40) -> str:
    """A short repr of a bad value for a message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
