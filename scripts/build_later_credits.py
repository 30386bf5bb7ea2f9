"""Cache the credits of the reasoning-side methods published after the survey on the tiny LM's 32
reference rollouts, for notebook 04's table (``labkit.course.reasoning_roster.later_methods``).

    python scripts/build_later_credits.py

Runs every method of ``later_methods`` once (seeded; the forks of OmegaPRM, TreeRL and APPO are
Monte Carlo continuations of the shipped model) with ``timed_run``, and writes
data/later_credits/credits.safetensors (every credit's tensors), credits.json (level, cost,
seconds) and meta.json (the provenance stamp of ``labkit.core.cache``: the tiny model, its
reference rollouts, the reward and tuned models). About 5 s of estimator time on one core, plus
loading the models and fitting notebook 02's critic (which none of these methods uses).
Rerun when data/tiny_lm, data/reward_models or data/implicit_lm change (the stamp catches those),
or when the roster in labkit/course/reasoning_roster.py does (nothing catches that).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import write_meta  # noqa: E402
from labkit.course import reasoning_roster as roster  # noqa: E402
from labkit.envs.arithmetic.lm import ArithmeticLM  # noqa: E402
from labkit.envs.arithmetic.truth import load_reference  # noqa: E402

OUT = ROOT / "data" / "later_credits"
INPUTS = ["tiny_lm/model.safetensors", "lm_truth/reference.safetensors", "reward_models/orm.safetensors",
          "implicit_lm/dpo_model.safetensors", "implicit_lm/treg_model.safetensors"]


def main() -> None:
    import torch

    torch.set_num_threads(1)
    env = ArithmeticLM.load()
    ref, _ = load_reference(env)
    models = roster.load_models(env, progress=False)
    credits = {}
    for method in roster.later_methods(env, models):
        start = time.perf_counter()
        credit = method.run(ref)
        credit.info["seconds"] = time.perf_counter() - start
        credits[method.name] = credit
        print(f"{method.name:20s} {credit.info['seconds']:6.2f} s", flush=True)
    roster.write_later_credits(credits, OUT)
    write_meta(OUT / "meta.json", {"methods": list(credits), "rollouts": len(ref)}, script=__file__, inputs=INPUTS,
               indent=1)


if __name__ == "__main__":
    main()
