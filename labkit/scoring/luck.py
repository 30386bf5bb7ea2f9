"""Skill against luck, in a world whose exact truth splits every turn of a trajectory into

    skill_t = A_t(s_t, a_t)                          what the choice was worth (exact advantage)
    luck_t  = r_t + V_{t+1}(s_{t+1}) - Q_t(s_t, a_t)  what the tools' random answer added

(``ToolTruth.skill_luck``; per trajectory V_0 + sum_t (skill_t + luck_t) = the return).

Two questions, two numbers:

* how much of the spread of outcomes is luck: ``luck_share``, var(sum luck) / (var(sum skill) +
  var(sum luck)) over the batch's trajectories (a property of the world and the policy);
* how much of a credit follows luck: ``skill_luck_fit``, the one least-squares fit of credit on
  named regressors (skill, the luck from t on, controls), read as ``luck_per_skill`` (b_luck /
  b_skill) and, over a batch of methods, by ``luck_regression``;
* how much of the "skill" is information luck (the hidden state the agent could not see, where
  the exact advantage reads it): ``information_luck_share`` and, per method,
  ``information_luck_regression`` (with the agent-side values of
  ``labkit.envs.toolworld.belief``).
"""
from __future__ import annotations

from typing import Mapping

import pandas as pd
import torch

from labkit.core.checks import as_tensor, check_finite, check_pairing
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts, check_rollouts
from labkit.scoring.agreement import pearson, sign_agreement


def luck_after(luck: torch.Tensor) -> torch.Tensor:
    """sum_{k >= t} luck_k for every position t of (B, T) ``luck``: the luck of this turn's tool
    answer and of every later one, what outcome-based credit wrongly pays an action for."""
    return luck.flip(1).cumsum(1).flip(1)


def luck_share(skill: torch.Tensor, luck: torch.Tensor) -> float:
    """var(sum luck) / (var(sum skill) + var(sum luck)) over the trajectories of (B, T) ``skill``
    and ``luck`` (sums along each row; the return is V_0 + sum skill + sum luck): the share of the
    spread of outcomes that is luck. NaN when neither sum varies."""
    vs, vl = float(skill.sum(1).var()), float(luck.sum(1).var())
    return vl / (vs + vl) if vs + vl > 0 else float("nan")


def skill_luck_fit(credit: torch.Tensor, regressors: Mapping[str, torch.Tensor]) -> dict[str, float]:
    """Least squares of ``credit`` (1-D: one entry per played turn) on an intercept and the named
    ``regressors`` (each 1-D, the same length): credit ~ b0 + sum_j b_j x_j. Returns {name: b_j}.

    A regressor with zero variance (std <= 1e-12: e.g. no luck at all when every tool is
    reliable) cannot be told from the intercept; it is dropped from the fit and its coefficient
    is NaN.
    """
    y = as_tensor("credit", credit)
    if y.dim() != 1 or y.numel() == 0:
        raise ValueError(f"credit: expected a non-empty 1-D tensor, got shape {tuple(y.shape)}")
    check_finite("credit", y)
    if not regressors:
        raise ValueError("regressors: need at least one named regressor")
    X = {}
    for name, x in regressors.items():
        x = as_tensor(f"regressors[{name!r}]", x)
        if tuple(x.shape) != tuple(y.shape):
            raise ValueError(f"regressors: {name!r} has shape {tuple(x.shape)}, credit {tuple(y.shape)}")
        check_finite(f"regressors[{name!r}]", x)
        X[name] = x
    cols = [c for c, x in X.items() if float(x.std()) > 1e-12]
    Z = torch.stack([torch.ones_like(y)] + [X[c] for c in cols], 1)
    beta = torch.linalg.lstsq(Z, y[:, None]).solution[:, 0]
    out = {c: float("nan") for c in X}
    out.update({c: float(b) for c, b in zip(cols, beta[1:])})
    return out


def luck_per_skill(fit: Mapping[str, float]) -> float:
    """b_luck_after / b_skill of a ``skill_luck_fit`` with regressors ``skill`` and
    ``luck_after``: how much a unit of luck moves the credit, per unit of skill (scale-free:
    GRPO's std division cancels). NaN when b_skill is NaN or |b_skill| <= 1e-12."""
    return fit["luck_after"] / fit["skill"] if abs(fit["skill"]) > 1e-12 else float("nan")


