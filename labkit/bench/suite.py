"""The benchmark's tasks and the loop that scores every applicable estimator on them.

A ``Task`` is one setting of one world with exact truth, in one of the survey's three families
(section 9.3): *reasoning* (BifurcationChain: exact per-token advantage by dynamic programming),
*agentic* (ToolWorld: exact per-turn advantage by DP over the hidden bug location) and
*multi-agent* (TeamTask's designed cases: exact per-trajectory Shapley value of every agent).
``task.build(seed)`` samples a batch and returns an ``Instance``: the rollouts, the exact truth
at the level it is scored, the deciding positions (where the task has them) and the auxiliary
inputs the task can give an estimator (a vine value function, coalition values, ...).

An estimator *applies* to a task when every option it requires (the ``inputs`` of its registered
spec) is among the task's inputs. One that does not apply, or raises on the task's rollouts,
yields a ``skipped`` (or ``error``) record with the reason; the run goes on.
"""
from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Sequence

import torch

from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, get_estimator
from labkit.credit.judge import effect_mixer
from labkit.core.games import exact_shapley
from labkit.envs import BifurcationChain
from labkit.envs.tabular import exact_truth
from labkit.envs.teamtask import PRESETS, TeamTask
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.features import verifiable_turn_rewards
from labkit.envs.toolworld.truth import exact_hindsight, success_prob
from labkit.learn.critics import BTCritic
from labkit.learn.irl import StepRewardIRL, expert_policy
from labkit.learn.turn_models import ProgressEstimator, policy_logprobs
from labkit.learn.judges import JUDGE_ERROR, noisy_oracle, stand_in_judge, stand_in_step_verifier, stand_in_turn_grades
from labkit.policies import TabularSoftmaxPolicy
from labkit.scoring import rank_correlation, recall_at_k, sign_agreement

from labkit.bench.metrics import gradient_metrics, luck_weight, trajectory_lengths
from labkit.bench import later_inputs
from labkit.bench.records import make_record

__all__ = ["FAMILIES", "Task", "Instance", "SUITES", "lm_task", "chain_task", "toolworld_task", "team_task",
           "suite_tasks", "estimator_names", "teamtask_effects", "teamtask_credit_rule", "applies", "score", "run_cell", "iter_cells"]

FAMILIES = ("reasoning", "agentic", "multi-agent")


