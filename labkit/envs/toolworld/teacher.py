"""Stand-ins for the self-distillation methods' models on ToolWorld (SDAR, CRAFT, OPID in
``labkit.credit.self_distillation``): the privileged teacher and the hindsight-skill model.

* The teacher. In the papers it is the same LLM given privileged context (the environment's
  state, a reference solution). Here it reads the hidden state (b, fixed, o) and the turn, and
  tilts the student's own policy by the exact Q of that state::

      log pi_T(a | h, t) = w log pi_S(a | o) + Q_t(h, a) / tau - log Z

  With ``student_weight`` w = 1 (the default) the teacher is the student plus privileged
  knowledge, so it is the same agent, not a different one; w = 0 gives softmax(Q / tau), a pure
  value-greedy teacher. As tau grows the teacher-student gap of a taken action tends to
  (Q - V) / tau, the exact advantage, scaled: the teacher is built from the oracle.
* The skill writer. OPID's LLM distils finished rollouts into a short hindsight skill. Here it
  reads a task group's finished successful episodes (their actions and their outcome, nothing
  hidden) and writes "the bug is in file j: open it, edit it, submit", j the file those episodes
  edited (most often; ties to the one edited last before the submit, then the lowest index). A
  group with no success gets no skill.
* The skill-conditioned model. The student's logits plus ``bonus`` on the actions consistent with
  the skill: open j and edit j at every observation, and submit after "edited file j" or "tests
  pass". Log-probabilities of the taken actions under it, the student's own where there is no
  skill.

Everything here may read the hidden state (the teacher does); it is the world's side, and
estimators receive only the tensors.
"""
from __future__ import annotations

import torch

from labkit.core.checks import check_number
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.envs.toolworld.env import SUBMIT, TESTS_PASS
from labkit.envs.toolworld.truth import ToolTruth

__all__ = ["teacher_logprobs", "student_logprobs", "hindsight_skills", "skill_conditioned_logprobs"]

NO_SKILL = -1


def _student_table(env, policy, rollouts: Rollouts) -> torch.Tensor:
    """log pi_S(. | o_t) at every position, (B, T, A) float64."""
    check_rollouts(rollouts, "ToolWorld.sample")
    env._check_policy(policy)
    if rollouts.states is None:
        raise ValueError("rollouts: needs rollouts.states (the observation of every turn; ToolWorld.sample "
                         "records them)")
    table = policy.log_probs().detach().to(torch.float64)
    return table[rollouts.states.clamp(0, env.n_obs - 1)]


def _taken(rollouts: Rollouts, logp: torch.Tensor, n_actions: int) -> torch.Tensor:
    """The taken action's entry of a (B, T, A) table, 0 off the mask."""
    a = rollouts.tokens.clamp(0, n_actions - 1)
    return torch.where(rollouts.mask, logp.gather(-1, a[..., None]).squeeze(-1), 0.0)


def student_logprobs(env, policy, rollouts: Rollouts) -> torch.Tensor:
    """log pi_S(a_t | o_t) of every taken action under ``policy`` in float64, (B, T), 0 off the
    mask (the same numbers the sampler recorded, without its dtype's rounding)."""
    return _taken(rollouts, _student_table(env, policy, rollouts), env.n_actions)


