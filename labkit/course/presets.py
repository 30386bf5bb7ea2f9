"""Every notebook's world settings, named in one block (in the style of CleanRL's ``Args``), and
the set-ups that build those worlds.

The runner modules (``nb01_reinforce_variance`` ... ``nb10_benchmark``) take their defaults
from here, so "which world does lesson N use, and why does it differ from lesson M" is answered
in one place instead of in five signatures that disagree. The notebooks still spell their
settings out in their cells (a reader sees them where they run); these are the same values.

The set-ups (``chain_setup``, ``noisy_world``, ``echo_world``, ``toolworld_setup``,
``scripted_agent_setup``, ``lm_rl_setup``) live here rather than in a lesson because several
lessons and the scripts that cache their long runs build the same worlds; a lesson imports only
from here and the library, never from another lesson.

The designed multi-agent games of notebook 09 are not repeated here: they are
``labkit.envs.teamtask.PRESETS`` (each with its story in ``PRESET_STORIES``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from labkit.core.checks import check_int, check_number
from labkit.envs import BifurcationChain, ToolWorld
from labkit.envs.tabular import Truth, exact_truth
from labkit.policies import TabularSoftmaxPolicy


@dataclass(frozen=True)
class ChainArgs:
    """A ``BifurcationChain`` and the tabular policy playing it (``chain_setup``'s arguments)."""

    horizon: int = 20           # tokens per trajectory
    n_bifurcations: int = 2     # forks where one token is right and the rest fail the episode
    noise_std: float = 0.0      # Gaussian noise on the final reward
    slip: float = 0.0           # chance that a right token is turned into a wrong one
    init_std: float = 0.0       # std of the policy's initial logits (0 = uniform policy)


@dataclass(frozen=True)
class ToolWorldArgs:
    """A ``ToolWorld``: a bug in one of ``n_files`` files, found with unreliable tools.

    ``mislead``, ``noise`` and ``flaky`` are the three tools' error rates (search points at a
    wrong file, a file read misjudges, the test suite flips); ``kwargs()`` is what
    ``ToolWorld(n_files, **kwargs)`` takes.
    """

    n_files: int = 5
    max_turns: int = 30
    mislead: float = 0.2
    noise: float = 0.1
    flaky: float = 0.1
    step_cost: float = 0.0      # 0: a turn costs nothing
    wrong_submit: float = 0.0   # penalty for submitting a wrong file

    def kwargs(self) -> dict:
        """Everything but ``n_files`` (ToolWorld's one positional argument)."""
        kw = asdict(self)
        kw.pop("n_files")
        return kw


# --------------------------------------------------------------------------- the presets
# 01: a clean chain (no reward noise, no slips, uniform policy): the only randomness is the
#     policy's own sampling, so the variance the notebook measures comes from the horizon alone.
NB01_CHAIN = ChainArgs()
# 01: the episode-level estimators notebook 01 compares (and benchmarks/core_speed.py times)
EPISODE_ESTIMATORS = ("reinforce", "reinforce_baseline", "rloo", "grpo", "dr_grpo", "reinforce_pp")

# 02: reward noise and slips make the same state end either way, so a critic has something to
#     learn (and to get wrong), and a non-uniform policy (init_std 0.5) gives states unequal
#     visits: the learned critic is poor exactly where few episodes passed.
NB02_CHAIN = ChainArgs(noise_std=0.5, slip=0.1, init_std=0.5)

# 05: one error rate 0.2 on all three tools, 30 turns: noisy enough that luck is a large share of
#     the outcome, long enough that an episode is a real multi-step search.
NB05_WORLD = ToolWorldArgs(mislead=0.2, noise=0.2, flaky=0.2)
NB05_AGENT_STRENGTH = 3.0       # scripted agent: the sensible action has probability about 0.6

# 05, echo trap: noisier tools, a sixth file, 40 turns and a broken build (-3) for a wrong
#     submit, so doing nothing until time runs out (0) is *safe* and trying is risky.
# 05, inside a turn (POAD): the same world; a discount per action makes the difference between
#     discounting per token (token-level GAE) and per action (POAD's backups) visible.
NB05_TOKEN_GAMMA = 0.9

NB05_ECHO_WORLD = ToolWorldArgs(n_files=6, max_turns=40, mislead=0.4, noise=0.3, flaky=0.3, wrong_submit=3.0)

# 06: notebook 05's noise in a larger world (eight files) with longer episodes (50 turns): long
#     episodes are where GRPO's per-episode loss averaging shows its length bias, and where an
#     agent revisits observations, which is what GiGPO's anchor groups are made of.
NB06_WORLD = ToolWorldArgs(n_files=8, max_turns=50, mislead=0.2, noise=0.2, flaky=0.2)

# 07: ToolWorld's own (milder, unequal) tool noise, 30 turns; turns and wrong submits cost
#     nothing, so exact V is a success probability, which IGPO's DP stand-in needs.
NB07_WORLD = ToolWorldArgs()
NB07_WARMUP_ITERATIONS = 20     # GRPO batches before CARL: a uniform policy has equal entropy everywhere

# 08: error rate 0.3 (more luck to remove than in 05) but only 20 turns: the re-execution
#     methods (C3, CCPO) replay every turn, so cost grows with the horizon. Returns are the
#     success flag (binary), as HCA's exact hindsight distribution needs.
NB08_WORLD = ToolWorldArgs(max_turns=20, mislead=0.3, noise=0.3, flaky=0.3)
NB08_AGENT_STRENGTH = 2.0       # a half-trained agent, less sure than notebook 05's

# 02-03: the tiny LM's RL and critic data use problems with four operands (the task's longest).
LM_OPERANDS = 4

# 10: the live benchmark is the quick suite (chain T = 10 and 40, ToolWorld 20 turns, three
#     designed teams; two seeds) on a few estimators that span the families: GRPO and RLOO
#     (episode), GiGPO (anchor groups), VinePPO (Monte Carlo vines), exact Shapley and
#     leave-one-out (multi-agent). About two seconds on one core; the full run is cached.
NB10_SUITE = "quick"
NB10_LIVE_ESTIMATORS = ("grpo", "rloo", "gigpo", "vineppo", "shapley", "leave_one_out")
NB10_CARD_ESTIMATOR = "vineppo"   # the method whose checklist card the notebook shows first
NB10_BASELINE = "grpo"            # the episode-level baseline a card compares against


# --------------------------------------------------------------------------- the set-ups
def chain_setup(horizon: int, *, n_bifurcations: int = NB01_CHAIN.n_bifurcations,
                noise_std: float = NB01_CHAIN.noise_std, slip: float = NB01_CHAIN.slip,
                p_correct: float | None = None, init_std: float = NB01_CHAIN.init_std, env_seed: int = 0,
                policy_seed: int = 0) -> tuple[BifurcationChain, TabularSoftmaxPolicy, Truth]:
    """A BifurcationChain, a tabular policy for it, and the exact truth under that policy.

    ``p_correct`` (optional) sets the policy's probability of the right token at every
    bifurcation (the other tokens share the rest), which fixes the success rate at
    p_correct ** n_bifurcations when there is no slip. Otherwise logits are N(0, init_std^2).
    """
    env = BifurcationChain(horizon=horizon, n_bifurcations=n_bifurcations, noise_std=noise_std,
                           slip=slip, seed=env_seed)
    policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=init_std, seed=policy_seed)
    if p_correct is not None:
        p_correct = check_number("p_correct", p_correct, low=0.0, high=1.0, low_open=True, high_open=True)
        for t in env.bifurcations:
            probs = torch.full((env.n_actions,), (1 - p_correct) / (env.n_actions - 1), dtype=torch.float64)
            probs[env.correct[t]] = p_correct
            policy.set_probs(env.state_index(t, 1), probs)
    return env, policy, exact_truth(env.mdp(), policy)