def luck_terms(rollouts: Rollouts, truth) -> dict[str, torch.Tensor]:
    """Per played turn (flattened over the batch), from ``truth.skill_luck(rollouts)``: ``skill``
    A_t, ``luck_after`` sum_{k >= t} luck_k, ``skill_later`` sum_{k > t} skill_k, ``luck_before``
    sum_{k < t} luck_k. ``truth`` must split skill from luck (a ``ToolTruth``, computed for the
    world the rollouts came from: it refuses others' rollouts); a TypeError naming ``truth``
    otherwise."""
    check_rollouts(rollouts)
    if not callable(getattr(truth, "skill_luck", None)):
        raise TypeError(f"truth: expected an exact truth that splits skill from luck (a ToolTruth: "
                        f"env.truth(policy)), got {type(truth).__name__}")
    skill, luck = truth.skill_luck(rollouts)
    m = rollouts.mask
    skill_later = luck_after(skill) - skill
    luck_before = luck.cumsum(1) - luck
    return {"skill": skill[m], "luck_after": luck_after(luck)[m], "skill_later": skill_later[m],
            "luck_before": luck_before[m]}


def _credit_tokens(credits: Mapping[str, Credit], rollouts: Rollouts) -> dict[str, torch.Tensor]:
    """Each method's per-position credit (float64), refused by name unless it is a Credit
    computed on a batch of ``rollouts``' shape (credit of other rollouts cannot be regressed on
    these rollouts' truth)."""
    if not isinstance(credits, Mapping):
        raise TypeError(f"credits: expected a mapping name -> Credit, got {type(credits).__name__}")
    out = {}
    for name, credit in credits.items():
        token = getattr(credit, "token", None)
        if not isinstance(token, torch.Tensor):
            raise TypeError(f"credits: {name!r} is not a Credit (got {type(credit).__name__})")
        check_pairing("credits", {f"{name!r} shape": tuple(token.shape)},
                      {f"{name!r} shape": tuple(rollouts.mask.shape)}, sides=("the credit", "the rollouts"),
                      hint="score credit computed on these rollouts")
        out[name] = token.to(torch.float64)
    return out


def luck_regression(rollouts: Rollouts, truth, credits: Mapping[str, Credit], *,
                    reference: str = "GRPO") -> pd.DataFrame:
    """How much of the luck that outcome credit pays for does each method remove?

    Over every played turn t of every trajectory in the batch, regress the method's turn credit
    c_t by least squares (``skill_luck_fit``) on

        c_t ~ b0 + b_skill * skill_t + b_luck * luck_after_t + b_later * skill_later_t + b_before * luck_before_t

    with skill_t = A_t(s_t, a_t) (exact), luck_after_t = sum_{k>=t} luck_k (the luck of the tool
    answers from this turn's on: what an outcome-based credit wrongly attributes to the action),
    and the skill of the later actions and the luck before t as controls (``luck_terms``). Then

        luck_per_skill = b_luck / b_skill        (scale-free: GRPO's std division cancels)
        luck_removed   = 1 - luck_per_skill / luck_per_skill(reference)

    ``reference`` defaults to GRPO, whose credit (R - mean) / std pays luck and skill alike
    (luck_per_skill near 1): luck_removed = 0 is "as lucky as GRPO", 1 is "no luck at all" (the
    exact advantage), < 0 is more luck per unit of skill than GRPO. A regressor with zero
    variance is dropped and its coefficient is NaN; so is luck_removed then. Also reported:
    ``corr_exact`` (Pearson with skill_t = exact A over all turns) and ``sign_agree``, the
    course's one definition (``sign_agreement`` at its default threshold: the share of turns with
    |A| > 0.05 whose credit has A's sign, zero credit counting as a disagreement).
    """
    terms = luck_terms(rollouts, truth)
    m = rollouts.mask
    A = terms["skill"]
    every = torch.ones_like(A, dtype=torch.bool)
    rows = []
    for name, token in _credit_tokens(credits, rollouts).items():
        c = token[m]
        b = skill_luck_fit(c, terms)
        rows.append({"method": name, "b_skill": b["skill"], "b_luck_after": b["luck_after"],
                     "b_skill_later": b["skill_later"], "b_luck_before": b["luck_before"],
                     "luck_per_skill": luck_per_skill(b), "corr_exact": pearson(c, A),
                     # the turns are already flattened: score them as one row of a (1, N) batch
                     "sign_agree": sign_agreement(c[None], A[None], every[None])})
    df = pd.DataFrame(rows)
    ref = df.loc[df.method == reference, "luck_per_skill"]
    ref = float(ref.iloc[0]) if len(ref) else float("nan")
    df["luck_removed"] = 1 - df.luck_per_skill / ref if ref == ref and ref != 0 else float("nan")
    return df


