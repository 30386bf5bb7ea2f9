"""What the benchmark's tasks hand the methods published after the survey: functions returning
``(inputs, overrides, provenance, input costs)`` in the shape the task builders of
``labkit.bench.suite`` merge into an ``Instance``. Notebook 04's roster
(``labkit.course.reasoning_roster.later_methods``) reads the reasoning ones, so the notebook and
the benchmark run each method on the same inputs. ``toolworld_inputs`` merges the agentic ones
(a privileged teacher and a skill-conditioned policy, the success probability, ...; each
function below says what it gives and where it comes from).

* DelTA: the log-prob gradient of every token (``token_gradients``): exact from the tabular
  policy's table, the output layer's from the tiny LM (one scoring pass);
* GRAIL on the LM: the model's own answer log-probability to differentiate (``outcome_model``);
* OmegaPRM, TreeRL, APPO: vines forked at any position they pick (``fork_value_fn``);
* SCRL on the LM: every intermediate sum checked against the true partial sum;
* PRIME on the LM: implicit process rewards, ``PRIME_BETA`` x log pi_dpo / pi_base;
* RUDDER: a return predictor at every prefix (a table fitted on a history batch on the chain,
  the outcome reward model on the LM); Progress Advantage: a tuned policy's log-probabilities
  against its start; SC-GRPO: a stand-in self-conditioned policy;
* on ToolWorld, TRIAGE and Rubric-Grounded RL: a stand-in judge's role of every turn and a
  stand-in grader's verdicts on a written rubric (``toolworld_judge_inputs``).
"""
from __future__ import annotations

import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.credit.search_trees import subproblem_verdicts
from labkit.credit.token_weights import answer_saliency_fn, lm_token_gradients, tabular_token_gradients
from labkit.credit.traces import fit_return_table, self_conditioned_logprobs, trained_policy
from labkit.envs.toolworld.truth import success_prob
from labkit.learn.judges import (INFO_THRESHOLD, JUDGE_ERROR, ROLE_THRESHOLD, RUBRIC_CRITERIA, RUBRIC_WEIGHTS,
                                 belief_movement, stand_in_rubric_verdicts, stand_in_turn_roles)

__all__ = ["PRIME_BETA", "HISTORY_SEED", "TRAIN_SEED", "chain_inputs", "lm_inputs", "TEACHER_TAU", "SKILL_BONUS",
           "toolworld_teacher_inputs", "toolworld_information_inputs", "toolworld_judge_inputs",
           "toolworld_verification_inputs", "toolworld_inputs"]

PRIME_BETA = 0.05    # the implicit-reward scale (PRIME's beta)
HISTORY_SEED = 1000  # the history batch RUDDER's table is fitted on: seed + HISTORY_SEED, never the scored batch
TRAIN_SEED = 3000    # the batches Progress Advantage's policy is trained on: seed + TRAIN_SEED, + 1, ...


def _scored_tokens(rollouts: Rollouts) -> int:
    """Token positions one forward pass over every rollout (prompt + response) processes."""
    return sum(len(p) for p in rollouts.info["prompt_ids"]) + int(rollouts.mask.sum())


