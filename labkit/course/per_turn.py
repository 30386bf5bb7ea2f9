"""The per-turn question on ToolWorld, shared by notebook 06 and ``scripts/build_per_turn_bias.py``:
per-turn credit (MT-GRPO's turn-index normalisation, a return-to-go baseline, GiGPO, turn-level
GAE on the exact values, the exact advantage) turned into policy gradients and read against the
exact dJ/dlogits, for agents that decide when to stop.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd
import torch

from labkit.core.checks import check_int, check_number
from labkit.envs.toolworld import ToolWorld


#: The world of the per-turn section: small enough that thousands of batches take seconds, with
#: episodes the policy ends (submit) or that time out at max_turns.
PER_TURN_WORLD = {"n_files": 3, "max_turns": 12, "mislead": 0.2, "noise": 0.2, "flaky": 0.1}

#: The estimators of the per-turn comparison, in table order.
PER_TURN_ESTIMATORS = ("MT-GRPO (turn index)", "return-to-go baseline", "GiGPO (anchor groups)",
                       "turn GAE (exact V)", "exact advantage")


def per_turn_world(step_cost: float = 0.0, find_reward: float = 0.0) -> ToolWorld:
    """``PER_TURN_WORLD`` with a cost per turn and a reward for the turn that finds the bug (both
    paid inside the episode, both in the exact DP)."""
    return ToolWorld(**PER_TURN_WORLD, step_cost=check_number("step_cost", step_cost, low=0.0),
                     find_reward=check_number("find_reward", find_reward))


def stopping_policy(env: ToolWorld, submit_bias: float, *, strength: float = 1.0):
    """``env.scripted_policy(strength)`` with ``submit_bias`` added to the submit logit after every
    observation: positive stops early (often before the fix), negative plays on (often to the
    time limit)."""
    from labkit.envs.toolworld.env import SUBMIT

    policy = env.scripted_policy(check_number("strength", strength))
    with torch.no_grad():
        policy.logits[:, SUBMIT] += check_number("submit_bias", submit_bias)
    return policy


def per_turn_credits(env: ToolWorld, rollouts, truth) -> dict:
    """Every estimator of ``PER_TURN_ESTIMATORS`` on ``rollouts`` (sampled from ``env``), as
    (B, T) token credit, the group estimators without std normalisation (their baselines are
    what is compared here; GRPO's std is a rescaling of its own):

    * MT-GRPO: ``turn_reward_design`` with the env's per-turn rewards as turn rewards and the
      verdict as outcome (``features.reward_split``), baseline = "turn_index";
    * the same with baseline = "return_to_go" (leave-one-out over the trajectories still
      playing at each turn index);
    * GiGPO with gamma = 1 (undiscounted, as the objective) on the env's rewards;
    * turn-level GAE with the exact values V_t as its critic (gamma = lam = 1);
    * the exact advantage A_t(s_t, a_t) of ``truth``.
    """
    from labkit.credit.group import gigpo
    from labkit.credit.process import turn_reward_design
    from labkit.credit.td import turn_gae
    from labkit.envs.toolworld.features import reward_split

    turn, outcome = reward_split(env, rollouts)
    last = (rollouts.mask.sum(1) - 1).clamp(min=0)
    verdict = torch.zeros_like(rollouts.rewards, dtype=torch.float64)
    verdict[torch.arange(rollouts.batch_size), last] = outcome
    on_outcome = rollouts.with_(rewards=torch.where(rollouts.mask, verdict, 0.0))
    values = rollouts.view(truth.value(rollouts), "turn", "first")[0]  # (B, the batch's most turns)
    return {
        "MT-GRPO (turn index)": turn_reward_design(on_outcome, turn_rewards=turn, normalize_std=False).token,
        "return-to-go baseline": turn_reward_design(on_outcome, turn_rewards=turn, normalize_std=False,
                                                    baseline="return_to_go").token,
        "GiGPO (anchor groups)": gigpo(rollouts, gamma=1.0, norm="mean_norm").token,
        "turn GAE (exact V)": turn_gae(rollouts, values=values, gamma=1.0, lam=1.0).token,
        "exact advantage": truth.advantage(rollouts),
    }


def stop_direction(env: ToolWorld, truth) -> torch.Tensor:
    """The "submit rather than take another turn" direction of the logit table, unit length,
    (n_obs, n_actions): row o is w_o (onehot(submit) - pi(. | o)), w_o the expected number of
    visits to observation o per episode, i.e. the gradient of sum_o w_o log pi(submit | o). A
    gradient's dot product with it says how hard a step pushes towards stopping where the agent
    actually is."""
    from labkit.envs.toolworld.env import SUBMIT

    visits = truth.occupancy.sum((0, 1, 2))
    u = -truth.pi.clone()
    u[:, SUBMIT] += 1.0
    u = visits[:, None] * u
    return u / u.norm()


def gradient_bias(env: ToolWorld, policy, *, n_batches: int = 200, n_tasks: int = 4, group_size: int = 8,
                  seed: int = 0) -> pd.DataFrame:
    """The mean policy gradient of every per-turn estimator against the exact dJ/dlogits.

    ``n_batches`` independent batches of ``n_tasks`` x ``group_size`` episodes (groups intact),
    one gradient per batch and estimator, g_b = mean over the batch's episodes of sum_t
    A_hat_t grad log pi(a_t | o_t). Per batch two linear read-outs, so that their means over the
    batches are the read-outs of the mean gradient and a normal 95 % interval over the batches
    is honest:

    * ``along``: <g_b, g*> / |g*|^2 (1 for an unbiased estimator; a GRPO mean that counts the
      trajectory itself shrinks it by about 1 - 1/group_size);
    * ``stop_bias``: <g_b, u'> / |g*| with u' = ``stop_direction`` less its component along
      g*: how much more (> 0) or less the estimator pushes towards submitting than a rescaled
      exact gradient would, in units of |g*| (0 for an unbiased estimator, and for one that
      only rescales the exact gradient).

    Returns one row per estimator (``PER_TURN_ESTIMATORS`` order): ``estimator``, ``along``,
    ``along_lo``, ``along_hi``, ``stop_bias``, ``stop_lo``, ``stop_hi``, ``stop_noise`` (the
    standard deviation of one batch's stop read-out, same units), ``exact_stop`` (<g*, u> /
    |g*|) and ``episode_turns`` (mean turns per episode).
    """
    n_batches = check_int("n_batches", n_batches, low=2)
    n_tasks = check_int("n_tasks", n_tasks, low=1)
    group_size = check_int("group_size", group_size, low=2)
    truth = env.truth(policy)
    exact = truth.grad.reshape(-1)
    norm = float(exact.norm())
    if norm == 0:
        raise ValueError("policy: its exact gradient is zero here, so there is no direction to compare with")
    u = stop_direction(env, truth).reshape(-1)
    u_off = u - (u @ exact) / norm ** 2 * exact  # the part of "stop" a rescaling of g* cannot give
    ro = env.sample(policy, n_tasks * n_batches, group_size=group_size, seed=check_int("seed", seed))
    credits = per_turn_credits(env, ro, truth)
    rows = []
    z = 1.959963984540054
    for name in PER_TURN_ESTIMATORS:
        per_traj = policy.trajectory_gradients(ro, credits[name].to(torch.float64)).reshape(ro.batch_size, -1)
        g = per_traj.reshape(n_batches, -1, exact.numel()).mean(1)
        along = g @ exact / norm ** 2
        stop = g @ u_off / norm
        row = {"estimator": name}
        for key, x in (("along", along), ("stop", stop)):
            m, se = float(x.mean()), float(x.std() / n_batches ** 0.5)
            row[key if key == "along" else "stop_bias"] = m
            row[f"{key}_lo"], row[f"{key}_hi"] = m - z * se, m + z * se
        row["stop_noise"] = float(stop.std())
        rows.append(row)
    out = pd.DataFrame(rows)
    out["exact_stop"] = float(exact @ u) / norm
    out["episode_turns"] = float(ro.mask.sum(1).double().mean())
    return out


#: The agents of the per-turn comparison: submit_bias added to every submit logit of the
#: scripted(1) agent (``stopping_policy``).
STOPPING_AGENTS = {"stops early": 1.0, "plays on": -1.0}

#: The per-turn reward settings the cached grid covers, (step_cost, find_reward).
PER_TURN_SETTINGS = ((0.0, 0.0), (0.01, 0.0), (0.02, 0.0), (0.05, 0.0), (0.1, 0.0), (0.0, 0.1), (0.0, 0.3))


def per_turn_grid(settings: Sequence[tuple[float, float]] = PER_TURN_SETTINGS, *, agents: dict | None = None,
                  n_batches: int = 1000, n_tasks: int = 4, group_size: int = 8, seed: int = 0) -> pd.DataFrame:
    """``gradient_bias`` at every (step_cost, find_reward) of ``settings`` (``per_turn_world``)
    for every agent of ``agents`` (name -> submit_bias, default ``STOPPING_AGENTS``): its rows with
    ``step_cost``, ``find_reward``, ``agent``, ``submit_bias`` and ``J`` (the agent's exact
    expected return) in front. Each cell uses the same ``seed``."""
    agents = dict(STOPPING_AGENTS if agents is None else agents)
    frames = []
    for step_cost, find_reward in settings:
        env = per_turn_world(step_cost, find_reward)
        for name, bias in agents.items():
            policy = stopping_policy(env, bias)
            df = gradient_bias(env, policy, n_batches=n_batches, n_tasks=n_tasks, group_size=group_size, seed=seed)
            df.insert(0, "J", env.truth(policy).J)
            df.insert(0, "submit_bias", float(bias))
            df.insert(0, "agent", name)
            df.insert(0, "find_reward", float(find_reward))
            df.insert(0, "step_cost", float(step_cost))
            frames.append(df)
    return pd.concat(frames, ignore_index=True)