def noisy_world(noise: float = NB05_WORLD.noise, max_turns: int = NB05_WORLD.max_turns, *,
                n_files: int = NB05_WORLD.n_files, **kw) -> ToolWorld:
    """A ToolWorld whose three unreliable tools share one noise level: search misleads, a file
    read misjudges and the test suite flips, each with probability ``noise``."""
    noise = check_number("noise", noise, low=0.0, high=1.0)
    return ToolWorld(n_files, max_turns=max_turns, mislead=noise, noise=noise, flaky=noise, **kw)


# echo_world's ToolWorld arguments as a dict (NB05_ECHO_WORLD says why these values)
ECHO_WORLD = asdict(NB05_ECHO_WORLD)


def echo_world(**overrides) -> ToolWorld:
    """The echo-trap setting: noisy tools and a broken build (-3) for a wrong submit, so doing
    nothing until time runs out (0) is *safe* and trying is risky (+1 or -3)."""
    kw = {**ECHO_WORLD, **overrides}
    n = kw.pop("n_files")
    return ToolWorld(n, **kw)


def toolworld_setup(n_files: int = NB07_WORLD.n_files, *, max_turns: int = NB07_WORLD.max_turns,
                    warmup_iterations: int = NB07_WARMUP_ITERATIONS, seed: int = 0, n_tasks: int = 8,
                    group_size: int = 8, **env_kwargs):
    """A ToolWorld and a partially trained policy for it: ``(env, policy)``.

    The env has ``step_cost = 0`` and ``wrong_submit = 0`` unless ``env_kwargs`` say otherwise
    (then exact V is a success probability, which IGPO's stand-in needs). The policy starts
    uniform and is trained with GRPO credit and the GRPO loss for ``warmup_iterations`` batches
    of ``n_tasks`` x ``group_size`` episodes (seed ``seed``), so its entropy is no longer the same
    at every observation. ``warmup_iterations = 0`` returns the uniform policy.
    """
    from labkit.envs.toolworld import ToolLearner
    from labkit.learn.loop import train

    warmup_iterations = check_int("warmup_iterations", warmup_iterations, low=0)
    seed = check_int("seed", seed)
    env_kwargs = {"step_cost": 0.0, "wrong_submit": 0.0, **env_kwargs}
    env = ToolWorld(n_files, max_turns=max_turns, **env_kwargs)
    policy = env.make_policy()
    if warmup_iterations:
        train(ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size), "grpo", kind="grpo",
              iterations=warmup_iterations, seed=seed, progress=False, label="warm-up")
    return env, policy


