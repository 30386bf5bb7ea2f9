"""Where labkit finds its data: the tiny LM, the truth caches, the inventory, the stored bands.

The data lives in the repository's ``data/`` folder (next to ``labkit/``). One rule, here, says
where an installed copy looks for it, in this order:

1. ``LABKIT_DATA``, when that environment variable is set: a folder laid out like ``data/``
   (for an install that keeps the data somewhere else, e.g. a shared course folder);
2. ``labkit/_data`` inside the installed package: a wheel built from the repository
   (``pip install .``, ``pip install git+<repo URL>``) carries ``data/`` there (``setup.py``);
3. ``data/`` next to the ``labkit`` package: a clone, or an editable install (``pip install -e .``).

:func:`data_dir` never raises, so module constants such as ``inventory.DATA_DIR`` can be set at
import; :func:`require_data` is what a loader calls before it reads, and its error says where it
looked and what to do.
"""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DATA_ENV", "PACKAGE_DATA", "CHECKOUT_DATA", "data_dir", "data_path", "require_data"]

DATA_ENV = "LABKIT_DATA"
PACKAGE_DATA = Path(__file__).resolve().parents[1] / "_data"   # labkit/_data (a wheel)
CHECKOUT_DATA = Path(__file__).resolve().parents[2] / "data"    # <repo>/data (a clone)


def _candidates() -> list[tuple[str, Path]]:
    found = []
    if os.environ.get(DATA_ENV):
        found.append((f"${DATA_ENV}", Path(os.environ[DATA_ENV]).expanduser()))
    found += [("the installed package", PACKAGE_DATA), ("the repository clone", CHECKOUT_DATA)]
    return found


def data_dir() -> Path:
    """The data folder in use: the first of ``$LABKIT_DATA``, ``labkit/_data``, ``<repo>/data``.

    ``LABKIT_DATA``, when set, is used even if it does not exist (so a typo is reported by
    :func:`require_data` instead of silently falling back). Without it, the first folder that
    exists wins; when neither does, the clone location is returned so that paths built from it
    name where the data was expected."""
    candidates = _candidates()
    if os.environ.get(DATA_ENV):
        return candidates[0][1]
    for _, folder in candidates:
        if folder.is_dir():
            return folder
    return CHECKOUT_DATA


def data_path(*parts: str) -> Path:
    """``data_dir() / parts[0] / ...`` (not checked: see :func:`require_data`)."""
    return data_dir().joinpath(*parts)


def require_data(path: Path, what: str, argument: str | None = None) -> Path:
    """Return ``path`` if it exists; otherwise a FileNotFoundError that names ``argument`` (when the
    path came from one), what was missing, every place labkit looked, and the fix."""
    path = Path(path)
    if path.exists():
        return path
    looked = "; ".join(f"{label}: {folder}" for label, folder in _candidates())
    prefix = f"{argument}: " if argument else ""
    raise FileNotFoundError(
        f"{prefix}{what} not found at {path}. labkit looks for its data folder in {looked}. "
        f"Install labkit from the repository (`pip install .` or `pip install git+<repo URL>` "
        f"carries data/ inside the package), work from a clone, or set {DATA_ENV} to the data/ "
        f"folder of a clone.")
