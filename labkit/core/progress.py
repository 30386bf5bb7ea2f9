"""Whether a progress bar shows: the one helper every slow loop of labkit draws its bar from.

A bar helps while a cell or a script runs. A notebook's stored outputs are read without a
kernel, where a finished bar is noise, so the run that stores them (``scripts/execute_notebooks.py``)
sets ``LABKIT_PROGRESS=0``, and every bar that goes through :func:`progress_bar` is then hidden.
"""
from __future__ import annotations

import os
from typing import Iterable

from tqdm.auto import tqdm

from labkit.core.checks import check_bool

__all__ = ["PROGRESS_ENV", "progress_bar", "progress_shown"]

#: the environment variable that hides every bar when it reads "0", "off" or "false"
PROGRESS_ENV = "LABKIT_PROGRESS"
_OFF = ("0", "off", "false")


def progress_shown(enabled: bool = True) -> bool:
    """Whether a bar the caller wants (``enabled``) shows: not where ``LABKIT_PROGRESS`` is "0",
    "off" or "false" (any case, spaces ignored)."""
    enabled = check_bool("enabled", enabled)
    return enabled and os.environ.get(PROGRESS_ENV, "").strip().lower() not in _OFF


def progress_bar(iterable: Iterable | None = None, *, desc: str, enabled: bool = True, **kw) -> tqdm:
    """A tqdm bar (``tqdm.auto``: a widget in Jupyter, text in a terminal) over ``iterable``, or
    updated by hand with ``total=``, labelled ``desc``; disabled (it still iterates, silently)
    unless :func:`progress_shown` says so. ``kw`` goes to tqdm (``total``, ``unit``, ``leave``,
    ...), except ``disable``: whether a bar shows is decided here, and only here."""
    if not isinstance(desc, str):
        raise TypeError(f"desc: expected a str, got {type(desc).__name__}")
    if "disable" in kw:
        raise TypeError("disable: pass enabled=... instead (progress_bar decides whether a bar shows)")
    return tqdm(iterable, desc=desc, disable=not progress_shown(enabled), **kw)
