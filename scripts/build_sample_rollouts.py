"""Write the shipped sample rollout dumps (data/sample_rollouts/) in labkit.io's record format.

Two dumps, so that reading, diagnosing and comparing estimators on "your own rollouts" runs
offline on data the lab made itself:

* ``arithmetic_lm.jsonl``: the shipped tiny LM (data/tiny_lm) answering arithmetic problems
  with 4 operands (the setting of notebooks 02-04, ``LM_OPERANDS``), 64 training problems x 8
  completions (GRPO groups of 8); per token: the token id and its text, the ``;``-separated
  reasoning step, the sampling log-probability and entropy; outcome reward 1 for a correct
  answer (the task's verifier).
* ``toolworld.jsonl``: the ToolWorld agent of notebook 05 (the noisy world, noise 0.2, 30
  turns; the scripted agent of strength 3), 32 tasks x 8 episodes, written as one position
  per action and one per tool answer in between: actions are generated (``generated`` 1, a
  turn each, the observation they acted on as ``states`` and ``anchor_keys``), tool answers
  are not (``generated`` 0). Token ids: the action ids, then ``n_actions + observation``.

Beside the LM dump, ``arithmetic_lm_inputs.safetensors`` holds what the estimators that need more
than a file get from the model that wrote it (``ArithmeticLM.credit_inputs`` on the dump as read
back): the verifier's three signals per answer (``reward_parts``, GDPO), the greedy answer's
reward per prompt (``greedy_scores``, ReMax) and the next-token distributions' sum of squared
probabilities (``sum_pi_squared``, the optimal token baseline), so notebook 01 compares them
without loading the model.

Everything goes to data/sample_rollouts/ with ``meta.json`` (what each dump holds and the provenance stamp
of ``labkit.core.cache``: the LM dump depends on data/tiny_lm). Seeded, one thread.
Usage: python scripts/build_sample_rollouts.py [--check]
(``--check`` rebuilds into a temporary folder and compares with the committed files; the LM
dump depends on float arithmetic, so it may differ on another CPU or torch build.)
"""
from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
import time
from functools import lru_cache
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from labkit.core.cache import write_meta  # noqa: E402
from labkit.core.paths import data_path  # noqa: E402
from labkit.core.rollouts import Rollouts  # noqa: E402
from labkit.course.presets import LM_OPERANDS, NB05_AGENT_STRENGTH, noisy_world  # noqa: E402
from labkit.envs.toolworld.tool_output import with_tool_output  # noqa: E402
from labkit.io import write_rollouts  # noqa: E402

FILES = ("arithmetic_lm.jsonl", "toolworld.jsonl", "arithmetic_lm_inputs.safetensors")
LM_PROMPTS, LM_GROUP, LM_SEED = 64, 8, 0
TOOL_TASKS, TOOL_GROUP, TOOL_SEED = 32, 8, 0


@lru_cache(maxsize=1)
def _lm():
    """The shipped tiny LM, loaded once for the dump and its inputs."""
    from labkit.envs.arithmetic.lm import ArithmeticLM

    return ArithmeticLM.load(task_seed=0)


def arithmetic_lm() -> Rollouts:
    """The tiny LM's rollouts on 4-operand training problems, groups of 8."""
    env = _lm()
    problems = env.task.sample_prompts(LM_PROMPTS, n_operands=LM_OPERANDS, split="train", seed=LM_SEED)
    return env.rollouts(problems, n_per_prompt=LM_GROUP, seed=LM_SEED)


def toolworld() -> Rollouts:
    """Notebook 05's agent on notebook 05's world, with each tool answer as a position of its own."""
    env = noisy_world()
    turns = env.sample(env.scripted_policy(NB05_AGENT_STRENGTH), TOOL_TASKS, group_size=TOOL_GROUP, seed=TOOL_SEED)
    return with_tool_output(env, turns)


def lm_inputs(dump: Path) -> dict[str, torch.Tensor]:
    """The tiny LM's credit inputs for the dump at ``dump``, as ``labkit.io`` reads it back."""
    from labkit.io import read_rollouts

    inputs, _ = _lm().credit_inputs(read_rollouts(dump), seed=LM_SEED)
    return {k: v.contiguous() for k, v in inputs.items()}


def build(folder: Path) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    for name, make in zip(FILES, (arithmetic_lm, toolworld)):
        start = time.perf_counter()
        ro = make()
        path = write_rollouts(ro, folder / name)
        print(f"{path}: {ro.batch_size} trajectories, {path.stat().st_size / 2**20:.2f} MiB, "
              f"{time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    path = folder / FILES[2]
    save_file(lm_inputs(folder / FILES[0]), str(path))
    print(f"{path}: {time.perf_counter() - start:.1f} s")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="rebuild in a temporary folder and compare")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    target = data_path("sample_rollouts")
    if not args.check:
        build(target)
        meta = {"files": list(FILES),
                "arithmetic_lm": {"prompts": LM_PROMPTS, "n_per_prompt": LM_GROUP, "seed": LM_SEED,
                                  "n_operands": LM_OPERANDS, "split": "train"},
                "toolworld": {"world": "presets.noisy_world()", "agent_strength": NB05_AGENT_STRENGTH,
                              "tasks": TOOL_TASKS, "group_size": TOOL_GROUP, "seed": TOOL_SEED},
                "arithmetic_lm_inputs": {"from": "ArithmeticLM.credit_inputs on arithmetic_lm.jsonl as read back",
                                         "reward_parts": "answer, format, steps", "greedy_seed": LM_SEED},
                "torch_threads": 1, "torch": torch.__version__}
        write_meta(target / "meta.json", meta, script=__file__, inputs=["tiny_lm/model.safetensors"], indent=1)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        differ = [n for n in FILES if not filecmp.cmp(Path(tmp) / n, target / n, shallow=False)]
    print("identical" if not differ else f"differ: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
