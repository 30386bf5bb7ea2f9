"""Solutions to notebook 03_vineppo's exercises that ask for a function: 03a VinePPO's step
advantage from vine values, 03c a minimal GRPO training loop (03b is a reading: its solution is
the lab's run).

Checked by ``check(vineppo_advantage, "03a")`` and ``check(grpo_loop, "03c")``; the exercises are
``labkit.course.exercises.ex03_vineppo``.
"""
from __future__ import annotations

import torch

__all__ = ["vineppo_advantage", "grpo_loop"]


def vineppo_advantage(vine_outcomes, rewards):
    """03a · VinePPO step advantage (Kazemnejad et al. 2024, arXiv 2410.01679): values from vines.

    Inputs:
        vine_outcomes: (S, K) the 0/1 outcomes of K vines forked before each of the S steps.
        rewards: (S,) the reward received at the end of each step (the outcome after the last).

    Formula:
        V_i = mean outcome of the K vines from the prefix before step i,   A_i = r_i + V_{i+1} - V_i

    Defaults:
        gamma = 1 (the paper's).

    Degenerate input:
        V = 0 after the final step, so a one-step answer gets r - V_0; K = 1 is allowed (noisy).

    Deviations from the reference:
        none: equal to ``labkit.credit.vineppo`` without whitening.

    Returns:
        (S,) float64 step advantage.

    Cost:
        K continuations per step (already sampled: ``vine_outcomes``).
    """
    V = vine_outcomes.double().mean(dim=1)
    V_next = torch.cat([V[1:], torch.zeros(1, dtype=V.dtype)])
    return rewards + V_next - V



def grpo_loop(learner, optimizer, iterations, seed):
    """03c · A minimal GRPO training loop (Shao et al. 2024, arXiv 2402.03300) on the tiny LM.

    Inputs:
        learner: the tiny LM on its arithmetic prompts (``collect``, ``logprobs``).
        optimizer: a torch optimiser over the learner's parameters.
        iterations: how many batches to sample and train on.
        seed: the run's seed; iteration i samples with seed * 1_000_003 + i.

    Formula:
        A_b = (s_b - mean_group) / (std_group + eps)       (exercise 01a; std unbiased)
        loss = -(1/B) sum_b (1/L_b) sum_t A_b log pi(token_bt)   (seq-mean-token-mean)

    Defaults:
        eps = 1e-6; one update per batch (so PPO's ratio is 1 and no clipping applies).

    Degenerate input:
        a group of one gets mean 0 and std 1; a group whose scores are equal gets A = 0.

    Deviations from the reference:
        none: the same update as ``labkit.learn.loop.train(learner, "grpo", kind="grpo", epochs=1,
        minibatches=1, max_grad_norm=None)``, without its evaluations and diagnostics.

    Returns:
        list of ``iterations`` floats, each iteration's mean batch reward.

    Cost:
        one batch sampled and one forward and backward pass over it per iteration.
    """
    rewards = []
    for i in range(1, iterations + 1):
        batch = learner.collect(i, seed=seed * 1_000_003 + i)
        scores, groups = batch.scores.double(), batch.group_ids
        advantages = torch.zeros_like(scores)
        for g in torch.unique(groups):
            members = groups == g
            s = scores[members]
            mean, std = (0.0, 1.0) if len(s) == 1 else (s.mean(), s.std())  # the group-of-one rule
            advantages[members] = (s - mean) / (std + 1e-6)

        logp = learner.logprobs(batch, torch.arange(len(batch)))   # (B, T), carries the gradient
        mask = batch.mask.to(logp.dtype)
        per_sequence = (advantages[:, None] * logp * mask).sum(dim=1) / mask.sum(dim=1)
        loss = -per_sequence.mean()

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        rewards.append(float(batch.scores.mean()))
    return rewards