def teacher_logprobs(env, policy, truth: ToolTruth, rollouts: Rollouts, *, tau: float = 0.1,
                     student_weight: float = 1.0) -> torch.Tensor:
    """The stand-in privileged teacher's log-probability of every taken action, (B, T) float64,
    <= 0 on the mask and 0 off it: log softmax(w log pi_S(. | o_t) + Q_t(h_t, .) / tau), h_t the
    hidden state of the turn (``rollouts.truth["hidden_states"]``), Q from ``truth`` (the exact DP
    of the policy that sampled the rollouts). See the module docstring."""
    if not isinstance(truth, ToolTruth):
        raise TypeError(f"truth: expected a ToolTruth (env.truth(policy)), got {type(truth).__name__}")
    tau = check_number("tau", tau, low=0.0, low_open=True)
    student_weight = check_number("student_weight", student_weight, low=0.0)
    student = _student_table(env, policy, rollouts)
    hidden = rollouts.truth.get("hidden_states")
    if not isinstance(hidden, torch.Tensor) or tuple(hidden.shape) != tuple(rollouts.mask.shape):
        raise ValueError("rollouts.truth['hidden_states']: missing or mis-shaped; sample with ToolWorld.sample")
    m = rollouts.mask
    if bool(((hidden[m] < 0) | (hidden[m] >= env.n_hidden)).any()):
        raise ValueError(f"rollouts.truth['hidden_states']: outside this ToolWorld's {env.n_hidden} hidden states")
    if tuple(truth.Q.shape[1:]) != (env.n_files, 2, env.n_actions):
        raise ValueError(f"truth: computed for another ToolWorld (Q has shape {tuple(truth.Q.shape)})")
    q = truth.hidden_q(rollouts.turn_ids.clamp(min=0), hidden.clamp(min=0)).to(torch.float64)
    logits = student_weight * student + q / tau
    return _taken(rollouts, torch.log_softmax(logits, -1), env.n_actions).clamp(max=0.0)


def hindsight_skills(env, rollouts: Rollouts) -> dict[int, int]:
    """The stand-in skill writer: {task group id: the file its successful episodes edited, or
    ``NO_SKILL`` (-1) when no episode of the group succeeded}. Reads the actions and the outcome
    (``rollouts.truth["success"]`` if recorded, else a positive score) only."""
    check_rollouts(rollouts, "ToolWorld.sample")
    success = rollouts.truth.get("success")
    if not isinstance(success, torch.Tensor) or tuple(success.shape) != (rollouts.batch_size,):
        success = rollouts.scores > 0
    N = env.n_files
    first_edit = env.edit_action(0)
    skills = {}
    for g in torch.unique(rollouts.group_ids).tolist():
        rows = ((rollouts.group_ids == g) & success.bool()).nonzero().flatten().tolist()
        edited = torch.zeros(N, dtype=torch.long)   # successful episodes that edited file j
        last = torch.zeros(N, dtype=torch.long)     # ... that edited file j last
        for b in rows:
            acts = rollouts.tokens[b][rollouts.mask[b]]
            files = [int(a) - first_edit for a in acts.tolist() if first_edit <= int(a) < first_edit + N]
            for j in set(files):
                edited[j] += 1
            if files:
                last[files[-1]] += 1
        if int(edited.sum()) == 0:
            skills[g] = NO_SKILL
            continue
        key = edited * (len(rows) + 1) + last   # most episodes first, then most last-edits
        skills[g] = int(torch.argmax(key))      # argmax: the lowest index among ties
    return skills


def skill_conditioned_logprobs(env, policy, rollouts: Rollouts, *, bonus: float = 2.0,
                               skills: dict[int, int] | None = None) -> torch.Tensor:
    """log pi(a_t | o_t, skill) of every taken action, (B, T) float64, 0 off the mask: the
    student's logits plus ``bonus`` on the actions the group's skill names (open j, edit j; submit
    after "edited file j" or "tests pass"); the student's own log-probabilities in a group
    without a skill. ``skills`` defaults to ``hindsight_skills(env, rollouts)``."""
    bonus = check_number("bonus", bonus, low=0.0)
    student = _student_table(env, policy, rollouts)
    if skills is None:
        skills = hindsight_skills(env, rollouts)
    if not isinstance(skills, dict):
        raise TypeError(f"skills: expected a dict {{group id: file}}, got {type(skills).__name__}")
    B, T, A = student.shape
    boost = torch.zeros(B, T, A, dtype=torch.float64)
    obs = rollouts.states
    for b in range(B):
        j = skills.get(int(rollouts.group_ids[b]), NO_SKILL)
        if j == NO_SKILL:
            continue
        if not 0 <= int(j) < env.n_files:
            raise ValueError(f"skills: file {j} outside [0, {env.n_files - 1}]")
        boost[b, :, env.open_action(j)] = bonus
        boost[b, :, env.edit_action(j)] = bonus
        after = (obs[b] == env.edited_obs(j)) | (obs[b] == TESTS_PASS)
        boost[b, after, SUBMIT] = bonus
    return _taken(rollouts, torch.log_softmax(student + boost, -1), env.n_actions).clamp(max=0.0)
