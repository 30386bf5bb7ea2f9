"""The reporting checklist: what a credit-assignment experiment should report.

A paraphrase of the survey's Appendix C, shown in notebook 00. The items are data, kept in
``data/inventory/checklist.csv`` (key, category, priority, item) and validated on load.
"""
from __future__ import annotations

import csv
from pathlib import Path
from typing import NamedTuple

from labkit.core.paths import data_path, require_data

__all__ = ["CHECKLIST_CSV", "ChecklistItem", "REPORTING_CHECKLIST", "load_checklist"]

CHECKLIST_CSV = data_path("inventory", "checklist.csv")
PRIORITIES = ("required", "recommended")


class ChecklistItem(NamedTuple):
    """One thing a credit-assignment experiment should report."""
    key: str
    category: str
    priority: str   # "required" or "recommended"
    item: str


def load_checklist(path: str | Path | None = None) -> tuple[ChecklistItem, ...]:
    """The checklist from ``path`` (default ``data/inventory/checklist.csv``), checked: the
    four columns, unique keys, a known priority and no empty cell, each error naming its row."""
    path = require_data(Path(path) if path is not None else CHECKLIST_CSV, "the reporting checklist", "path")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != list(ChecklistItem._fields):
            raise ValueError(f"path: {path} must have the columns {list(ChecklistItem._fields)}, "
                             f"got {reader.fieldnames}")
        items = tuple(ChecklistItem(**row) for row in reader)
    seen: set[str] = set()
    for n, it in enumerate(items, start=2):       # row 1 is the header
        if not all(it):
            raise ValueError(f"{path.name} row {n}: empty cell in {it}")
        if it.priority not in PRIORITIES:
            raise ValueError(f"{path.name} row {n}: priority must be one of {PRIORITIES}, got {it.priority!r}")
        if it.key in seen:
            raise ValueError(f"{path.name} row {n}: duplicate key {it.key!r}")
        seen.add(it.key)
    return items


REPORTING_CHECKLIST: tuple[ChecklistItem, ...] = load_checklist()