def information_luck_share(hidden_skill: torch.Tensor, info_skill: torch.Tensor, mask: torch.Tensor) -> float:
    """sum (A - A_info)^2 / sum A^2 over the played turns (``mask``) of (B, T) ``hidden_skill``
    (A, the advantage given the hidden state) and ``info_skill`` (A_info, given the agent's
    information): the share of the hidden-state advantage's spread that is information luck.
    A - A_info has mean zero given what the agent saw, so it is uncorrelated with A_info and the
    two shares add up to 1 in expectation. NaN when A is zero on every played turn."""
    a, b = as_tensor("hidden_skill", hidden_skill), as_tensor("info_skill", info_skill)
    m = as_tensor("mask", mask).bool()
    for name, x in (("info_skill", b), ("mask", m)):
        if tuple(x.shape) != tuple(a.shape):
            raise ValueError(f"{name}: expected the shape of hidden_skill {tuple(a.shape)}, got {tuple(x.shape)}")
    total = float((a[m] ** 2).sum())
    return float(((a - b)[m] ** 2).sum()) / total if total > 0 else float("nan")


def information_luck_regression(rollouts: Rollouts, truth, belief, credits: Mapping[str, Credit]) -> pd.DataFrame:
    """Does each method credit information luck as skill?

    Over every played turn, least squares (``skill_luck_fit``) of the method's credit on

        c_t ~ b0 + b_info * A_info_t + b_info_luck * (A_t - A_info_t) + b_luck * luck_after_t
              + b_later * skill_later_t + b_before * luck_before_t

    with A_t and the tool-luck terms from ``truth`` (a ToolTruth: hidden-state values,
    ``luck_terms``) and A_info_t from ``belief`` (a ``BeliefTruth``: values given the agent's
    history). ``info_luck_per_skill`` = b_info_luck / b_info: 1 when the method pays for the
    hidden file's luck as for skill (as the hidden-state advantage does, by definition), 0 when it
    credits only what the agent could have known. Also ``b_info``, ``b_info_luck`` and
    ``corr_info`` (Pearson with A_info)."""
    terms = luck_terms(rollouts, truth)
    m = rollouts.mask
    adv = getattr(belief, "advantage", None)
    if not isinstance(adv, torch.Tensor):
        raise TypeError(f"belief: expected a BeliefTruth (labkit.envs.toolworld.belief_truth), got {type(belief).__name__}")
    check_pairing("belief", {"shape": tuple(adv.shape)}, {"shape": tuple(m.shape)},
                  sides=("the belief", "the rollouts"), hint="compute it with belief_truth on these rollouts")
    # the belief records the batch's mask and the hidden-state advantage it was computed with:
    # both must be these rollouts' and this truth's
    recorded = {"mask": getattr(belief, "mask", m), "hidden advantage": getattr(belief, "hidden_advantage", None)}
    check_pairing("belief", {k: v for k, v in recorded.items() if v is not None},
                  {"mask": m, "hidden advantage": truth.advantage(rollouts)}, sides=("the belief", "these rollouts and truth"),
                  hint="compute it with belief_truth(env, truth, rollouts) on these rollouts", atol=1e-9)
    info = adv[m].to(torch.float64)
    regressors = {"info_skill": info, "info_luck": terms["skill"] - info, "luck_after": terms["luck_after"],
                  "skill_later": terms["skill_later"], "luck_before": terms["luck_before"]}
    rows = []
    for name, token in _credit_tokens(credits, rollouts).items():
        c = token[m]
        b = skill_luck_fit(c, regressors)
        ratio = b["info_luck"] / b["info_skill"] if abs(b["info_skill"]) > 1e-12 else float("nan")
        rows.append({"method": name, "b_info": b["info_skill"], "b_info_luck": b["info_luck"],
                     "info_luck_per_skill": ratio, "corr_info": pearson(c, info)})
    return pd.DataFrame(rows)