def chain_inputs(env, policy, rollouts: Rollouts, *, seed: int = 0) -> tuple[dict, dict, dict, dict]:
    """The BifurcationChain task's inputs for the later methods, ``policy`` the tabular policy
    that sampled ``rollouts``."""
    ro = rollouts
    history = env.sample(policy, ro.batch_size, group_size=8, seed=seed + HISTORY_SEED)
    predict, mean = fit_return_table(history, env.n_states, env.n_actions)
    trained = trained_policy(env, policy, seed=seed + TRAIN_SEED)
    with torch.no_grad():
        ref = torch.where(ro.mask, policy.log_prob(ro.states, ro.tokens).to(torch.float64), 0.0)
        lp = torch.where(ro.mask, trained.log_prob(ro.states, ro.tokens).to(torch.float64), 0.0)
    inputs = {"fork_value_fn": env.cut_value_fn(policy, seed=seed), "token_gradients": tabular_token_gradients(policy)}
    overrides = {
        "rudder": {"scores": predict, "prompt_scores": torch.full((ro.batch_size,), mean, dtype=torch.float64)},
        "progress_advantage": {"logprobs": lp, "ref_logprobs": ref},
        "sc_grpo": {"conditioned_logprobs": self_conditioned_logprobs(policy, ro), "logprobs": ref}}
    provenance = {
        "fork_value_fn": "vines re-run from the recorded state at each fork position (Monte Carlo)",
        "token_gradients": "the tabular policy's exact log-prob gradient of every token, e_{s,a} - pi(.|s)",
        "rudder.scores": f"mean return per (state, action) fitted on a history batch of the same policy "
                         f"({history.batch_size} episodes, seed + {HISTORY_SEED})",
        "rudder.prompt_scores": "the history batch's mean return (the prediction before any action)",
        "progress_advantage.logprobs": "the uniform policy after 10 sampled GRPO policy-gradient steps on fresh "
                                       f"batches of 64 episodes (seed + {TRAIN_SEED}, ...): the 'RL-trained' policy",
        "progress_advantage.ref_logprobs": "the uniform policy (the reference RL started from)",
        "sc_grpo.conditioned_logprobs": "STAND-IN self-conditioned policy: the policy mixed 0.5 with the action the "
                                        "group's first correct trajectory took in the same state",
        "sc_grpo.logprobs": "the sampling policy (uniform)"}
    return inputs, overrides, provenance, {}


def lm_inputs(env, rollouts: Rollouts, models: dict, *, seed: int = 0) -> tuple[dict, dict, dict, dict]:
    """The tiny LM task's inputs for the later methods; ``models`` holds the shipped outcome
    reward model (``"orm"``) and the DPO-tuned and T-REG copies (``"dpo"``, ``"treg"``)."""
    ro = rollouts
    base, dpo, treg = env.rollout_logprobs(ro), models["dpo"].rollout_logprobs(ro), models["treg"]
    two = Cost(policy_forwards=2 * ro.batch_size, policy_tokens=2 * _scored_tokens(ro))
    inputs = {"token_gradients": lm_token_gradients(env.model, pad_id=env.pad_id),
              "fork_value_fn": env.cut_value_fn(seed=seed),
              "subproblem_scores": subproblem_verdicts(env, ro),
              "implicit_rewards": torch.where(ro.mask, PRIME_BETA * (dpo - base), 0.0)}
    overrides = {"grail": {"outcome_model": answer_saliency_fn(env.model)},
                 "rudder": {"scores": models["orm"].prefix_scores},
                 "progress_advantage": {"logprobs": dpo, "ref_logprobs": base},
                 "sc_grpo": {"conditioned_logprobs": treg.rollout_logprobs(ro, condition="better"),
                             "logprobs": treg.rollout_logprobs(ro)}}
    provenance = {
        "token_gradients": "the tiny LM's output-layer gradient of every token's log-prob, (e_v - pi) h^T (one "
                           "scoring pass)",
        "grail.outcome_model": "the tiny LM's own log-probability of its final answer step, differentiated with "
                               "respect to the generated tokens' input embeddings (gradient x input)",
        "fork_value_fn": "vines forked from the tiny LM's prefix before each fork position (Monte Carlo)",
        "subproblem_scores": "the arithmetic verifier: each step's result against the true partial sum, the answer "
                             "against the true answer (exact, rule-based)",
        "implicit_rewards": f"implicit PRM: {PRIME_BETA} * log-ratio of the DPO-tuned copy of the tiny LM "
                            "(data/implicit_lm, trained offline) to the base LM",
        "rudder.scores": "outcome reward model trained offline, read at every prefix (data/reward_models)",
        "progress_advantage.logprobs": "the DPO-tuned copy of the tiny LM (stands in for an RL-trained one; "
                                       "data/implicit_lm)",
        "progress_advantage.ref_logprobs": "the base tiny LM (the reference)",
        "sc_grpo.conditioned_logprobs": "STAND-IN self-conditioning: the T-REG copy after its 'accepted completion "
                                        "follows' token (data/implicit_lm)",
        "sc_grpo.logprobs": "the T-REG copy without a conditioning token"}
    costs = {"delta": Cost(policy_forwards=ro.batch_size, policy_tokens=_scored_tokens(ro)),
             "prime": two, "progress_advantage": two, "sc_grpo": two}
    return inputs, overrides, provenance, costs


