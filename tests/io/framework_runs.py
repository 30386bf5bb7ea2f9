"""Where the runs that TRL and verl wrote are: ``data/framework_runs`` (committed), or the folder
``LABKIT_FRAMEWORK_RUNS`` names, where the side environments' runners (``scripts/run_trl.py``,
``scripts/run_verl.py``) have just written them again with the pinned (or newest) releases."""
from __future__ import annotations

import json
import os
from pathlib import Path

from labkit.core.paths import data_path

COMMITTED = Path(data_path("framework_runs"))
RUNS = Path(os.environ.get("LABKIT_FRAMEWORK_RUNS") or COMMITTED)
#: True on the committed files: only there are numbers of one particular run pinned.
IS_COMMITTED = RUNS.resolve() == COMMITTED.resolve()
TRL = RUNS / "trl_grpo"
VERL = RUNS / "verl_dump"


def trl_log_history() -> list[dict]:
    """TRL's own per-step metrics of the run (``trainer.state.log_history``), one entry per step."""
    return [h for h in json.loads((TRL / "log_history.json").read_text()) if "frac_reward_zero_std" in h]
