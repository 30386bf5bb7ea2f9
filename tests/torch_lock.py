"""Whether this torch is the lock's (requirements.lock): sampled episodes, and so every number
measured on them, reproduce bit for bit only under it; another torch version draws other random
streams (the other-end environment runs torch 2.6). Tests that pin a sampled number ask this."""
from __future__ import annotations

from pathlib import Path


def torch_is_locked() -> bool:
    import torch

    lock = Path(__file__).resolve().parents[1] / "requirements.lock"
    if not lock.is_file():
        return False
    pins = dict(line.split("==", 1) for line in lock.read_text().splitlines() if "==" in line)
    return torch.__version__.split("+")[0] == pins.get("torch")
