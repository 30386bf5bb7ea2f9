"""Does the loss decide notebook 06's verdict? GRPO against GiGPO under every aggregation and every
policy loss of ``labkit.learn``, five seeds each; cached in data/loss_runs/ (seeded; about eight
minutes on one core).

    python scripts/build_loss_runs.py

Notebook 06 reports that GiGPO learns faster than GRPO under GRPO's own loss and that the gap
vanishes under a token-mean loss. Three families of settings (``labkit.course.gigpo_runs.loss_settings``) ask which part of the
loss decides it:

* one update per batch, as in the notebook (ratio 1: the aggregation alone acts): the clipped
  surrogate (``kind="ppo_clip"``) under each of verl's five ``loss_agg_mode`` rules;
* the same at lr 0.3 under token-mean and seq-mean-token-mean: a bigger step without reuse;
* four updates per batch (two epochs of two minibatches), so the ratio leaves 1 and the clips
  and gates act: PPO-clip under both rules, then each other policy loss (dual-clip, GSPO, CISPO,
  SAPO, Clip-Cov, KL-Cov, PPO-clip on the top 20% entropy turns) under token-mean, so only the
  loss's rule differs. Clip-Cov and KL-Cov run at verl's defaults (2e-4 of the tokens: one
  turn of a batch) and at 2e-2, where they touch a visible share.

Every run: notebook 06's world (``noisy_world(noise=0.2, max_turns=50, n_files=8)``), the uniform
agent, 8 tasks x 8 episodes a batch, Adam at lr 0.1, gradient norm clipped at 1, exact success
every 5 batches. Writes ``curves.csv`` (every run's curve, with ``family`` and ``setting``) and
``meta.json`` (settings, timings, the provenance stamp of ``labkit.core.cache``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labkit.core.cache import write_meta  # noqa: E402
from labkit.course import use_threads  # noqa: E402
from labkit.course.gigpo_runs import LOSS_FAMILIES, FOUR_UPDATES, grpo_vs_gigpo_runs, loss_settings  # noqa: E402
from labkit.course.presets import noisy_world  # noqa: E402

OUT = ROOT / "data" / "loss_runs"
SEEDS = (0, 1, 2, 3, 4)
WORLD = dict(noise=0.2, max_turns=50, n_files=8)
COMMON = dict(iterations=60, lr=0.1, n_tasks=8, group_size=8, eval_every=5)
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args(argv)
    use_threads(1)
    env = noisy_world(**WORLD)
    curves, timings = [], {}
    for family, setting, kwargs in loss_settings():
        start = time.perf_counter()
        runs = grpo_vs_gigpo_runs(env, seeds=SEEDS, progress=False, **{**COMMON, **kwargs})
        timings[f"{family}: {setting}"] = round(time.perf_counter() - start, 1)
        curves.append(runs.assign(family=family, setting=setting))
        print(f"{family:32s} {setting:28s} {timings[f'{family}: {setting}']:6.1f} s", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    table = pd.concat(curves, ignore_index=True)
    table.to_csv(OUT / "curves.csv", index=False, float_format="%.6g")
    meta = {"world": f"noisy_world({', '.join(f'{k}={v}' for k, v in WORLD.items())})", "seeds": list(SEEDS),
            "common": COMMON, "four_updates": FOUR_UPDATES, "families": list(LOSS_FAMILIES),
            "settings": [{"family": f, "setting": s, **{k: v for k, v in kw.items()}} for f, s, kw in loss_settings()],
            "seconds": timings}
    write_meta(OUT / "meta.json", meta, script=__file__, indent=1)


if __name__ == "__main__":
    main()