TEACHER_TAU = 0.1   # the stand-in teacher's temperature on Q (ToolWorld's Q is a success probability)
SKILL_BONUS = 2.0   # the logit bonus the stand-in skill puts on the actions it names


def toolworld_teacher_inputs(env, policy, truth, rollouts: Rollouts, *, seed: int = 0) -> tuple[dict, dict, dict, dict]:
    """The ToolWorld task's inputs for the self-distillation methods (SDAR, CRAFT, OPID):
    the stand-in privileged teacher's log-probabilities of every taken action (the student tilted
    by the exact Q of the hidden state) and, for OPID only, the log-probabilities under the
    student conditioned on the group's hindsight skill. ``policy`` sampled ``rollouts`` and
    ``truth`` is its exact DP; ``seed`` is unused (both producers are deterministic)."""
    from labkit.envs.toolworld.teacher import skill_conditioned_logprobs, teacher_logprobs
    ro = rollouts
    inputs = {"teacher_logprobs": teacher_logprobs(env, policy, truth, ro, tau=TEACHER_TAU)}
    overrides = {"opid": {"conditioned_logprobs": skill_conditioned_logprobs(env, policy, ro, bonus=SKILL_BONUS)}}
    provenance = {
        "teacher_logprobs": f"STAND-IN privileged teacher: the agent's own policy tilted by the exact Q of the hidden "
                            f"state, log pi_T = log pi_S + Q_t(h, .) / {TEACHER_TAU} - log Z (built from the exact "
                            f"DP truth; one teacher scoring pass per rollout)",
        "opid.conditioned_logprobs": f"STAND-IN skill writer and skill-conditioned policy: the file the group's "
                                     f"successful episodes edited ('open it, edit it, submit'), the agent's logits "
                                     f"+ {SKILL_BONUS} on those actions (no success in the group: no skill, the "
                                     f"agent's own log-probabilities)"}
    one = Cost(policy_forwards=ro.batch_size, policy_tokens=int(ro.mask.sum()))
    costs = {"sdar": one, "craft": one, "opid": one}
    return inputs, overrides, provenance, costs


def toolworld_information_inputs(env, policy, truth, rollouts: Rollouts, *, seed: int = 0
                                 ) -> tuple[dict, dict, dict, dict]:
    """The ToolWorld task's inputs for A2TGPO: the success probability after every turn, the same
    exact DP one IGPO is handed (``policy`` sampled ``rollouts``, ``truth`` = ``env.truth(policy)``;
    ``seed`` is unused: nothing is sampled)."""
    overrides = {"a2tgpo": {"success_prob": success_prob(env, truth, rollouts)}}
    provenance = {"a2tgpo.success_prob": "exact success probability after every turn from the DP (ORACLE, from the "
                                         "exact DP truth, zero cost; stands in for the policy's belief in the answer)"}
    return {}, overrides, provenance, {}


# --------------------------------------------------------------------------- ToolWorld: TRIAGE's roles, a rubric grader


