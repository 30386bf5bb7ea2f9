"""Notebook 05, why agents are harder: with stochastic tools, partial observability and long
horizons, how much of an outcome is luck rather than skill, and what does GRPO's outcome credit
then pay for? And what is the "echo trap" that training can fall into?

Runners on ToolWorld (the worlds: ``labkit.course.presets.noisy_world`` and ``echo_world``); exact
quantities come from ``ToolWorld.truth`` (dynamic programming over the hidden state), so every
comparison is against the true advantage of the policy that produced the batch, not against
another estimate. Luck against skill is ``labkit.scoring``'s (``luck_share``, the one
``skill_luck_fit``); tool output inside a response is run under the three conventions of
``labkit.credit.tool_spans`` on the episodes written by ``labkit.envs.toolworld.tool_output``;
the echo trap's training runs are ``labkit.learn.echo_trap``'s, cached by
``scripts/build_echo_trap.py`` and read here. Each runner is seeded and returns plain data.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
import torch

from labkit import scoring
from labkit.core.cache import read_cache
from labkit.core.checks import check_int, check_number
from labkit.core.paths import data_path
from labkit.core.progress import progress_bar
from labkit.core.rollouts import Rollouts
from labkit.core.stats import discounted_returns
from labkit.core.turns import action_discounts
from labkit.course.presets import NB05_AGENT_STRENGTH, NB05_TOKEN_GAMMA, noisy_world
from labkit.credit import get_estimator
from labkit.credit.tool_spans import CONVENTIONS, run_under
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.tool_output import tool_output_truth, with_tool_output
from labkit.envs.toolworld.tokens import (exact_token_advantage, exact_token_values, n_token_states, token_luck,
                                          token_vocab, tokenize)
from labkit.learn.critics import TabularCritic
from labkit.scoring import luck_share, pearson, sign_agreement


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
    V_0 + sum skill + sum luck; ``luck_share`` = var(sum luck) / (var(sum skill) + var(sum luck))
    (``labkit.scoring.luck_share``), plus the mean |skill| and |luck| per turn, the mean number of
    turns and the success rate."""
    m = rollouts.mask
    return {"luck_share": luck_share(skill, luck),
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
    for noise, T in progress_bar(grid, desc="settings", enabled=progress, leave=False):
        env = noisy_world(noise, T)
        res = credit_vs_truth(env, env.scripted_policy(strength), n_tasks=n_tasks, group_size=group_size, seed=seed)
        st = res["stats"].iloc[0]
        rows.append({"noise": noise, "max_turns": T, "grpo_corr": st.corr_exact, "grpo_sign_agree": st.sign_agree,
                     **luck_summary(res["rollouts"], res["skill"], res["luck"])})
    return pd.DataFrame(rows)


def slider_answers(settings: Iterable[tuple[float, int]], *, strength: float = NB05_AGENT_STRENGTH,
                   n_tasks: int = 8, group_size: int = 8, seed: int = 0, known: dict | None = None) -> pd.DataFrame:
    """What the noise-and-horizon dashboard shows at each (tool noise, max_turns) of ``settings``:
    one row per setting, in order, with the exact success probability ``J``, the ``luck_share``
    (``luck_summary``), and GRPO's ``grpo_corr`` and ``grpo_sign_agree`` with the exact advantage
    (``credit_vs_truth`` on one seeded batch of ``n_tasks`` x ``group_size`` episodes of
    ``scripted_policy(strength)``, as the dashboard runs it). ``known``: results of that same
    ``credit_vs_truth`` call already in hand, by (noise, max_turns); those are read, not sampled again."""
    known = dict(known or {})
    rows = []
    for noise, T in settings:
        noise, T = check_number("settings", noise, low=0.0, high=1.0), check_int("settings", T, low=1)
        if (noise, T) in known:
            res = known[(noise, T)]
        else:
            world = noisy_world(noise=noise, max_turns=T)
            res = credit_vs_truth(world, world.scripted_policy(strength), n_tasks=n_tasks, group_size=group_size,
                                  seed=seed)
        st = res["stats"].iloc[0]
        rows.append({"noise": noise, "max_turns": T, "J": res["truth"].J,
                     "luck_share": luck_summary(res["rollouts"], res["skill"], res["luck"])["luck_share"],
                     "grpo_corr": st.corr_exact, "grpo_sign_agree": st.sign_agree})
    if not rows:
        raise ValueError("settings: need at least one (noise, max_turns) pair")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- inside a turn: POAD
def call_verbs(tokens: Rollouts) -> torch.Tensor:
    """(B, L) True on the verb token of every multi-token action (``open j``, ``edit j``)."""
    k = tokens.truth["token_in_turn"]
    nxt_is_file = torch.zeros_like(tokens.mask)
    nxt_is_file[:, :-1] = k[:, 1:] == 1
    return tokens.mask & (k == 0) & nxt_is_file


def _luck_per_skill(credit: torch.Tensor, skill: torch.Tensor, luck_after: torch.Tensor) -> float:
    """b_luck / b_skill of the least-squares fit credit ~ b0 + b_skill skill + b_luck luck_after
    over the given positions (``labkit.scoring.skill_luck_fit``, read by
    ``labkit.scoring.luck_per_skill``)."""
    return scoring.luck_per_skill(scoring.skill_luck_fit(credit, {"skill": skill, "luck_after": luck_after}))


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
    luck_after = torch.where(m, scoring.luck_after(luck), 0.0)
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


# --------------------------------------------------------------------------- tool output inside a response
#: The estimators that run over a whole multi-turn response, compared under each convention (GRPO for contrast).
TOOL_SPAN_ESTIMATORS = ("gae", "td0", "poad", "reinforce_pp", "reinforce_pp_baseline", "remax",
                        "tir_optimal_token_baseline", "grpo")
#: Positions per tool answer: one per word of the observation (1 to 4), so that answers differ in
#: length as real ones do; discounting "through" an answer then shrinks the future once per word.
TOOL_SPAN_ANSWER_TOKENS = "words"


def greedy_scores(env: ToolWorld, policy, turns: Rollouts) -> torch.Tensor:
    """ReMax's baseline on ToolWorld: the expected score of the greedy agent (the policy's most
    likely action in every observation) on each trajectory's task, exact, (B,) float64."""
    greedy = env.make_policy()
    with torch.no_grad():
        greedy.logits.scatter_(1, policy.probs().argmax(1, keepdim=True), 30.0)  # probability 1 - 1e-11
    return env.truth(greedy).task_values[turns.truth["bug"]]


def tool_span_inputs(env: ToolWorld, policy, turns: Rollouts, response: Rollouts, values: torch.Tensor,
                     gamma: float) -> dict[str, dict]:
    """Every estimator of ``TOOL_SPAN_ESTIMATORS``'s options on ``response``: the exact critic
    ``values`` for gae (lam 1), td0 and poad (lam 1), ``gamma`` for those and reinforce_pp, the
    greedy agent's exact score for remax, and the policy's sum of squared probabilities for the
    optimal token baseline (1 on the tool's answers: a certain token, which adds nothing to its
    path variance when a convention reads it)."""
    spans = ~response.mask & (response.tokens >= env.n_actions)
    s2 = torch.where(spans, torch.ones((), dtype=torch.float64), policy.sum_pi_squared(response))
    return {"gae": {"values": values, "gamma": gamma, "lam": 1.0}, "td0": {"values": values, "gamma": gamma},
            "poad": {"values": values, "gamma": gamma, "lam": 1.0}, "reinforce_pp": {"gamma": gamma},
            "reinforce_pp_baseline": {}, "remax": {"greedy_scores": greedy_scores(env, policy, turns)},
            "tir_optimal_token_baseline": {"sum_pi_squared": s2}, "grpo": {}}


def tool_span_credit(env: ToolWorld, policy, *, gamma: float = NB05_TOKEN_GAMMA,
                     answer_tokens: int | str = TOOL_SPAN_ANSWER_TOKENS, n_tasks: int = 16, group_size: int = 8,
                     seed: int = 0, estimators: Sequence[str] = TOOL_SPAN_ESTIMATORS,
                     turns: Rollouts | None = None) -> dict:
    """Every estimator in ``estimators`` under every convention of ``labkit.credit.tool_spans``
    (carry, reset, through) on one seeded batch of ``policy``, each episode written as one
    response with the tool's answers inside it (``answer_tokens``: positions per answer, or
    "words", one per word; ``with_tool_output``), against the exact advantage of every action under discount ``gamma``
    per turn (``tool_output_truth``).

    Returns ``response`` (the Rollouts), ``exact`` (B, T) the exact advantage, ``values`` (B, T)
    the exact critic the value-based estimators get, ``credit`` {(estimator, convention): (B, T)}
    and ``stats``: one row per (estimator, convention) with ``gamma``, the Pearson correlation
    with the exact advantage over the generated positions (``corr``), the course's sign
    agreement (``sign_agree``, |A| > 0.05), the mean error (``bias``) and the root mean squared
    error (``rms``); whitened and normalised estimators are on another scale than the exact
    advantage, so compare their bias and rms across conventions only.
    """
    gamma = check_number("gamma", gamma, low=0.0, high=1.0, low_open=True)
    if turns is None:
        turns = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    response = with_tool_output(env, turns, answer_tokens=answer_tokens)
    exact = tool_output_truth(env.truth(policy, gamma=gamma), turns, response)
    inputs = tool_span_inputs(env, policy, turns, response, exact["values"], gamma)
    m, adv = response.mask, exact["advantage"]
    credit, rows = {}, []
    for name in estimators:
        if name not in inputs:
            raise ValueError(f"estimators: {name!r} has no inputs here; choose from {list(inputs)}")
        for convention in CONVENTIONS:
            c = run_under(convention, name, response, **inputs[name]).token.to(torch.float64)
            credit[name, convention] = c
            rows.append({"estimator": name, "gamma": gamma, "convention": convention,
                         "corr": pearson(c[m], adv[m], constant=0.0), "sign_agree": sign_agreement(c, adv, m),
                         "bias": float((c - adv)[m].mean()), "rms": float((c - adv)[m].pow(2).mean().sqrt())})
    return {"response": response, "exact": adv, "values": exact["values"], "credit": credit,
            "stats": pd.DataFrame(rows)}


def tool_span_study(env: ToolWorld, policy, *, gammas: Iterable[float] = (NB05_TOKEN_GAMMA, 1.0),
                    answer_tokens: int | str = TOOL_SPAN_ANSWER_TOKENS, n_tasks: int = 16, group_size: int = 8,
                    seed: int = 0, estimators: Sequence[str] = TOOL_SPAN_ESTIMATORS) -> dict:
    """``tool_span_credit`` for every discount in ``gammas`` on one seeded batch: ``stats`` (one
    row per estimator, gamma and convention), ``by_gamma`` {gamma: that result} and ``turns``
    (the batch, one position per turn)."""
    gammas = [check_number("gammas", g, low=0.0, high=1.0, low_open=True) for g in gammas]
    if not gammas:
        raise ValueError("gammas: need at least one discount")
    turns = env.sample(policy, n_tasks, group_size=group_size, seed=seed)
    by_gamma = {g: tool_span_credit(env, policy, gamma=g, answer_tokens=answer_tokens, estimators=estimators,
                                    turns=turns) for g in gammas}
    return {"stats": pd.concat([r["stats"] for r in by_gamma.values()], ignore_index=True),
            "by_gamma": by_gamma, "turns": turns}


def tool_span_pivot(stats: pd.DataFrame, value: str) -> pd.DataFrame:
    """One of ``tool_span_study``'s measures as a table: a row per estimator (in the study's
    order), a column per (gamma, convention)."""
    if value not in ("corr", "sign_agree", "bias", "rms"):
        raise ValueError(f"value: expected one of corr, sign_agree, bias, rms, got {value!r}")
    order = list(dict.fromkeys(stats.estimator))
    table = stats.pivot(index="estimator", columns=["gamma", "convention"], values=value)
    return table.reindex(index=order, columns=pd.MultiIndex.from_product(
        [list(dict.fromkeys(stats.gamma)), list(CONVENTIONS)], names=["gamma", "convention"]))


def tool_span_example(result: dict, *, min_turns: int = 5) -> int:
    """The first successful episode of ``tool_span_credit``'s result with at least ``min_turns``
    turns (the first episode if none has): a response worth drawing."""
    min_turns = check_int("min_turns", min_turns, low=1)
    response = result["response"]
    turns = response.mask.sum(1)
    ok = (turns >= min_turns) & (response.scores > 0)
    return int(ok.nonzero()[0]) if bool(ok.any()) else 0


def tool_span_panels(result: dict, row: int, estimator: str = "gae") -> tuple[dict[str, torch.Tensor], list[str]]:
    """One response's exact advantage and ``estimator``'s credit under each convention, for
    ``viz.compare_heatmaps``: ({title: (1, L)}, the L positions' texts), L the response's length
    up to its last action (tool answers included, with credit 0), from ``tool_span_credit``'s result."""
    response = result["response"]
    row = check_int("row", row, low=0, high=response.batch_size - 1)
    length = int(response.mask[row].nonzero().max()) + 1
    panels = {"exact advantage": result["exact"][row:row + 1, :length]}
    for convention in CONVENTIONS:
        panels[f"{estimator}, {convention}"] = result["credit"][estimator, convention][row:row + 1, :length]
    return panels, response.text[row][:length]


# --------------------------------------------------------------------------- the echo trap
ECHO_CACHE_FILES = ("final", "curves", "exact_ascent", "loss_direction")


def load_echo_trap(path: Path | None = None) -> dict:
    """The cached echo-trap sweep (``scripts/build_echo_trap.py`` writes it to ``path``, default
    ``data/echo_trap/``; the runs are ``labkit.learn.echo_trap``'s): ``{"final", "curves",
    "exact_ascent", "loss_direction"}`` as DataFrames and ``"meta"`` (the settings, seeds and wall
    times) as a dict. Raises if the cache is missing, foreign or stale."""
    meta, files = read_cache(path if path is not None else data_path("echo_trap"), script="build_echo_trap.py",
                             files=[f"{name}.csv" for name in ECHO_CACHE_FILES], what="cached echo-trap sweep")
    return {**{name: pd.read_csv(files[f"{name}.csv"]) for name in ECHO_CACHE_FILES}, "meta": meta}