def scripted_agent_setup(noise: float = NB08_WORLD.noise, *, n_files: int = NB08_WORLD.n_files,
                         max_turns: int = NB08_WORLD.max_turns, strength: float = NB08_AGENT_STRENGTH):
    """A noisy ToolWorld and a half-trained agent: ``(env, policy)`` (notebook 08's world).

    The three tools share one error rate ``noise`` (search misleads, a file read misjudges, the
    tests flip, each with that probability); turns and wrong submits cost nothing, so the return
    is the success flag (binary, as HCA's exact h needs). The agent is
    ``env.scripted_policy(strength)``: the sensible action is the most likely one, not a sure one.
    """
    noise = check_number("noise", noise, low=0.0, high=1.0)
    env = noisy_world(noise, max_turns, n_files=n_files)
    return env, env.scripted_policy(check_number("strength", strength))


def lm_rl_setup(*, n_operands: int = LM_OPERANDS, train_pool: int = 512, eval_problems: int = 256,
                prompts_per_batch: int = 8, n_per_prompt: int = 8, task_seed: int = 0):
    """A ``make_learner(seed)`` for RL on the tiny LM: a fresh copy of the shipped model per seed,
    ``train_pool`` training problems and ``eval_problems`` distinct held-out problems with
    ``n_operands`` operands (the same problems for every seed, so runs differ by their seed only)."""
    from labkit.envs.arithmetic.learner import LMLearner
    from labkit.envs.arithmetic.lm import ArithmeticLM

    def make_learner(seed: int) -> LMLearner:
        env = ArithmeticLM.load(task_seed=task_seed)
        train = env.task.sample_prompts(train_pool, n_operands, split="train", seed=1)
        held_out = env.task.sample_prompts(eval_problems, n_operands, split="held_out", seed=2, unique=True)
        return LMLearner(env, train, held_out, prompts_per_batch=prompts_per_batch, n_per_prompt=n_per_prompt)
    return make_learner


# --------------------------------------------------------------------------- notebook 03's larger sample
VINE_HITS_DIR = "vine_hits"   # data/vine_hits, written by scripts/build_vine_hits.py


def held_out_sample(env, n_problems: int, n_operands: int = LM_OPERANDS, *, seed: int):
    """One rollout of the tiny LM (``env``, an ``ArithmeticLM``) on each of ``n_problems`` distinct
    held-out ``n_operands``-operand problems, problems and sampling both seeded ``seed``: the
    sample ``scripts/build_vine_hits.py`` scores, and notebook 07 draws again to pair with it."""
    n_problems = check_int("n_problems", n_problems, low=1)
    n_operands = check_int("n_operands", n_operands, low=1)
    seed = check_int("seed", seed)
    problems = env.task.sample_prompts(n_problems, n_operands, split="held_out", seed=seed, unique=True)
    return env.rollouts(problems, seed=seed)


def load_vine_hits(path=None):
    """The first-wrong-step hits on notebook 03's larger sample, cached by
    ``scripts/build_vine_hits.py`` in ``path`` (default ``data/vine_hits``): (hits, meta). Hits in
    long form: ``method``, ``k`` (0 for GRPO), then ``labkit.scoring.first_error_hits``' columns
    plus ``first_error_step`` and ``reward``. Raises if the cache is missing, foreign or stale
    (``labkit.core.cache``)."""
    import pandas as pd

    from labkit.core.cache import read_cache
    from labkit.core.paths import data_path

    meta, files = read_cache(path if path is not None else data_path(VINE_HITS_DIR), script="build_vine_hits.py",
                             files=["hits.csv"], what="cached hits")
    return pd.read_csv(files["hits.csv"]), meta