@dataclass
class Instance:
    """One sampled batch of a task with its exact truth.

    ``truth`` is (B, T) per-position exact advantage when ``level`` is 'token' (the rollouts'
    mask selects the scored positions), or (B, n) exact Shapley values per agent when ``level``
    is 'agent'. ``targets`` (B, T) bool marks the deciding positions (None where undefined).
    ``inputs`` are what the task can hand an estimator, by option name.
    """

    rollouts: Rollouts
    truth: torch.Tensor
    level: str
    targets: torch.Tensor | None = None
    inputs: dict = field(default_factory=dict)
    # where each input came from, by option name (e.g. "values": "exact V (oracle critic)"),
    # copied into every record so a reader knows what an estimator was fed
    provenance: dict = field(default_factory=dict)
    # the generated length of every trajectory, (B,), and its unit (tokens / turns / agents)
    lengths: torch.Tensor | None = None
    unit: str = "tokens"
    # a tabular policy with its exact dJ/dlogits: gradient cosine and variance are scored
    policy: object = None
    exact_grad: torch.Tensor | None = None
    # (skill, luck) per position, each (B, T): luck weight is scored (ToolWorld)
    skill_luck: tuple | None = None
    # inputs for one estimator only, by estimator name (e.g. SPO's cut value function where the
    # task's ``value_fn`` is a step value function); provenance keys "name.option" describe them
    overrides: dict = field(default_factory=dict)
    # work done before the call to build an estimator's input that it cannot count itself (the
    # log-probabilities an implicit-reward estimator takes), by estimator name; added to its cost
    input_costs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A named task: its family, its parameters (recorded in every record) and ``build(seed)``."""

    name: str
    family: str
    params: dict
    build: Callable[[int], Instance]

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family: expected one of {FAMILIES}, got {self.family!r}")


# the greedy responses ReMax's baseline scores: one per task, sampled with seed + GREEDY_SEED
GREEDY_SEED = 2000


def _engine_inputs(policy, ro: Rollouts, greedy: Rollouts) -> tuple[dict, dict, dict]:
    """(inputs, provenance, input costs) of the engines' estimators that need the policy: the
    greedy response's score per task (ReMax; ``greedy`` holds one greedy episode per group of
    ``ro``, in group order) and sum_a pi(a | s)^2 at every position (the optimal token baselines)."""
    per_group = greedy.scores.to(torch.float64)
    inputs = {"greedy_scores": per_group[ro.group_ids], "sum_pi_squared": policy.sum_pi_squared(ro)}
    provenance = {"greedy_scores": "the policy's greedy (argmax) episode on each task, one sample, scored by the world",
                  "sum_pi_squared": "the tabular policy's sum of squared action probabilities at each recorded state"}
    costs = {"remax": Cost(policy_forwards=greedy.batch_size, env_steps=int(greedy.mask.sum()))}
    return inputs, provenance, costs


# --------------------------------------------------------------------------- the three families
ORACLE = "ORACLE, from the exact DP truth, zero cost"


def _exact_cut_value_fn(truth):
    """A ``CutValueFn`` for SPO that reads the exact V at every cut position (an oracle)."""
    def cut_value_fn(rollouts: Rollouts, cuts: torch.Tensor, k: int):
        if tuple(cuts.shape) != tuple(rollouts.mask.shape):
            raise ValueError(f"cuts: expected shape {tuple(rollouts.mask.shape)}, got {tuple(cuts.shape)}")
        return torch.where(cuts.bool() & rollouts.mask, truth.value(rollouts), 0.0), Cost()
    return cut_value_fn


def _coach_scores(reference: torch.Tensor, mask: torch.Tensor, seed: int) -> torch.Tensor:
    """STAND-IN for MAPPA's coach: ``reference`` (exact credit per position) mapped linearly onto
    0..10 (5 = neutral, 0 / 10 = the batch's largest |reference|), plus N(0, 1) noise, rounded to
    the 11 integer grades."""
    ref = torch.where(mask, reference.to(torch.float64), 0.0)
    scale = float(ref.abs().max())
    centred = 5.0 + 5.0 * ref / scale if scale > 0 else torch.full_like(ref, 5.0)
    return noisy_oracle(centred, noise=1.0, seed=seed, low=0.0, high=10.0, levels=11)


@lru_cache(maxsize=1)
def _lm_reference():
    """The shipped tiny LM and its reference rollouts with cached Monte Carlo truth (loaded once)."""
    # imported here: loading transformers is slow, and only the LM task needs it
    from labkit.envs.arithmetic.lm import ArithmeticLM
    from labkit.envs.arithmetic.truth import load_reference
    env = ArithmeticLM.load()
    ro, meta = load_reference(env)
    return env, ro, meta


@lru_cache(maxsize=1)
def _lm_models():
    """The shipped models notebook 04 feeds the reasoning estimators (loaded once): the process
    and outcome reward models (data/reward_models) and the DPO-tuned and T-REG copies of the tiny
    LM (data/implicit_lm)."""
    from labkit.learn.reward_models import OutcomeRewardModel, ProcessRewardModel
    env = _lm_reference()[0]
    return {"prm": ProcessRewardModel.load(), "orm": OutcomeRewardModel.load(),
            "dpo": env.tuned("dpo"), "treg": env.tuned("treg")}


def _lm_model_inputs(env, ro: Rollouts, seed: int) -> tuple[dict, dict, dict]:
    """(overrides, provenance, input costs) of the estimators notebook 04 feeds from trained
    models: PURE (PRM), RED and ACPO (ORM), SPRO and From r to Q* (DPO copy vs base), T-REG
    (conditioned copy), HICRA (the planning-token labels) and InT (the model's own rewrites)."""
    from labkit.envs.arithmetic.labels import planning_mask
    m = _lm_models()
    base = env.rollout_logprobs(ro)
    tuned = m["dpo"].rollout_logprobs(ro)
    pair = {"logprobs": tuned, "ref_logprobs": base}
    overrides = {"pure": {"step_scores": m["prm"].step_scores},
                 "red": {"scores": m["orm"].prefix_scores},
                 "acpo": {"outcome_model": env.outcome_attribution_fn(m["orm"])},
                 "spro": dict(pair), "dpo_implicit_q": dict(pair),
                 "t_reg": {"better_logprobs": m["treg"].rollout_logprobs(ro, condition="better"),
                           "worse_logprobs": m["treg"].rollout_logprobs(ro, condition="worse")},
                 "hicra": {"planning_mask": planning_mask(ro)},
                 "int_interventions": {"rewrite_fn": env.step_rewrite_fn(seed=seed + 5)}}
    pair_src = {"logprobs": "the DPO-tuned copy of the tiny LM (data/implicit_lm, trained offline)",
                "ref_logprobs": "the base tiny LM (the DPO reference)"}
    provenance = {"pure.step_scores": "process reward model trained offline on Monte Carlo step labels (data/reward_models)",
                  "red.scores": "outcome reward model trained offline, read at every prefix (data/reward_models)",
                  "acpo.outcome_model": "outcome reward model trained offline, attributed over steps (data/reward_models)",
                  **{f"{e}.{k}": v for e in ("spro", "dpo_implicit_q") for k, v in pair_src.items()},
                  "t_reg.better_logprobs": "the T-REG copy of the tiny LM conditioned 'better' (data/implicit_lm)",
                  "t_reg.worse_logprobs": "the T-REG copy of the tiny LM conditioned 'worse' (data/implicit_lm)",
                  "hicra.planning_mask": "the arithmetic task's token roles (operands and the answer mark are planning)",
                  "int_interventions.rewrite_fn": "the tiny LM rewriting a step and finishing from it (Monte Carlo)"}
    # two scoring passes over every rollout (tuned / better and base / worse), done before the call
    tokens = sum(len(p) for p in ro.info["prompt_ids"]) + int(ro.mask.sum())
    two = Cost(policy_forwards=2 * ro.batch_size, policy_tokens=2 * tokens)
    return overrides, provenance, {"spro": two, "dpo_implicit_q": two, "t_reg": two}


def lm_task() -> Task:
    """Reasoning: the tiny arithmetic LM's 32 reference rollouts (one per problem) with their
    cached step-level Monte Carlo truth (V before every step from 256 vines; A_s = V_{s+1} - V_s,
    the outcome after the last step), every token of a step carrying its step's advantage. The
    batch is fixed; the seed varies what the estimators sample. The task offers the model's
    forked vines (VinePPO / Math-Shepherd step values, SPO's cut values; real Monte Carlo cost)
    and a stand-in step verifier (CAPO) reading the exact step correctness, wrong w.p. 0.1; the
    trained models notebook 04 uses (PRM for PURE, ORM for RED / ACPO, the DPO-tuned and T-REG
    copies for SPRO / From r to Q* / T-REG), the planning-token labels (HICRA) and the model's
    step rewrites (InT). The deciding positions are the tokens of each rollout's first wrong step."""
    params = {"env": "ArithmeticLM", "rollouts": "reference (data/, built by scripts/build_lm_truth.py)",
              "truth": "step-level Monte Carlo, 256 vines per step", "n": 32, "group_size": 1}

    def build(seed: int) -> Instance:
        from labkit.envs.arithmetic.truth import truth_step_advantage  # loads transformers: see _lm_reference

        env, ro, meta = _lm_reference()
        # the truth is VinePPO's formula on the cached 256-vine values (as notebooks 02-04 score it)
        adv = truth_step_advantage(ro).double()
        first = ro.truth["first_error_step"].long()
        targets = ro.mask & (ro.step_ids == first[:, None]) & (first[:, None] >= 0)
        inputs = {"value_fn": env.value_fn(seed=seed),
                  "verdicts": stand_in_step_verifier(ro, error_rate=JUDGE_ERROR, seed=seed)}
        provenance = {"value_fn": "vines: k continuations forked from the tiny LM's step prefixes (Monte Carlo)",
                      "spo.value_fn": "vines forked at SPO's cut positions (Monte Carlo)",
                      "verdicts": f"STAND-IN step verifier: the exact step correctness, flipped w.p. {JUDGE_ERROR}"}
        overrides, more, costs = _lm_model_inputs(env, ro, seed)
        # the methods published after the survey (labkit.bench.later_inputs)
        extra, extra_over, extra_src, extra_costs = later_inputs.lm_inputs(env, ro, _lm_models(), seed=seed)
        inputs, overrides, more, costs = inputs | extra, overrides | extra_over, more | extra_src, costs | extra_costs
        engine, engine_costs = env.credit_inputs(ro, seed=seed + GREEDY_SEED)
        inputs |= engine
        more |= {"reward_parts": "the verifier's answer, format and step signals as three reward functions (the "
                                 "outcome is answer and format; the step signal is GDPO's extra)",
                 "greedy_scores": "the tiny LM's greedy answer to each problem, graded by the verifier",
                 "sum_pi_squared": "the tiny LM's sum of squared next-token probabilities at every position"}
        costs |= {"remax": engine_costs["greedy_scores"]}
        return Instance(ro, adv, "token", targets, inputs, provenance | more, lengths=ro.mask.sum(1), unit="tokens",
                        overrides={"spo": {"value_fn": env.cut_value_fn(seed=seed)}} | overrides, input_costs=costs)
    return Task("lm_reference", "reasoning", params, build)


def chain_task(horizon: int, *, n_bifurcations: int = 2, n: int = 64, group_size: int = 8) -> Task:
    """Reasoning: a BifurcationChain played by the uniform tabular policy, exact truth by DP. The
    task offers vine value functions (re-running the chain from recorded states: VinePPO's
    step values and SPO's cut values), the exact V as an oracle critic (GAE, TD(0), POAD, turn
    GAE), the state as GiGPO's anchor key and the policy; gradient metrics use the exact
    dJ/dlogits."""
    params = {"env": "BifurcationChain", "horizon": horizon, "n_bifurcations": n_bifurcations,
              "n": n, "group_size": group_size, "policy": "uniform tabular"}

    def build(seed: int) -> Instance:
        env = BifurcationChain(horizon=horizon, n_bifurcations=n_bifurcations, seed=0)
        policy = TabularSoftmaxPolicy(env.n_states, env.n_actions, init_std=0.0, seed=0)
        ro = env.sample(policy, n, group_size=group_size, seed=seed)
        # the chain's state is its whole observation: GiGPO's anchor key of every step (one
        # token per step) is the state index, which the sampler records but does not key
        n_steps = ro.view(ro.rewards, "step", "sum")[1].sum(1).tolist()
        ro = ro.with_(anchor_keys=[row[:k] for row, k in zip(ro.states.tolist(), n_steps)])
        truth = exact_truth(env.mdp(), policy)
        adv = truth.advantage(ro)
        v = truth.value(ro)
        # the chain is one turn: turn-level GAE reads the value at the turn's first token (a
        # value baseline). ArCHer gets no Q / V: its turn-level A = Q - V of the first action
        # alone is no credit for a one-turn world, so it is skipped rather than scored 0.
        v_turn = ro.view(v, "turn", "first")[0]
        # no ``env``: the chain cannot restore a hidden state and play on, so C3 / CCPO's
        # re-execution does not apply (a skip with the reason, not an error)
        inputs = {"value_fn": env.vine_value_fn(policy, seed=seed), "policy": policy, "values": v}
        engine, engine_src, engine_costs = _engine_inputs(
            policy, ro, env.sample(policy.greedy(), n // group_size, group_size=1, seed=seed + GREEDY_SEED))
        inputs |= engine
        provenance = engine_src | {"value_fn": "vine: k continuations re-run from the recorded state (Monte Carlo)",
                      "spo.value_fn": "vine at SPO's cut positions (Monte Carlo)",
                      "gigpo.anchor_keys": "the chain's state index at every step (its whole observation)",
                      "values": f"exact V per token as the critic ({ORACLE})",
                      "turn_gae.values": f"exact V at the turn's start as the critic ({ORACLE})"}
        # the methods published after the survey (labkit.bench.later_inputs)
        extra, extra_over, extra_src, extra_costs = later_inputs.chain_inputs(env, policy, ro, seed=seed)
        return Instance(ro, adv, "token", ro.truth.get("decisive"), inputs | extra, provenance | extra_src,
                        lengths=ro.mask.sum(1), unit="tokens", policy=policy, exact_grad=truth.grad,
                        overrides={"spo": {"value_fn": env.cut_value_fn(policy, seed=seed)},
                                   "turn_gae": {"values": v_turn}} | extra_over,
                        input_costs=engine_costs | extra_costs)
    return Task(f"chain_T{horizon}", "reasoning", params, build)


# the learned turn models' history batch: HISTORY_TASKS tasks x 8 episodes sampled with seed +
# HISTORY_SEED, never the scored batch
HISTORY_SEED = 1000
HISTORY_TASKS = 32


@lru_cache(maxsize=16)
def _expert_actions(n_files: int, max_turns: int, noise: float) -> tuple[int, ...]:
    """StepAgent's expert on one ToolWorld setting: the memoryless policy ``expert_policy``'s
    policy iteration finds (three candidates per observation), as its action per observation."""
    env = ToolWorld(n_files, max_turns=max_turns, mislead=noise, noise=noise, flaky=noise)
    return tuple(int(a) for a in expert_policy(env, candidates=3)[1]["actions"])


def _toolworld_model_inputs(env, policy, truth, ro: Rollouts, seed: int) -> tuple[dict, dict]:
    """(overrides, provenance) of the turn estimators notebooks 07 and 08 feed from learned models
    and the world's own signals: IGPO, ITPO, SPA-RL, SWEET-RL, StepAgent, Turn-Level Reward Design."""
    from labkit.learn.irl import policy_from_actions
    hist = env.sample(policy, HISTORY_TASKS, group_size=8, seed=seed + HISTORY_SEED)
    pi = policy.probs().detach()
    expert = policy_from_actions(env, list(_expert_actions(env.n_files, env.max_turns, float(env.noise))))
    demos = env.sample(expert, 64, group_size=1, seed=seed + HISTORY_SEED + 1)
    uniform = TabularSoftmaxPolicy(env.n_obs, env.n_actions, init_std=0.0, seed=0)
    overrides = {"igpo": {"success_prob": success_prob(env, truth, ro)},
                 "itpo": {"logprobs": policy_logprobs(policy, ro), "ref_logprobs": policy_logprobs(uniform, ro)},
                 "spa_rl": {"contributions": ProgressEstimator.for_env(env).fit(hist)},
                 "sweet_rl": {"critic": BTCritic.for_env(env, privileged=True).fit(hist, hist.truth["hidden_states"]),
                              "pi": pi},
                 "step_agent": {"reward": StepRewardIRL.for_env(env).fit(demos, pi, seed=1)},
                 "turn_reward_design": {"turn_rewards": lambda r: verifiable_turn_rewards(env, r)}}
    history = f"fitted on a separate history batch of the same agent ({hist.batch_size} episodes, seed + {HISTORY_SEED})"
    provenance = {"igpo.success_prob": f"exact success probability after every turn from the DP ({ORACLE}; stands "
                                       "in for the policy's belief in the answer)",
                  "itpo.logprobs": "the scripted agent's own log-probabilities",
                  "itpo.ref_logprobs": "the uniform policy as pi_ref (the bench trains nothing: the scripted agent "
                                       "plays the tuned policy)",
                  "spa_rl.contributions": f"progress estimator {history}",
                  "sweet_rl.critic": f"privileged Bradley-Terry critic keyed by the hidden state, {history}",
                  "sweet_rl.pi": "the agent's policy table (centres the critic's advantage)",
                  "step_agent.reward": f"inverse-RL step reward fitted on {demos.batch_size} demos of the "
                                       "policy-iteration expert (labkit.learn.irl.expert_policy)",
                  "turn_reward_design.turn_rewards": "the world's verifiable turn rewards (tests run, files "
                                                     "edited, ...: labkit.envs.toolworld.features)"}
    return overrides, provenance


def toolworld_task(max_turns: int, *, noise: float = 0.2, n_files: int = 5, strength: float = 3.0,
                   n_tasks: int = 8, group_size: int = 8) -> Task:
    """Agentic: a ToolWorld whose three tools share one error rate ``noise``, played by the
    scripted agent of notebook 05 (``strength`` 3: the sensible action about 0.6 likely); exact
    per-turn advantage by DP over the hidden bug; the decisive turns are the world's own. The task
    offers the env, the policy and the recorded hidden states (re-execution estimators), the exact
    V and Q as an oracle critic and exact step values (VinePPO / Math-Shepherd with perfect
    values), the exact hindsight ratio (HCA / HCAPO) and stand-in judges with error rate 0.1
    that judge from the exact advantage (CriticSearch / CAPO verdicts, TARL grades). As notebooks
    07 and 08 do, it also fits the learned turn models on a separate history batch of the same
    agent (SPA-RL's progress estimator, SWEET-RL's privileged critic), StepAgent's step reward on
    demos of the policy-iteration expert, and offers ITPO the agent's log-probabilities against
    the uniform policy as pi_ref, the world's verifiable turn rewards and IGPO's success
    probability (the exact DP one, an oracle)."""
    params = {"env": "ToolWorld", "max_turns": max_turns, "noise": noise, "n_files": n_files,
              "strength": strength, "n_tasks": n_tasks, "group_size": group_size}

    def build(seed: int) -> Instance:
        env = ToolWorld(n_files, max_turns=max_turns, mislead=noise, noise=noise, flaky=noise)
        policy = env.scripted_policy(strength)
        ro = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
        truth = env.truth(policy)
        adv = truth.advantage(ro).to(ro.rewards.dtype)
        hidden = ro.truth["hidden_states"]
        skill, luck = truth.skill_luck(ro)
        v = truth.value(ro)
        # LaRe reads one reward per step (B, S), iStar one per position (B, T): the same numbers
        token_rewards = torch.where(ro.mask, noisy_oracle(skill + luck, noise=JUDGE_ERROR, seed=seed), 0.0)
        # turn-level inputs are (B, N) with N the batch's longest episode (<= max_turns)
        turn = lambda x: ro.view(x, "turn", "first")[0]  # noqa: E731
        inputs = {"env": env, "policy": policy, "hidden_states": hidden,
                  "values": v, "q_values": turn(truth.q_value(ro)), "v_values": turn(v),
                  "value_fn": truth.step_value_fn(),
                  "hindsight": exact_hindsight(env, policy, ro, hidden),
                  "verdicts": stand_in_judge(ro, advantage=adv, error_rate=JUDGE_ERROR, seed=seed),
                  "grades": stand_in_turn_grades(ro, advantage=adv, error_rate=JUDGE_ERROR, seed=seed),
                  "judge_scores": _coach_scores(adv, ro.mask, seed),
                  "step_rewards": ro.view(token_rewards, "step", "first")[0]}
        provenance = {"env, policy, hidden_states": "the simulator itself (re-execution from saved hidden states)",
                      "values": f"exact V as the critic ({ORACLE})",
                      "turn_gae.values": f"exact V at every turn as the critic ({ORACLE})",
                      "q_values, v_values": f"exact Q and V as the critic ({ORACLE})",
                      "value_fn": f"exact V at every turn ({ORACLE}; stands in for Monte Carlo vines)",
                      "hindsight": f"exact h(a | s, Z) by Bayes on the DP ({ORACLE}; reads the hidden state)",
                      "verdicts": f"STAND-IN judge: sign of the exact advantage, flipped w.p. {JUDGE_ERROR}",
                      "grades": f"STAND-IN judge: -1/0/+1 grade of the exact advantage, wrong w.p. {JUDGE_ERROR}",
                      "judge_scores": "STAND-IN coach: 0..10 score from the exact advantage + N(0, 1) noise",
                      "step_rewards": f"STAND-IN reward model: exact skill + luck per turn (they sum to the return "
                                      f"minus V_0) + N(0, {JUDGE_ERROR}^2) noise",
                      "gigpo.anchor_keys": "the observation each turn starts from (the world's own)",
                      "spo.value_fn": f"exact V at SPO's cut positions ({ORACLE}; stands in for Monte Carlo vines)"}
        present = ro.view(ro.rewards, "turn", "first")[1]
        engine, engine_src, engine_costs = _engine_inputs(
            policy, ro, env.sample(policy.greedy(), n_tasks, group_size=1, seed=seed + GREEDY_SEED,
                                   bugs=ro.truth["bug"][::group_size]))
        # no reward_parts: the world's reward is one function (the submit's outcome), so GDPO is skipped
        inputs |= engine
        provenance |= engine_src
        overrides, more = _toolworld_model_inputs(env, policy, truth, ro, seed)
        # the methods published after the survey (labkit.bench.later_inputs)
        later, later_over, later_src, later_costs = later_inputs.toolworld_inputs(env, policy, truth, ro, seed=seed)
        inputs, overrides, more = inputs | later, overrides | later_over, more | later_src
        return Instance(ro, adv, "token", ro.truth.get("decisive"), inputs, provenance | more,
                        lengths=present.sum(1), unit="turns", policy=policy, exact_grad=truth.grad,
                        skill_luck=(skill, luck), overrides={"spo": {"value_fn": _exact_cut_value_fn(truth)},
                                                                "turn_gae": {"values": turn(v)},
                                                                "istar": {"step_rewards": token_rewards}} | overrides,
                        input_costs=engine_costs | later_costs)
    return Task(f"toolworld_T{max_turns}_noise{noise:g}", "agentic", params, build)


def teamtask_effects(state: dict, agents: list) -> list[int]:
    """What TeamTask's rules say each agent's action did, read off an episode's state
    (``TeamTask.global_states``): +1 helped (the plan or method names the task type, a review),
    -1 acted against the team (a sabotage), 0 nothing that matters (a wrong plan or method, an
    approval without review, a free rider's move, cooperation). One rule looks across agents:
    when no solver used the task's method no draft can be right, so nothing helped."""
    task = state["task"]
    helps = {"planner": f"plan {task}", "solver": f"method {task}", "checker": "review"}
    roles, actions = state["roles"], state["actions"]
    drafted = any(roles[a] == "solver" and actions[a] == helps["solver"] for a in agents)
    out = []
    for a in agents:
        if roles[a] == "saboteur":
            out.append(-1 if actions[a] == "sabotage" else 0)
        else:
            out.append(int(drafted and helps.get(roles[a]) == actions[a]))
    return out


def teamtask_credit_rule(q: dict, state: dict, agents: list) -> dict:
    """A written credit function for ``credit_function`` (QLLM) on TeamTask, as an author who read
    the task's rules would write it: the effect of every agent's action read off the state
    (``teamtask_effects``), mixed with the agents' utilities ``q`` by
    ``labkit.credit.judge.effect_mixer`` (helpers share, a harmful action is charged)."""
    credit = effect_mixer(torch.tensor([q[a] for a in agents], dtype=torch.float64),
                          torch.tensor(teamtask_effects(state, agents)))
    return dict(zip(agents, credit.tolist()))


def team_task(case: str, *, strength: float = 4.0, n_tasks: int = 8, group_size: int = 8) -> Task:
    """Multi-agent: one of TeamTask's designed cases played by its scripted team; truth is the
    exact Shapley value of every agent in every trajectory (from the exact coalition values,
    which the task also offers to estimators as ``coalition_values``); LLM-MCA gets a stand-in
    judge's per-agent credit (the exact Shapley value plus Gaussian noise 0.1); QLLM's credit
    function is the written rule ``teamtask_credit_rule``, which reads each episode's state
    (``TeamTask.global_states``) and the agents' batch utilities, never a coalition value."""
    params = {"env": "TeamTask", "case": case, "strength": strength, "n_tasks": n_tasks, "group_size": group_size}

    def build(seed: int) -> Instance:
        env = TeamTask.preset(case)
        ro = env.sample(env.scripted_policies(strength), n_tasks, group_size=group_size, seed=seed)
        phi = exact_shapley(env.coalition_values(ro))
        inputs = {"coalition_values": env.coalition_values,
                  "judge_credit": noisy_oracle(phi, noise=JUDGE_ERROR, seed=seed),
                  # one position per agent: the coach scores each agent's action
                  "judge_scores": _coach_scores(phi, ro.mask, seed)}
        provenance = {"coalition_values": "exact team reward of every coalition (the world's own)",
                      "credit_function.fn": "STAND-IN written credit function (QLLM's LLM-written code): the "
                            "effect of each agent's action read off the state, mixed with the agents' batch "
                            "utilities (labkit.bench.suite.teamtask_credit_rule)",
                      "credit_function.states": "each episode's task, roles, observations, actions and outcome "
                            "(the world's own: TeamTask.global_states)",
                      "judge_credit": f"STAND-IN judge: exact Shapley value + N(0, {JUDGE_ERROR}^2) noise",
                      "judge_scores": "STAND-IN coach: 0..10 score from the exact Shapley value + N(0, 1) noise"}
        return Instance(ro, phi, "agent", None, inputs, provenance, lengths=ro.mask.sum(1), unit="agents",
                        overrides={"credit_function": {"fn": teamtask_credit_rule,
                                                            "states": env.global_states(ro)}})
    return Task(f"team_{case}", "multi-agent", params, build)


# Quick: a few small tasks per family, two seeds; the whole suite runs in well under 3 minutes on
# two cores. Tiny: one task per family with small batches, for tests and smoke runs. Full: the
# tiny LM's reference rollouts, the chain at four horizons, ToolWorld over turns x noise and
# every designed TeamTask case, three seeds (scripts/build_bench_full.py caches it in data/).
FULL_CHAIN_HORIZONS = (10, 40, 100, 200)
FULL_TOOL_TURNS = (10, 20, 50)
FULL_TOOL_NOISE = (0.0, 0.2, 0.4)


def _full_tasks() -> list[Task]:
    return ([lm_task()] + [chain_task(T) for T in FULL_CHAIN_HORIZONS]
            + [toolworld_task(T, noise=z) for T in FULL_TOOL_TURNS for z in FULL_TOOL_NOISE]
            + [team_task(case) for case in PRESETS])


SUITES: dict[str, tuple[Callable[[], list[Task]], tuple[int, ...]]] = {
    "quick": (lambda: [chain_task(10), chain_task(40), toolworld_task(20),
                       team_task("redundancy"), team_task("free_riding"), team_task("sabotage")], (0, 1)),
    "tiny": (lambda: [chain_task(6, n=16), toolworld_task(8, n_tasks=2, group_size=4),
                      team_task("redundancy", n_tasks=2, group_size=4)], (0,)),
    "full": (_full_tasks, (0, 1, 2)),
}


def suite_tasks(suite: str) -> tuple[list[Task], tuple[int, ...]]:
    """The tasks and seeds of a named suite; a ValueError naming ``suite`` for an unknown one."""
    if suite not in SUITES:
        raise ValueError(f"suite: no suite {suite!r}; known: {sorted(SUITES)}")
    make, seeds = SUITES[suite]
    return make(), seeds


def estimator_names(spec: str | Sequence[str] = "all") -> list[str]:
    """'all' (every registered estimator), a comma-separated string or a list of names; a
    ValueError naming ``estimators`` for a name that is not registered."""
    if isinstance(spec, str):
        if spec.strip() == "all":
            return sorted(ESTIMATORS)
        spec = [s.strip() for s in spec.split(",") if s.strip()]
    names = list(spec)
    if not names:
        raise ValueError("estimators: name at least one estimator, or 'all'")
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        raise ValueError(f"estimators: no estimator {unknown[0]!r}; known: {sorted(ESTIMATORS)}")
    return names


def _signature(fn: Callable) -> tuple[list[str], set[str], bool]:
    """(required options, all options, takes **kwargs) of an estimator. A registered estimator's
    required options are its spec's ``inputs`` (an option may default to None and still be
    needed); any other ``fn(rollouts, **options)`` requires the options without a default."""
    params = inspect.signature(fn).parameters
    skip = {"rollouts"}
    spec = getattr(fn, "spec", None)
    if spec is not None:
        required = list(spec.inputs)
    else:
        required = [k for k, p in params.items() if k not in skip and p.default is inspect.Parameter.empty
                    and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    options = {k for k, p in params.items() if k not in skip and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}
    return required, options, any(p.kind is p.VAR_KEYWORD for p in params.values())


def applies(fn: Callable, instance: Instance) -> str | None:
    """None if the estimator can run on the instance (the task gives every option it requires:
    a registered estimator's spec ``inputs``; and the task's rollouts carry every field its spec
    ``needs``), otherwise the reason it cannot."""
    required, _, _ = _signature(fn)
    missing = [k for k in required if k not in instance.inputs]
    if missing:
        return f"needs {', '.join(missing)}, which this task does not provide"
    spec = getattr(fn, "spec", None)
    fields = spec.missing_fields(instance.rollouts) if spec is not None else []
    if fields:
        return f"needs {', '.join('rollouts.' + f for f in fields)}, which this task's rollouts do not carry"
    return None


def _constant(values: torch.Tensor, mask: torch.Tensor) -> bool:
    v = values[mask]
    return v.numel() < 2 or bool((v == v[0]).all())


def score(instance: Instance, credit: Credit) -> dict:
    """Rank correlation and sign agreement with the exact truth, and recall@k of the deciding
    positions where the task has them (None otherwise). Rank correlation is None when the exact
    truth is constant over the scored positions (e.g. a TeamTask batch where every team
    succeeded and every agent's Shapley value is 1/3): there is no ranking to recover, and
    ``labkit.scoring``'s 0 there would count against a perfect estimator."""
    if instance.level == "agent":
        ro, n = instance.rollouts, instance.truth.shape[1]
        vals = credit.values if credit.level == "agent" else credit.at(ro, "agent", "mean")[0]
        est = torch.zeros(ro.batch_size, n, dtype=torch.float64)
        k = min(n, vals.shape[1])
        est[:, :k] = vals.double()[:, :k]
        mask = torch.ones(ro.batch_size, n, dtype=torch.bool)
        return {"rank_correlation": None if _constant(instance.truth, mask) else rank_correlation(est, instance.truth, mask),
                "sign_agreement": sign_agreement(est, instance.truth, mask), "recall_at_k": None}
    m = instance.rollouts.mask
    out = {"rank_correlation": None if _constant(instance.truth, m) else rank_correlation(credit, instance.truth, m),
           "sign_agreement": sign_agreement(credit, instance.truth, m), "recall_at_k": None}
    # recall@k is defined only where some trajectory reached a deciding position
    if instance.targets is not None and bool((instance.targets & m).any()):
        out["recall_at_k"] = recall_at_k(credit, m, instance.targets)
    return out


def _clamped(metrics: dict) -> dict:
    # float round-off can put a perfect correlation at 1.0000000000000002, outside the schema's range
    return {k: (None if v is None else min(1.0, max(-1.0, float(v)))) for k, v in metrics.items()}



def _name(estimator: str | Callable) -> str:
    if isinstance(estimator, str):
        return estimator
    return getattr(estimator, "estimator_name", None) or getattr(estimator, "__name__", "estimator")


def _provenance(instance: Instance, name: str, passed: Iterable[str]) -> dict:
    """{option: where it came from} for the options handed to estimator ``name``."""
    out = {}
    for k in passed:
        desc = instance.provenance.get(f"{name}.{k}")
        if desc is None:
            desc = next((d for key, d in instance.provenance.items()
                         if "." not in key and k in [p.strip() for p in key.split(",")]), None)
        if desc is not None:
            out[k] = desc
    return out


def _extra_metrics(instance: Instance, credit: Credit) -> dict:
    """Gradient cosine / variance (tabular policy with exact gradient) and luck weight (skill /
    luck split); None where the task does not define them or the credit is not per token."""
    out = {"gradient_cosine": None, "gradient_variance": None, "luck_weight": None}
    if instance.level != "token":
        return out
    ro = instance.rollouts
    if instance.policy is not None and instance.exact_grad is not None:
        n_batches = next((n for n in (4, 2) if ro.batch_size % n == 0), None)
        if n_batches is not None:
            g = gradient_metrics(instance.policy, ro, credit, instance.exact_grad, n_batches=n_batches)
            out["gradient_cosine"] = min(1.0, max(-1.0, g["gradient_cosine"]))
            out["gradient_variance"] = g["gradient_variance"]
    if instance.skill_luck is not None:
        out["luck_weight"] = luck_weight(ro, credit, *instance.skill_luck)
    return out


def run_cell(suite: str, task: Task, estimator: str | Callable, seed: int, instance: Instance | None = None) -> dict:
    """One record: ``estimator`` (a registered name, or any ``fn(rollouts, **options) -> Credit``)
    on ``task``'s batch for ``seed``, scored against exact truth; a skipped record (with the
    reason) when it does not apply or raises. ``instance`` reuses an already sampled batch.
    The record says where every input came from (``inputs``) and how long the batch's
    trajectories were (``trajectory_lengths`` in ``unit``)."""
    name = _name(estimator)
    fn = get_estimator(estimator) if isinstance(estimator, str) else estimator
    inst = instance if instance is not None else task.build(seed)
    ro = inst.rollouts
    lengths = inst.lengths if inst.lengths is not None else ro.mask.sum(1)
    base = dict(suite=suite, task=task.name, family=task.family, task_params=task.params, estimator=name, seed=seed,
                trajectory_lengths=trajectory_lengths(lengths), unit=inst.unit)
    sampled = {"sampled_trajectories": int(ro.batch_size), "sampled_env_steps": int(ro.mask.sum())}
    view = Instance(ro, inst.truth, inst.level, inst.targets, inst.inputs | inst.overrides.get(name, {}))
    reason = applies(fn, view)
    if reason is not None:
        return make_record(**base, reason=reason, cost=sampled)
    _, options, takes_any = _signature(fn)
    kwargs = {k: v for k, v in view.inputs.items() if takes_any or k in options}
    base["inputs"] = _provenance(inst, name, [*kwargs, *(["anchor_keys"] if ro.anchor_keys is not None else [])])
    t0 = time.perf_counter()
    try:
        credit = fn(ro, **kwargs)
        wall = time.perf_counter() - t0
        metrics = _clamped(score(inst, credit))
        metrics.update(_extra_metrics(inst, credit))
    except Exception as e:  # recorded, not fatal: one estimator never stops a run
        msg = str(e).splitlines()[0] if str(e) else ""
        return make_record(**base, reason=f"{type(e).__name__}: {msg}"[:300], error=True,
                           cost=sampled | {"wall_seconds": time.perf_counter() - t0})
    cost = credit.cost + inst.input_costs[name] if name in inst.input_costs else credit.cost
    return make_record(**base, granularity=credit.level, metrics=metrics,
                       cost=sampled | cost.as_dict() | {"wall_seconds": wall})


def iter_cells(suite: str, estimators: Iterable[str]) -> Iterator[tuple[Task, str, int]]:
    """Every (task, estimator, seed) cell of a suite, task-major so a batch is sampled once."""
    tasks, seeds = suite_tasks(suite)
    names = list(estimators)
    for task in tasks:
        for seed in seeds:
            for name in names:
                yield task, name, seed
