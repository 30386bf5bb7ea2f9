"""Notebook 05, why agents are harder: with stochastic tools, partial observability and long
horizons, how much of an outcome is luck rather than skill, and what does GRPO's outcome credit
then pay for? And what is the "echo trap" that training can fall into?

Runners on ToolWorld; exact quantities come from ``ToolWorld.truth`` (dynamic programming over
the hidden state), so every comparison is against the true advantage of the policy that produced
the batch, not against another estimate. Each runner is seeded and returns plain data.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from functools import partial
from typing import Iterable, Sequence

import pandas as pd
import torch
from tqdm.auto import tqdm

from labkit.core.checks import as_tensor, check_choice, check_int, check_number, check_shape
from labkit.core.paths import data_path, require_data
from labkit.core.rollouts import Credit, Rollouts
from labkit.course.presets import NB05_AGENT_STRENGTH, NB05_ECHO_WORLD, NB05_TOKEN_GAMMA, NB05_WORLD
from labkit.credit import get_estimator
from labkit.credit.group import starpo_filter
from labkit.core.stats import discounted_returns
from labkit.core.turns import action_discounts
from labkit.envs.toolworld import SUBMIT, ToolLearner, ToolWorld, turn_labels  # noqa: F401  (lesson.turn_labels)
from labkit.envs.toolworld.tokens import (exact_token_advantage, exact_token_values, n_token_states, token_luck,
                                          token_vocab, tokenize)
from labkit.learn.critics import TabularCritic
from labkit.learn.loop import policy_loss, train
from labkit.scoring import pearson, sign_agreement


# --------------------------------------------------------------------------- worlds and policies
def noisy_world(noise: float = NB05_WORLD.noise, max_turns: int = NB05_WORLD.max_turns, *,
                n_files: int = NB05_WORLD.n_files, **kw) -> ToolWorld:
    """A ToolWorld whose three unreliable tools share one noise level: search misleads, a file
    read misjudges and the test suite flips, each with probability ``noise``."""
    noise = check_number("noise", noise, low=0.0, high=1.0)
    return ToolWorld(n_files, max_turns=max_turns, mislead=noise, noise=noise, flaky=noise, **kw)


def exact_credit(env: ToolWorld, policy) -> callable:
    """An oracle estimator: every turn gets its exact advantage A_t(s_t, a_t) under the current
    policy (recomputed by DP at every call, so it follows the policy during training). It sees
    the hidden bug location, which no real agent's critic can: an upper bound, not a method."""
    def exact(rollouts: Rollouts) -> Credit:
        adv = env.truth(policy).advantage(rollouts).to(rollouts.rewards.dtype)
        return Credit.from_tokens(rollouts, adv, "exact")
    exact.__name__ = "exact"
    return exact


# --------------------------------------------------------------------------- luck against skill
def credit_vs_truth(env: ToolWorld, policy, *, n_tasks: int = 8, group_size: int = 8, seed: int = 0,
                    estimators: Sequence[str] = ("grpo",)) -> dict:
    """Sample a batch, compute each estimator's credit and the exact per-turn truth.

    Returns ``rollouts``, ``truth`` (ToolTruth), ``exact`` (B, T) exact advantages, ``skill`` and
    ``luck`` (B, T), ``credit`` {name: (B, T)} and ``stats``: one row per estimator with the
    correlation of its credit with the exact advantage over all played turns (``corr_exact``),
    the share of turns whose credit has the sign of the exact advantage (``sign_agree``: the
    course's one definition, ``labkit.scoring.sign_agreement``, which counts only turns with
    |A| > 0.05 and counts zero credit as a disagreement; 0.0 when no turn qualifies) and the same
    two numbers for the decisive turns only.
    """
    rollouts = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    truth = env.truth(policy)
    skill, luck = truth.skill_luck(rollouts)
    m = rollouts.mask
    decisive = rollouts.truth["decisive"]
    credit, rows = {}, []
    for name in estimators:
        c = get_estimator(name)(rollouts).token
        credit[name] = c
        row = {"estimator": name}
        for tag, sel in (("", m), ("_decisive", decisive & m)):
            row[f"corr_exact{tag}"] = pearson(c[sel], skill[sel])
            # sign_agreement refuses an empty selection (a batch without a decisive turn)
            row[f"sign_agree{tag}"] = sign_agreement(c, skill, sel) if bool(sel.any()) else float("nan")
        rows.append(row)
    return {"rollouts": rollouts, "truth": truth, "exact": skill, "skill": skill, "luck": luck,
            "credit": credit, "stats": pd.DataFrame(rows)}


