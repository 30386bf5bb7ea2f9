"""The learner (``labkit.core.protocols.Learner``) for the tiny LM on arithmetic prompts."""
from __future__ import annotations

from typing import Sequence

import torch

from labkit.core.checks import check_has, check_int
from labkit.core.rollouts import Rollouts
from labkit.policies.lm import sequence_logprobs


class LMLearner:
    """The tiny language model (``labkit.envs.ArithmeticLM``) on a pool of arithmetic prompts.

    Each iteration draws ``prompts_per_batch`` problems from ``train_problems`` (seeded) and
    samples ``n_per_prompt`` completions of each (one GRPO group per prompt). ``evaluate``
    samples one completion per problem of ``eval_problems`` at the policy temperature with a
    fixed seed (the same random numbers every time, so curves differ by the policy only) and
    returns the verifier's success rate. Dropout stays off: the log-probs that train the policy
    are those that sampled it.
    """

    default_lr = 1e-4

    def __init__(self, env, train_problems: Sequence, eval_problems: Sequence, *, prompts_per_batch: int = 8,
                 n_per_prompt: int = 8):
        self.env = check_has("env", env, ("model", "rollouts"), "an ArithmeticLM")
        self.train_problems, self.eval_problems = list(train_problems), list(eval_problems)
        if not self.train_problems:
            raise ValueError("train_problems: need at least one problem")
        if not self.eval_problems:
            raise ValueError("eval_problems: need at least one problem")
        self.prompts_per_batch = check_int("prompts_per_batch", prompts_per_batch, low=1)
        self.n_per_prompt = check_int("n_per_prompt", n_per_prompt, low=1)
        env.model.eval()

    def parameters(self):
        return self.env.model.parameters()

    def collect(self, iteration: int, seed: int) -> Rollouts:
        g = torch.Generator().manual_seed(seed)
        pick = torch.randint(len(self.train_problems), (self.prompts_per_batch,), generator=g).tolist()
        return self.env.rollouts([self.train_problems[i] for i in pick], n_per_prompt=self.n_per_prompt, seed=seed)

    def logprobs(self, rollouts: Rollouts, rows: torch.Tensor) -> torch.Tensor:
        return sequence_logprobs(self.env.model, [rollouts.info["prompt_ids"][int(b)] for b in rows],
                                 rollouts.tokens[rows], rollouts.mask[rows], pad_id=self.env.pad_id)

    @torch.no_grad()
    def evaluate(self, seed: int = 0) -> float:
        ro = self.env.rollouts(self.eval_problems, n_per_prompt=1, seed=10_000 + seed)
        return float(ro.scores.mean())
