"""Privileged critics: credit from a critic that sees, at training time, what the actor never sees.

* SWEET-RL (Zhou et al. 2025, arXiv:2503.15478): a turn-level advantage critic that conditions
  on hidden information (here: the bug location and whether it is fixed), trained with a
  Bradley-Terry objective on pairs of trajectories of the same task; it ranks candidate actions
  per turn, and the actor is trained (with DPO) on best-vs-worst candidate pairs.
* CriticSearch (Zhang et al. 2025, arXiv:2511.12159): a frozen critic that reads the whole
  trajectory and the gold answer and judges every turn good or bad; the verdicts become dense
  turn rewards next to the outcome. Here the critic is a STAND-IN judge (``stand_in_judge``).

Privileged inputs are always explicit arguments (``hidden_states=...``, ``advantage=...``);
nothing here reads ``rollouts.truth``.
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.credit._registry import register
from labkit.credit.episode import grpo
from labkit.core.rollouts import Cost, Credit, Rollouts
from labkit.core.stats import group_normalize
from labkit.core.turns import turn_hidden_states, turn_table


# --------------------------------------------------------------------------- SWEET-RL critic
class BTCritic:
    """A tabular turn-advantage critic A(k, a) fitted by Bradley-Terry on trajectory pairs.

    k is the critic's key of a turn: the hidden state index (``privileged=True``: bug, fixed
    flag and observation, i.e. ``truth["hidden_states"]``) or the observation alone
    (``privileged=False``: what the actor sees). For every pair (i, j) of trajectories of the
    same task group with s_i > s_j (outcome scores)

        loss_ij = -log sigmoid(beta * (sum_t A(k_it, a_it) - sum_t A(k_jt, a_jt)))

    averaged over pairs, plus ``l2`` * mean(A^2) (pulls unseen or uninformative entries to 0),
    minimised by Adam (closed-form gradient) for ``steps`` steps (lr ``lr``) from A = 0 (deterministic). This is SWEET-RL's objective (its critic
    is the LLM's log-probability ratio beta * log pi_c / pi_ref summed over a turn's tokens; a
    table replaces it here). Defaults: beta = 1, l2 = 1e-2, steps = 300, lr = 0.1. A critic with no pair to compare (every group's outcomes equal) stays 0.
    Cost of scoring: one critic call per (turn, candidate) scored (``aux_calls``).
    """

    def __init__(self, n_keys: int, n_actions: int, *, privileged: bool, beta: float = 1.0, l2: float = 1e-2):
        self.n_keys = check_int("n_keys", n_keys, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        self.privileged = bool(privileged)
        self.beta = check_number("beta", beta, low=0.0, low_open=True)
        self.l2 = check_number("l2", l2, low=0.0)
        self.table = torch.zeros(self.n_keys, self.n_actions, dtype=torch.float64)
        self.n_pairs = 0
        self.losses: list[float] = []

    @classmethod
    def for_env(cls, env, *, privileged: bool, **kw) -> "BTCritic":
        """A critic sized for a ToolWorld: keys are hidden states or observations."""
        return cls(env.n_hidden if privileged else env.n_obs, env.n_actions, privileged=privileged, **kw)

    def keys(self, rollouts: Rollouts, hidden_states=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The key and action of every turn and the presence mask, each (B, N)."""
        obs, act, present = turn_table(rollouts)
        if self.privileged:
            keys, _ = turn_hidden_states(rollouts, hidden_states, self.n_keys,
                                         "a privileged critic keys turns by the hidden state (training-time only)")
        else:
            keys = obs
        if bool(((keys < 0) | (keys >= self.n_keys))[present].any()):
            raise ValueError(f"rollouts: turn keys outside this critic's {self.n_keys} keys")
        if bool((act[present] >= self.n_actions).any()):
            raise ValueError(f"rollouts: actions outside this critic's {self.n_actions} actions")
        return keys.clamp(0, self.n_keys - 1), act, present

    def fit(self, rollouts: Rollouts, hidden_states=None, *, steps: int = 300, lr: float = 0.1) -> "BTCritic":
        steps = check_int("steps", steps, low=1)
        lr = check_number("lr", lr, low=0.0, low_open=True)
        keys, act, present = self.keys(rollouts, hidden_states)
        s = rollouts.scores.to(torch.float64)
        g = rollouts.group_ids
        better = (g[:, None] == g[None, :]) & (s[:, None] > s[None, :])
        pairs = better.nonzero()
        self.n_pairs = int(pairs.shape[0])
        if self.n_pairs == 0:
            return self  # nothing to compare: every group has equal outcomes (or one member)
        cell = torch.where(present, keys * self.n_actions + act, 0)
        pres = present.to(torch.float64)
        flat_cells = cell[present]
        B, n_par = rollouts.batch_size, self.n_keys * self.n_actions
        win, lose = pairs[:, 0], pairs[:, 1]
        theta = self.table.clone().flatten()
        # Adam by hand on the closed-form gradient: the trajectory score S_b is a sum of table
        # entries, so dL/dtheta is a scatter of dL/dS_b onto the cells each trajectory visited
        m1, m2 = torch.zeros_like(theta), torch.zeros_like(theta)
        b1, b2 = 0.9, 0.999
        for step in range(1, steps + 1):
            S = (theta[cell] * pres).sum(1)
            w = self.beta * torch.sigmoid(-self.beta * (S[win] - S[lose])) / self.n_pairs
            dS = torch.zeros(B, dtype=torch.float64).index_add_(0, win, -w).index_add_(0, lose, w)
            grad = torch.zeros(n_par, dtype=torch.float64).index_add_(
                0, flat_cells, dS[:, None].expand_as(cell)[present]) + 2 * self.l2 * theta / n_par
            m1.mul_(b1).add_(grad, alpha=1 - b1)
            m2.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            theta -= lr * (m1 / (1 - b1 ** step)) / ((m2 / (1 - b2 ** step)).sqrt() + 1e-8)
        S = (theta[cell] * pres).sum(1)
        loss = torch.nn.functional.softplus(-self.beta * (S[win] - S[lose])).mean() + self.l2 * (theta ** 2).mean()
        self.losses.append(float(loss))
        self.table = theta.view(self.n_keys, self.n_actions).clone()
        return self

    def scores(self, rollouts: Rollouts, hidden_states=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Critic values of every candidate action at every turn, (B, N, A), plus actions and presence."""
        keys, act, present = self.keys(rollouts, hidden_states)
        return self.table[keys], act, present


@register("sweet_rl")
def sweet_rl(rollouts: Rollouts, *, critic: BTCritic, hidden_states=None, pi=None) -> Credit:
    """SWEET-RL, step-wise evaluation from training-time information (Zhou et al. 2025, arXiv:2503.15478).

        credit_t = A_c(k_t, a_t) - sum_a pi(a | o_t) A_c(k_t, a)      (``pi`` given)
                 = A_c(k_t, a_t)                                      (``pi=None``, the paper's)
        preference at turn t: (argmax_a A_c(k_t, a), argmin_a A_c(k_t, a)) over all candidates

    ``critic`` is a fitted ``BTCritic``: privileged (k_t = the hidden state, passed explicitly as
    ``hidden_states``) or not (k_t = the observation). SWEET-RL trains the actor with DPO on the
    preference pairs (best vs worst of the candidate actions sampled at the turn, ranked by the
    critic); ``info["preferences"]`` holds them, (B, N, 2) action ids (chosen, rejected), -1
    where there is no turn. The per-turn credit is what a policy-gradient learner can use
    instead. Centring by pi makes the credit an advantage under the current policy (the
    critic's raw values are only defined up to a constant per key).

    Deviations: candidates are all of ToolWorld's actions (the paper samples a few from the
    actor); the critic is a table, not an LLM; ties (e.g. a key never seen in training: all 0)
    choose the lowest action id for both ends, so ``info["informative"]`` marks turns whose
    best and worst candidates differ. Degenerate input: a critic fitted on groups with equal
    outcomes stays 0 and gives credit 0 everywhere. Cost: ``aux_calls`` = turns x candidates
    (one critic evaluation each).
    """
    if not isinstance(critic, BTCritic):
        raise ValueError(f"critic: expected a fitted BTCritic, got {type(critic).__name__}")
    vals, act, present = critic.scores(rollouts, hidden_states)
    taken = vals.gather(-1, act[..., None]).squeeze(-1)
    if pi is not None:
        obs, _, _ = turn_table(rollouts)
        table = as_tensor("pi", pi).detach().to(torch.float64)
        check_shape("pi", table, (None, critic.n_actions))
        if bool((obs[present] >= table.shape[0]).any()):
            raise ValueError("pi: fewer rows than the observations in these rollouts")
        taken = taken - (table[obs.clamp(max=table.shape[0] - 1)] * vals).sum(-1)
    credit = torch.where(present, taken, 0.0)
    best, worst = vals.argmax(-1), vals.argmin(-1)
    prefs = torch.where(present[..., None], torch.stack([best, worst], -1), -1)
    informative = present & (vals.max(-1).values > vals.min(-1).values)
    cost = Cost(aux_calls=int(present.sum()) * critic.n_actions)
    return Credit.from_level(rollouts, credit, "turn", "sweet_rl", cost=cost, preferences=prefs,
                             informative=informative, critic_values=vals, privileged=critic.privileged)


# --------------------------------------------------------------------------- CriticSearch
def stand_in_judge(rollouts: Rollouts, *, advantage, error_rate: float = 0.1, seed: int = 0) -> torch.Tensor:
    """STAND-IN for CriticSearch's retrospective LLM critic: a good / bad verdict per turn.

    verdict_t = 1 ("good") if the turn's exact advantage A_t > 0, else 0 ("bad"); each verdict is
    then flipped independently with probability ``error_rate`` (seeded). ``advantage`` (B, T) per
    position (e.g. ``env.truth(policy).advantage(rollouts)``) is the privileged knowledge the
    stand-in judges with, like the paper's critic reading the gold answer and the full
    trajectory. Returns (B, N) float64 verdicts, 0 where there is no turn. With error_rate = 0 the
    verdicts agree in sign with A on every turn with A != 0.
    """
    error_rate = check_number("error_rate", error_rate, low=0.0, high=1.0)
    adv = as_tensor("advantage", advantage).to(torch.float64)
    check_shape("advantage", adv, tuple(rollouts.mask.shape))
    check_finite("advantage", torch.where(rollouts.mask, adv, 0.0))
    a, present = rollouts.view(adv, "turn", "first")
    good = (a > 0).to(torch.float64)
    g = torch.Generator().manual_seed(check_int("seed", seed))
    flip = torch.rand(present.shape, generator=g, dtype=torch.float64) < error_rate
    verdict = torch.where(flip, 1 - good, good)
    return torch.where(present, verdict, 0.0)


@register("critic_search")
def critic_search(rollouts: Rollouts, *, verdicts, alpha: float = 1.0, eps: float = 1e-6) -> Credit:
    """CriticSearch-style retrospective dense turn rewards (Zhang et al. 2025, arXiv:2511.12159).

        turn reward     r_t  = verdict_t in {0 (bad), 1 (good)}
        turn term       A^T_t = (r_t - mean_g r) / (std_g r + eps)   pooled over every turn of
                                                                     the task group g
        hybrid          A_t  = A^GRPO_i + alpha * A^T_t

    A^GRPO_i is ``grpo`` on the trajectory outcomes: the critic's turn rewards complement the
    global reward, and the combination is optimised with GRPO, as the paper describes its hybrid
    advantage. ``verdicts`` (B, N) with N the batch's largest number of turns, or a callable
    ``rollouts -> (B, N)`` (the judge). Defaults: alpha = 1, eps = 1e-6, unbiased std.

    STAND-IN: the paper's frozen critique LLM, reading the full trajectory and the gold answer,
    is replaced by ``stand_in_judge``: verdicts simulated from the exact turn advantage (the
    privileged knowledge) with a seeded error rate. The exact reward mapping and normalisation
    are labkit's reading of the paper's summary (turn rewards from binary verdicts, group
    normalisation as in GRPO), not checked against its equations.

    Degenerate input: a pool of turns whose verdicts are all equal gets turn term 0; a group of
    one trajectory with one turn gets mean 0 / std 1 (GRPO's singleton rule). Cost: one judge
    call per trajectory (the critic reads the whole trajectory once), ``aux_calls`` = B.
    ``info``: ``turn_rewards`` (B, N), ``turn_term`` (B, N), ``episode_term`` (B,).
    """
    alpha = check_number("alpha", alpha, low=0.0)
    eps = check_number("eps", eps, low=0.0)
    _, _, present = turn_table(rollouts)
    if callable(verdicts) and not isinstance(verdicts, torch.Tensor):
        verdicts = verdicts(rollouts)
    v = as_tensor("verdicts", verdicts).to(torch.float64)
    check_shape("verdicts", v, tuple(present.shape))
    check_finite("verdicts", torch.where(present, v, 0.0))
    r = torch.where(present, v, 0.0)
    term = torch.zeros_like(r)
    if bool(present.any()):
        pool = rollouts.group_ids[:, None].expand_as(r)[present]
        term[present] = group_normalize(r[present], pool, eps=eps).normalized
    episode = grpo(rollouts, eps=eps).values[:, 0].to(torch.float64)
    adv = torch.where(present, episode[:, None] + alpha * term, 0.0)
    return Credit.from_level(rollouts, adv, "turn", "critic_search", cost=Cost(aux_calls=rollouts.batch_size),
                             turn_rewards=r, turn_term=term, episode_term=episode, alpha=alpha)