def luck_summary(rollouts: Rollouts, skill: torch.Tensor, luck: torch.Tensor) -> dict[str, float]:
    """How much of the spread of outcomes is luck: per trajectory the return is
    V_0 + sum skill + sum luck; ``luck_share`` = var(sum luck) / (var(sum skill) + var(sum luck)),
    plus the mean |skill| and |luck| per turn and the mean number of turns."""
    m = rollouts.mask
    s, l_ = skill.sum(1), luck.sum(1)
    vs, vl = float(s.var()), float(l_.var())
    return {"luck_share": vl / (vs + vl) if vs + vl > 0 else float("nan"),
            "mean_abs_skill": float(skill[m].abs().mean()), "mean_abs_luck": float(luck[m].abs().mean()),
            "mean_turns": float(m.sum(1).double().mean()), "success": float(rollouts.truth["success"].double().mean())}


def noise_horizon_sweep(noises: Iterable[float] = (0.0, 0.1, 0.2, 0.3, 0.4),
                        horizons: Iterable[int] = (10, 20, 30, 50), *, strength: float = NB05_AGENT_STRENGTH,
                        n_tasks: int = 16, group_size: int = 8, seed: int = 0,
                        progress: bool = True) -> pd.DataFrame:
    """GRPO credit against the exact advantage, and the luck share, over tool noise x horizon.

    The agent is ``scripted_policy(strength)`` (a half-trained agent: the sensible action is the
    most likely one but far from certain), the same at every setting; one batch per setting.
    """
    strength = check_number("strength", strength)
    grid = [(float(n), check_int("horizons", h, low=1)) for n in noises for h in horizons]
    if not grid:
        raise ValueError("noises, horizons: need at least one value each")
    rows = []
    for noise, T in tqdm(grid, desc="settings", disable=not progress, leave=False):
        env = noisy_world(noise, T)
        res = credit_vs_truth(env, env.scripted_policy(strength), n_tasks=n_tasks, group_size=group_size, seed=seed)
        st = res["stats"].iloc[0]
        rows.append({"noise": noise, "max_turns": T, "grpo_corr": st.corr_exact, "grpo_sign_agree": st.sign_agree,
                     **luck_summary(res["rollouts"], res["skill"], res["luck"])})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- inside a turn: POAD
def call_verbs(tokens: Rollouts) -> torch.Tensor:
    """(B, L) True on the verb token of every multi-token action (``open j``, ``edit j``)."""
    k = tokens.truth["token_in_turn"]
    nxt_is_file = torch.zeros_like(tokens.mask)
    nxt_is_file[:, :-1] = k[:, 1:] == 1
    return tokens.mask & (k == 0) & nxt_is_file


def _luck_per_skill(c: torch.Tensor, skill: torch.Tensor, luck_after: torch.Tensor) -> float:
    """b_luck / b_skill of the least-squares fit c ~ b0 + b_skill skill + b_luck luck_after."""
    Z = torch.stack([torch.ones_like(c), skill, luck_after], 1)
    beta = torch.linalg.lstsq(Z, c[:, None]).solution[:, 0]
    return float(beta[2] / beta[1]) if abs(float(beta[1])) > 1e-12 else float("nan")


