"""RL on the tiny arithmetic LM: the recipes notebooks 02-04 and the scripts that cache their runs
share.

* ``fit_lm_critic``: PPO's critic, fitted the way PPO would see data (notebook 02 judges it,
  notebook 04 uses it for GAE);
* ``lm_rl_runs``: the three runs notebook 03 compares (GRPO, PPO with that critic, VinePPO) as
  ``labkit.learn.loop.compare`` specs; ``scripts/build_rl_runs.py`` and
  ``scripts/build_rl_lr_sweep.py`` train them on ``labkit.course.presets.lm_rl_setup()``'s
  learners and cache the curves in ``data/rl_runs``.
"""
from __future__ import annotations

from functools import partial
from types import SimpleNamespace
from typing import Sequence

from labkit.core.checks import check_int
from labkit.credit.mc import vineppo
from labkit.credit.td import gae
from labkit.envs.arithmetic import MAX_OPERANDS
from labkit.learn.critics import LMCritic


def fit_lm_critic(env, *, n_rollouts: int = 512, n_operands: int = MAX_OPERANDS, steps: int = 80, seed: int = 0,
                  progress: bool = True):
    """PPO's critic for the tiny LM, fitted the way PPO would see data: a value head on a copy of
    the policy's trunk (``LMCritic.from_policy``), regressed on the 0/1 outcomes of
    ``n_rollouts`` fresh rollouts of ``n_operands``-operand training problems (the task's longest
    by default; 512 rollouts = 8 PPO iterations of 64). Returns ``(critic, history)``;
    ``history`` is ``LMCritic.fit``'s per-step loss, with ``attrs["rollout_success"]`` the
    success rate of the data it saw."""
    n_rollouts = check_int("n_rollouts", n_rollouts, low=1)
    problems = env.task.sample_prompts(n_rollouts, n_operands=n_operands, split="train", seed=seed + 1)
    data = env.rollouts(problems, seed=seed + 1)
    critic = LMCritic.from_policy(env.model, seed=seed)
    history = critic.fit(data, steps=steps, seed=seed, progress=progress)
    history.attrs["rollout_success"] = float(data.scores.mean())
    history.attrs["rollouts"] = n_rollouts
    return critic, history


def lm_rl_runs(*, k: int = 9, critic_lr: float = 1e-4, critic_epochs: int = 2, critic_minibatch: int = 16,
               methods: Sequence[str] = ("GRPO", "PPO", "VinePPO")) -> dict:
    """The three runs notebook 03 compares, as ``labkit.learn.loop.compare`` run specs.

    GRPO: group-normalised outcome credit, GRPO loss. PPO: token-level GAE (gamma = lambda = 1,
    verl's defaults) from a learned value model (``LMCritic``: the policy's trunk plus a scalar
    head, fresh per seed) regressed on the GAE returns after every batch (``critic_epochs``
    passes over minibatches of ``critic_minibatch`` rows, AdamW at ``critic_lr``), PPO-clip loss. VinePPO:
    step credit from ``k`` vines per step boundary, PPO-clip loss. Everything else is shared.
    """
    def ppo(learner):
        critic = LMCritic.from_policy(learner.env.model)
        update = partial(critic.update, lr=critic_lr, epochs=critic_epochs, minibatch_size=critic_minibatch)
        return {"estimator": partial(gae, values=critic, lam=1.0), "critic": SimpleNamespace(update=update),
                "kind": "ppo_clip"}

    def vine(learner):
        return {"estimator": partial(vineppo, value_fn=learner.env.value_fn(seed=17), k=k), "kind": "ppo_clip"}

    specs = {"GRPO": lambda learner: {"estimator": "grpo", "kind": "grpo"}, "PPO": ppo, "VinePPO": vine}
    unknown = set(methods) - set(specs)
    if unknown:
        raise ValueError(f"methods: unknown {sorted(unknown)}; choose from {sorted(specs)}")
    return {m: specs[m] for m in methods}