def toolworld_judge_inputs(env, policy, truth, rollouts: Rollouts, *, seed: int = 0) -> tuple[dict, dict, dict, dict]:
    """The ToolWorld task's judge inputs for TRIAGE (a role per turn) and Rubric-Grounded RL (a
    rubric per episode), ``truth`` the exact DP of ``policy`` (``env.truth(policy)``) that sampled
    ``rollouts``. Both judges are stand-ins with error rate ``JUDGE_ERROR``, seeded with ``seed``
    like the task's other judges (so TRIAGE's roles go wrong on the same turns as TARL's grades:
    a paired comparison). Each judge reads a trajectory once: one auxiliary call per trajectory."""
    ro = rollouts
    roles = stand_in_turn_roles(ro, advantage=truth.advantage(ro), information=belief_movement(env, truth, ro),
                                error_rate=JUDGE_ERROR, seed=seed)
    verdicts = stand_in_rubric_verdicts(env, ro, error_rate=JUDGE_ERROR, seed=seed)
    overrides = {"triage": {"roles": roles},
                 "rubric_rl": {"rubric_verdicts": verdicts,
                               "rubric_weights": torch.tensor(RUBRIC_WEIGHTS, dtype=torch.float64)}}
    provenance = {
        "triage.roles": f"STAND-IN judge: decisive / regression where the exact advantage is above {ROLE_THRESHOLD} / "
                        f"below -{ROLE_THRESHOLD}, else exploration where the turn moved the exact belief over the "
                        f"buggy file by more than {INFO_THRESHOLD} (total variation), else plumbing; each role "
                        f"replaced by a uniformly drawn other role w.p. {JUDGE_ERROR}",
        "rubric_rl.rubric_verdicts": f"STAND-IN grader: the exact answer to each rubric item ({', '.join(RUBRIC_CRITERIA)}) "
                                     f"from the episode and the hidden bug, flipped w.p. {JUDGE_ERROR} per item",
        "rubric_rl.rubric_weights": f"the written rubric's weights {RUBRIC_WEIGHTS} (labkit.learn.judges.RUBRIC_WEIGHTS)"}
    one_call = Cost(aux_calls=ro.batch_size)
    return {}, overrides, provenance, {"triage": one_call, "rubric_rl": one_call}


def toolworld_verification_inputs(env, policy, truth, rollouts: Rollouts, *, seed: int = 0
                                  ) -> tuple[dict, dict, dict, dict]:
    """The ToolWorld task's inputs for VPR and GVPO: the world's own progress checker at every
    turn boundary (VPR's ``progress``) and the tools' visible reports on every turn's work
    (GVPO's ``feedback``), both read from the sampled transcript by
    ``labkit.envs.toolworld.progress``. ``policy``, ``truth`` and ``seed`` are not needed (the
    checks read no model and draw nothing); they keep the signature of the other producers."""
    from labkit.envs.toolworld.progress import execution_feedback, progress_states
    # overrides, not shared inputs: other estimators have a "progress" option of another kind
    # (Temporal Scheduling's training progress)
    overrides = {"vpr": {"progress": lambda r: progress_states(env, r)},
                 "gvpo": {"feedback": lambda r: execution_feedback(env, r)}}
    provenance = {
        "vpr.progress": "the world's own checker (labkit.envs.toolworld.progress.progress_states): the progress "
                        "level of the state after every turn (located, fixed, confirmed by tests, submitted with the "
                        "fix), read from the hidden bug and fixed flag as a solver that knows the task would",
        "gvpo.feedback": "the tools' visible reports on every turn's work (labkit.envs.toolworld.progress"
                         ".execution_feedback): the test run after an edit, an edit of a file read as fine, a submit "
                         "with or without passing tests; flaky like the tools (stands in for execution feedback)"}
    return {}, overrides, provenance, {}


def toolworld_inputs(env, policy, truth, rollouts: Rollouts, *, seed: int = 0) -> tuple[dict, dict, dict, dict]:
    """Every input the ToolWorld task hands the agentic methods published after the survey: the
    functions above merged (each names its own estimators' options, so nothing collides)."""
    inputs, overrides, provenance, costs = {}, {}, {}, {}
    for make in (toolworld_teacher_inputs, toolworld_information_inputs, toolworld_judge_inputs,
                 toolworld_verification_inputs):
        more, over, src, cost = make(env, policy, truth, rollouts, seed=seed)
        clash = (set(more) & set(inputs)) | (set(over) & set(overrides))
        if clash:
            raise RuntimeError(f"{make.__name__} gives {sorted(clash)} twice")
        inputs, overrides, provenance, costs = inputs | more, overrides | over, provenance | src, costs | cost
    return inputs, overrides, provenance, costs