def token_credit(env: ToolWorld, policy, *, gamma: float = NB05_TOKEN_GAMMA, lam: float = 0.0,
                 format_tokens: int = 0, n_tasks: int = 16, group_size: int = 8, seed: int = 0,
                 turns: Rollouts | None = None, truth=None, tokens: Rollouts | None = None) -> dict:
    """POAD's question on ToolWorld written as tokens: where does credit land inside a tool call?

    One seeded batch of ``policy`` is written as tokens (``labkit.envs.toolworld.tokens``, with
    ``format_tokens`` formatting tokens inside every ``open`` / ``edit`` call), and
    three critics' credits are set against the exact token advantage (discount ``gamma`` per
    action, as the truth of the agent's objective):

    * ``POAD``: ``poad`` with a tabular token-state critic fitted on returns discounted per action;
    * ``token-level GAE``: ``gae`` with the same critic fitted on returns discounted per token
      (the naive token MDP: an ``open j`` shrinks the future by gamma twice);
    * ``turn-level GAE``: ``turn_gae`` with a critic over observations; both tokens of an action
      get the action's credit.

    All three fit their critic on the batch itself (one seeded batch, or ``turns`` if given: a
    batch of ``policy`` from ``env.sample``, reused across settings; lam as given). ``truth``
    (``env.truth(policy, gamma=gamma)``) and ``tokens`` (``tokenize(env, turns, policy,
    format_tokens=format_tokens)``) may be passed in when already computed (``TokenCreditDial``
    keeps them); the results are the same. Two more rows
    run POAD and token-level GAE on the exact token values (``exact_token_values``): the
    backups alone, without a critic's error. Returns
    ``tokens`` (the token Rollouts), ``exact`` (B, L), ``credit`` {name: (B, L)} with the exact
    one first, ``stats`` (one row per method: Pearson with the exact token advantage over all
    tokens and over the verb tokens of multi-token actions; the mean error on those verbs,
    ``verb_bias``, and the mean credit of the formatting tokens, ``format_credit`` (exact: 0; NaN
    without any); ``call_bias``, the mean over ``open`` / ``edit`` calls of (the call's summed
    credit - its exact advantage); ``luck_per_skill`` from the fit c ~ skill + luck_after with luck_after the
    tool luck from this token on; and the cost) and ``truth``.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0)
    lam = check_number("lam", lam, low=0.0, high=1.0)
    if turns is None:
        turns = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    if truth is None:
        truth = env.truth(policy, gamma=gamma)
    elif float(truth.gamma) != gamma:
        raise ValueError(f"truth: was computed with gamma={truth.gamma}, not gamma={gamma}")
    tok = tokenize(env, turns, policy, format_tokens=format_tokens) if tokens is None else tokens
    exact = exact_token_advantage(env, truth, tok)
    per_action = discounted_returns(tok.rewards, tok.mask, action_discounts(tok, gamma))
    bad_critic = TabularCritic(n_token_states(env)).fit(tok, targets=per_action)
    token_critic = TabularCritic(n_token_states(env)).fit(tok, gamma=gamma)
    turn_critic = TabularCritic(env.n_obs).fit(turns, gamma=gamma)
    n_turns = int(tok.turn_ids.max()) + 1
    credits = {"POAD": get_estimator("poad")(tok, values=bad_critic.value(tok), gamma=gamma, lam=lam),
               "token-level GAE": get_estimator("gae")(tok, values=token_critic.value(tok), gamma=gamma, lam=lam),
               "turn-level GAE": get_estimator("turn_gae")(tok, values=turn_critic.value(turns)[:, :n_turns],
                                                           gamma=gamma, lam=lam)}
    exact_v = exact_token_values(env, truth, tok)
    credits["POAD, exact V"] = get_estimator("poad")(tok, values=exact_v, gamma=gamma, lam=lam)
    credits["token-level GAE, exact V"] = get_estimator("gae")(tok, values=exact_v, gamma=gamma, lam=lam)
    m = tok.mask
    verbs = call_verbs(tok)
    fmt = m & (tok.tokens == len(token_vocab(env)) - 1)
    luck = token_luck(env, truth, tok)
    luck_after = torch.where(m, luck.flip(1).cumsum(1).flip(1), 0.0)
    calls = tok.view(verbs.to(torch.float64), "turn", "sum")[0] > 0          # (B, n_turns)
    exact_turn = tok.view(exact, "turn", "sum")[0]

    def call_bias(x):
        return float((tok.view(x, "turn", "sum")[0] - exact_turn)[calls].mean()) if bool(calls.any()) else float("nan")

    rows = [{"method": "exact", "corr_all": 1.0, "corr_verbs": 1.0, "verb_bias": 0.0, "call_bias": 0.0,
             "format_credit": 0.0 if bool(fmt.any()) else float("nan"),
             "luck_per_skill": _luck_per_skill(exact[m], exact[m], luck_after[m]), "aux_calls": 0}]
    for name, c in credits.items():
        x = c.token.to(torch.float64)
        rows.append({"method": name, "corr_all": pearson(x[m], exact[m]), "corr_verbs": pearson(x[verbs], exact[verbs]),
                     "verb_bias": float((x - exact)[verbs].mean()), "call_bias": call_bias(x),
                     "format_credit": float(x[fmt].mean()) if bool(fmt.any()) else float("nan"),
                     "luck_per_skill": _luck_per_skill(x[m], exact[m], luck_after[m]), "aux_calls": c.cost.aux_calls})
    return {"tokens": tok, "exact": exact, "credit": {"exact": exact, **{k: c.token for k, c in credits.items()}},
            "stats": pd.DataFrame(rows), "truth": truth, "n_calls": int(verbs.sum())}


class TokenCreditDial:
    """``token_credit`` for a dashboard: the batch is sampled once (as ``token_credit`` samples
    it), and the exact truth per ``gamma`` and the token rollouts per ``format_tokens`` are kept,
    so a slider move recomputes only the critics and credits. ``gammas`` and ``format_tokens``
    list values to prepare now (a slider's ``viz.control_values``); other values are computed on
    first use and kept. ``dial(gamma=, lam=, format_tokens=)`` returns exactly what
    ``token_credit(env, policy, gamma=, lam=, format_tokens=, n_tasks=, group_size=, seed=)``
    returns."""

    def __init__(self, env: ToolWorld, policy, *, gammas: Iterable[float] = (), format_tokens: Iterable[int] = (),
                 n_tasks: int = 16, group_size: int = 8, seed: int = 0) -> None:
        self.env, self.policy = env, policy
        self.turns = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
        self._truth: dict[float, object] = {}
        self._tokens: dict[int, Rollouts] = {}
        for g in gammas:
            self.truth(g)
        for k in format_tokens:
            self.tokens(k)

    def truth(self, gamma: float):
        """``env.truth(policy, gamma=gamma)``, computed once per gamma."""
        gamma = check_number("gamma", gamma, low=0.0, high=1.0)
        if gamma not in self._truth:
            self._truth[gamma] = self.env.truth(self.policy, gamma=gamma)
        return self._truth[gamma]

    def tokens(self, format_tokens: int) -> Rollouts:
        """The batch written as tokens with ``format_tokens`` formatting tokens per call, once per length."""
        k = check_int("format_tokens", format_tokens, low=0)
        if k not in self._tokens:
            self._tokens[k] = tokenize(self.env, self.turns, self.policy, format_tokens=k)
        return self._tokens[k]

    def __call__(self, *, gamma: float, lam: float, format_tokens: int) -> dict:
        return token_credit(self.env, self.policy, gamma=gamma, lam=lam, format_tokens=format_tokens,
                            turns=self.turns, truth=self.truth(gamma), tokens=self.tokens(format_tokens))


def token_labels(tokens: Rollouts) -> list[list[str]]:
    """Display strings of every token (``open``, ``file 2``, ...), one list per trajectory."""
    return [row[:n] for row, n in zip(tokens.text, tokens.mask.sum(1).tolist())]


def call_length_sweep(env: ToolWorld, policy, *, format_tokens: Iterable[int] = (0, 2, 5, 10, 20),
                      gamma: float = NB05_TOKEN_GAMMA, lam: float = 0.0, n_tasks: int = 16, group_size: int = 8,
                      seed: int = 0) -> pd.DataFrame:
    """``token_credit`` over the length of a tool call: each method's scores per number of
    formatting tokens (``format_tokens``), one row per (method, length). One seeded batch of
    turns is written as tokens at every length."""
    format_tokens = list(format_tokens)
    if not format_tokens:
        raise ValueError("format_tokens: need at least one length")
    turns = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    rows = [token_credit(env, policy, gamma=gamma, lam=lam, format_tokens=k, turns=turns)["stats"]
            .assign(format_tokens=int(k)) for k in format_tokens]
    return pd.concat(rows, ignore_index=True)


# --------------------------------------------------------------------------- the echo trap
# echo_world's ToolWorld arguments as a dict (presets.NB05_ECHO_WORLD says why these values)
ECHO_WORLD = asdict(NB05_ECHO_WORLD)


def echo_world(**overrides) -> ToolWorld:
    """The echo-trap setting: noisy tools and a broken build (-3) for a wrong submit, so doing
    nothing until time runs out (0) is *safe* and trying is risky (+1 or -3)."""
    kw = {**ECHO_WORLD, **overrides}
    n = kw.pop("n_files")
    return ToolWorld(n, **kw)


def repeat_share(rollouts: Rollouts) -> float:
    """Share of played turns that repeat an (observation, action) pair already played earlier in
    the same episode: a memoryless agent that repeats one is going round in a loop."""
    B = rollouts.batch_size
    n_act = int(rollouts.tokens.max()) + 1
    pair = rollouts.states * n_act + rollouts.tokens
    repeats, total = 0, 0
    for b, n in enumerate(rollouts.mask.sum(1).tolist()):
        seen = set()
        for p in pair[b, :n].tolist():
            repeats += p in seen
            seen.add(p)
        total += n
    return repeats / max(total, 1)


ECHO_METHODS = ("GRPO", "GRPO + StarPO filter", "exact advantage (oracle)")
ECHO_LOSSES = {"grpo": "per-episode mean", "ppo_clip": "token mean"}


def outcome_weights(rollouts: Rollouts, credit: torch.Tensor, kind: str = "grpo") -> dict[str, float]:
    """Where a batch's policy-gradient push goes, split by how the episodes ended.

    With one epoch the loss ``kind`` (``labkit.learn.loop.policy_loss``) gives turn t of episode
    b the weight w_bt = A_bt / len_b / B (``"grpo"``, the per-episode mean) or A_bt / N
    (``"ppo_clip"``, the mean over all N turns of the batch; ``"reinforce"`` has A_bt / B).
    For each outcome (``success``, ``wrong_submit``: the episode submitted an unfixed bug,
    ``timeout``) returns the share of the episodes (``<outcome>_share``), the share of the
    batch's total |w| that their turns carry (``<outcome>_weight``) and the sum of their w over
    the total |w| (``<outcome>_push``: signed, > 0 when the loss makes what those episodes did
    more likely on balance). A timeout is the longest episode there is, so the per-episode mean
    gives its turns the smallest weight each.
    """
    check_choice("kind", kind, ("grpo", "ppo_clip", "reinforce"))
    m = rollouts.mask
    credit = as_tensor("credit", credit)
    check_shape("credit", credit, tuple(m.shape))
    a = torch.where(m, credit.to(torch.float64), 0.0)
    lengths = m.sum(1).to(torch.float64)
    if kind == "grpo":
        per_row = 1.0 / lengths.clamp(min=1)
    elif kind == "ppo_clip":
        per_row = torch.full_like(lengths, 1.0 / max(float(lengths.sum()), 1.0))
    else:
        per_row = torch.ones_like(lengths)
    w = a * per_row[:, None]
    total = float(w.abs().sum())
    out = {}
    timeout, success = rollouts.truth["timeout"], rollouts.truth["success"]
    for name, rows in (("success", success), ("wrong_submit", ~success & ~timeout), ("timeout", timeout)):
        out[f"{name}_share"] = float(rows.double().mean())
        out[f"{name}_weight"] = float(w[rows].abs().sum()) / total if total > 0 else 0.0
        out[f"{name}_push"] = float(w[rows].sum()) / total if total > 0 else 0.0
    return out


class _Recorder:
    """An estimator wrapper that keeps ``outcome_weights`` of every batch it is asked to credit."""

    def __init__(self, estimator, kind: str):
        self.estimator, self.kind, self.rows = estimator, kind, []
        self.__name__ = getattr(estimator, "__name__", "estimator")

    def __call__(self, rollouts: Rollouts) -> Credit:
        credit = self.estimator(rollouts)
        self.rows.append(outcome_weights(rollouts, credit.token, self.kind))
        return credit


def echo_trap_runs(*, seeds: Sequence[int] = (0, 1, 2), iterations: int = 100, lr: float = 0.3,
                   kind: str = "grpo", keep: float = 0.25, n_tasks: int = 8, group_size: int = 8,
                   eval_every: int = 10, methods: Sequence[str] = ECHO_METHODS, world: dict | None = None,
                   progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train a uniform agent in ``echo_world`` with GRPO, GRPO on StarPO-filtered batches
    (``keep``) and the exact-advantage oracle (``methods``: any of ``ECHO_METHODS``), same
    seeds, same iterations (equal env steps sampled: the filter discards what it drops), Adam
    at ``lr``, with the loss ``kind`` of ``labkit.learn.loop.train`` (``"grpo"``: per-episode
    mean; ``"ppo_clip"``: token mean; one epoch, so no clipping acts).

    Returns ``(curves, final)``: the stacked ``train`` curves (with ``reward_spread`` and
    ``zero_spread_share`` of each sampled batch, and ``outcome_weights`` of each batch trained
    on: ``timeout_share``, ``timeout_weight``, ``timeout_push``, ...) and one row per run with
    the final exact J, the final policy's entropy, timeout share, repeat share
    (``repeat_share``) and success rate on a fresh batch of 256 episodes, the mean
    ``timeout_push`` of the first 20 batches and ``lr`` and ``kind``.
    """
    iterations = check_int("iterations", iterations, low=1)
    check_choice("kind", kind, tuple(ECHO_LOSSES))
    lr = check_number("lr", lr, low=0.0, low_open=True)
    for m in methods:
        check_choice("methods", m, ECHO_METHODS)
    env = echo_world(**(world or {}))
    specs = {"GRPO": dict(estimator="grpo"),
             "GRPO + StarPO filter": dict(estimator="grpo", batch_filter=partial(starpo_filter, keep=keep)),
             "exact advantage (oracle)": dict(estimator="exact")}
    names = {"GRPO + StarPO filter": f"GRPO + StarPO filter (keep {keep:g})"}
    curves, final = [], []
    bar = tqdm(total=len(methods) * len(seeds), desc="runs", disable=not progress)
    for method in methods:
        spec, label = specs[method], names.get(method, method)
        for s in seeds:
            policy = env.make_policy()
            learner = ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size,
                                  batch_filter=spec.get("batch_filter"))
            est = exact_credit(env, policy) if spec["estimator"] == "exact" else get_estimator(spec["estimator"])
            recorder = _Recorder(est, kind)
            curve = train(learner, recorder, iterations=iterations, kind=kind, lr=lr, eval_every=eval_every,
                          seed=s, label=label, progress=False)
            diag = pd.DataFrame(recorder.rows, index=curve.index[1:])  # row 0 is the untrained policy
            curve = curve.join(diag)
            curve["lr"] = lr
            curves.append(curve)
            ro = env.sample(policy, 32, group_size=8, seed=10_000 + s)
            final.append({"label": label, "kind": kind, "lr": lr, "seed": s, "J": curve.success.iloc[-1],
                          "entropy": float(ro.entropies[ro.mask].mean()),
                          "timeout_share": float(ro.truth["timeout"].double().mean()),
                          "success_rate": float(ro.truth["success"].double().mean()),
                          "repeat_share": repeat_share(ro),
                          "zero_spread_share_last10": float(curve.zero_spread_share.iloc[-10:].mean()),
                          "timeout_push_first20": float(curve.timeout_push.iloc[1:21].mean())})
            bar.update()
    bar.close()
    return pd.concat(curves, ignore_index=True), pd.DataFrame(final)


def echo_trap_sweep(*, kinds: Sequence[str] = tuple(ECHO_LOSSES), lrs: Sequence[float] = (0.03, 0.1, 0.3),
                    seeds: Sequence[int] = (0, 1, 2, 3, 4), progress: bool = True,
                    **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``echo_trap_runs`` over loss ``kinds`` x learning rates ``lrs`` (``kw`` goes to every
    run): the stacked curves and final rows, each with ``kind`` and ``lr`` columns."""
    kinds, lrs = list(kinds), list(lrs)
    if not kinds or not lrs:
        raise ValueError("kinds, lrs: need at least one value each")
    curves, final = [], []
    for kind in kinds:
        for lr in lrs:
            c, f = echo_trap_runs(kind=kind, lr=lr, seeds=seeds, progress=progress, **kw)
            curves.append(c)
            final.append(f)
    return pd.concat(curves, ignore_index=True), pd.concat(final, ignore_index=True)


def trap_table(final: pd.DataFrame, *, trapped_at: float = 0.5) -> pd.DataFrame:
    """``echo_trap_runs`` final rows summarised per (kind, lr, label): mean timeout share,
    success rate and exact J over seeds, the number of seeds (``seeds``) and how many ended in
    the safe loop (``trapped``: timeout share > ``trapped_at``)."""
    trapped_at = check_number("trapped_at", trapped_at, low=0.0, high=1.0)
    need = {"kind", "lr", "label", "seed", "timeout_share", "success_rate", "J"}
    if not need <= set(final.columns):
        raise ValueError(f"final: missing columns {sorted(need - set(final.columns))}")
    g = final.assign(trapped=final.timeout_share > trapped_at).groupby(["kind", "lr", "label"], sort=False)
    out = g.agg(timeout_share=("timeout_share", "mean"), success_rate=("success_rate", "mean"), J=("J", "mean"),
                J_min=("J", "min"), J_max=("J", "max"), trapped=("trapped", "sum"), seeds=("seed", "size"))
    if "timeout_push_first20" in final.columns:
        out["timeout_push_first20"] = g.timeout_push_first20.mean()
    out["trapped"] = out.trapped.astype(int)
    return out.reset_index()


def exact_outcomes(env: ToolWorld, policy) -> dict[str, float]:
    """Exact J of ``policy`` in ``env`` (a ToolWorld with step cost 0, success reward 1 and a
    wrong-submit penalty > 0, such as ``echo_world()``) and the exact chances that a fresh
    episode ``succeeds``, ``submits`` at all and times out (``timeout`` = 1 - submits).

    P(success) is J of the same world without the penalty; J = P(success) - penalty x P(wrong
    submit) then gives P(wrong submit): two dynamic programmes, no sampling.
    """
    if not isinstance(env, ToolWorld):
        raise TypeError(f"env: expected a ToolWorld, got {type(env).__name__}")
    if env.step_cost != 0 or env.wrong_submit <= 0 or env.success_reward != 1:
        raise ValueError("env: exact_outcomes needs step_cost 0, success_reward 1 and a wrong_submit penalty > 0")
    J = env.truth(policy).J
    safe = ToolWorld(env.n_files, max_turns=env.max_turns, mislead=env.mislead, noise=env.noise, flaky=env.flaky)
    success = safe.truth(policy).J
    submits = success + (success - J) / env.wrong_submit
    return {"J": J, "succeeds": success, "submits": submits, "timeout": 1.0 - submits}


def exact_ascent(*, lr: float = 0.3, iterations: int = 100, optimizer: str = "adam", eval_every: int = 10,
                 world: dict | None = None, max_grad_norm: float | None = 1.0) -> pd.DataFrame:
    """Gradient ascent on the exact J of ``echo_world`` from the uniform agent: no sampling at
    all (the limit of an infinite batch of the exact-advantage oracle under the token-mean loss,
    whose expected gradient is proportional to dJ/dlogits, ``ToolTruth.grad``). ``optimizer``
    ``"adam"`` or ``"sgd"`` at ``lr``, the gradient norm clipped to ``max_grad_norm`` as
    ``train`` does. It separates the objective from the sampling and the loss: if this ends in
    the safe loop, the loop is where the true gradient leads.

    Returns one row every ``eval_every`` iterations (and the last) with ``iteration`` and
    ``exact_outcomes`` (``J``, ``succeeds``, ``submits``, ``timeout``), plus ``optimizer``, ``lr``.
    """
    lr = check_number("lr", lr, low=0.0, low_open=True)
    iterations = check_int("iterations", iterations, low=1)
    eval_every = check_int("eval_every", eval_every, low=1)
    check_choice("optimizer", optimizer, ("adam", "sgd"))
    if max_grad_norm is not None:
        max_grad_norm = check_number("max_grad_norm", max_grad_norm, low=0.0, low_open=True)
    env = echo_world(**(world or {}))
    policy = env.make_policy()
    opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(policy.parameters(), lr=lr)
    rows = []
    for it in range(iterations + 1):
        if it % eval_every == 0 or it == iterations:
            rows.append({"iteration": it, **exact_outcomes(env, policy)})
        if it == iterations:
            break
        opt.zero_grad()
        policy.logits.grad = -env.truth(policy).grad.to(policy.logits.dtype)
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(policy.parameters(), max_grad_norm)
        opt.step()
    return pd.DataFrame(rows).assign(optimizer=optimizer, lr=lr)


def loss_direction(*, probe_at: Sequence[int] = (1, 5, 10, 15, 20, 30), lr: float = 0.3, seed: int = 0,
                   n_batches: int = 8, n_tasks: int = 8, group_size: int = 8,
                   world: dict | None = None) -> pd.DataFrame:
    """What each loss does with *exact* credit on the way into the safe loop.

    Trains the exact-advantage oracle with the per-episode loss (``kind="grpo"``, Adam at
    ``lr``, ``seed``) as ``echo_trap_runs`` does, keeping the policy at every iteration in
    ``probe_at``. At each kept policy, ``n_batches`` fresh batches (``n_tasks`` x
    ``group_size``) get their exact advantages and the gradient of both losses (``"grpo"``:
    per-episode mean; ``"ppo_clip"``, one epoch: token mean) is summed over the batches. One
    row per (iteration, loss): ``exact_outcomes`` of the policy, ``cos_true`` (cosine between
    the loss's update and the exact dJ/dlogits) and ``submit_push`` (the update's summed
    component on the submit logits over its summed |component|: < 0 pushes away from
    submitting) next to ``true_submit_push``, the same share of the exact gradient.
    """
    probe_at = sorted({check_int("probe_at", i, low=1) for i in probe_at})
    if not probe_at:
        raise ValueError("probe_at: need at least one iteration")
    n_batches = check_int("n_batches", n_batches, low=1)
    env = echo_world(**(world or {}))
    policy = env.make_policy()
    oracle = exact_credit(env, policy)
    kept: dict[int, torch.Tensor] = {}

    def keep(rollouts: Rollouts) -> Credit:
        # called once per iteration before the update: this is the policy that iteration trains
        kept[len(kept) + 1] = policy.logits.detach().clone()
        return oracle(rollouts)

    train(ToolLearner(env, policy, n_tasks=n_tasks, group_size=group_size), keep, iterations=max(probe_at),
          kind="grpo", lr=check_number("lr", lr, low=0.0, low_open=True), eval_every=max(probe_at),
          seed=check_int("seed", seed), progress=False)
    probe = env.make_policy()
    rows = []
    for it in probe_at:
        with torch.no_grad():
            probe.logits.copy_(kept[it])
        truth = env.truth(probe)
        true = truth.grad
        outcomes = exact_outcomes(env, probe)
        batches = [env.sample(probe, n_tasks, group_size=group_size, seed=seed * 1000 + it * 10 + b)
                   for b in range(n_batches)]
        for kind in ECHO_LOSSES:
            update = torch.zeros_like(true)
            for ro in batches:
                probe.zero_grad()
                loss, _ = policy_loss(probe.log_prob(ro.states, ro.tokens), ro.logprobs,
                                      truth.advantage(ro).to(ro.rewards.dtype), ro.mask, kind)
                loss.backward()
                update -= probe.logits.grad.detach().to(true.dtype)
            rows.append({"iteration": it, "kind": kind, **outcomes,
                         "cos_true": float((update * true).sum() / (update.norm() * true.norm())),
                         "submit_push": float(update[:, SUBMIT].sum() / update.abs().sum()),
                         "true_submit_push": float(true[:, SUBMIT].sum() / true.abs().sum())})
    return pd.DataFrame(rows)


ECHO_CACHE_FILES = ("final", "curves", "exact_ascent", "loss_direction")


def load_echo_trap() -> dict:
    """The cached echo-trap sweep (``scripts/build_echo_trap.py`` writes ``data/echo_trap/``):
    ``{"final", "curves", "exact_ascent", "loss_direction"}`` as DataFrames and ``"meta"`` (the
    settings, seeds and wall times) as a dict."""
    folder = require_data(data_path("echo_trap"), "notebook 05's cached echo-trap sweep")
    out: dict = {}
    for name in ECHO_CACHE_FILES:
        out[name] = pd.read_csv(require_data(folder / f"{name}.csv", f"data/echo_trap/{name}.csv"))
    out["meta"] = json.loads(require_data(folder / "meta.json", "data/echo_trap/meta.json").read_text())
    return out
