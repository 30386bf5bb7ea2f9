"""The tiny LM's truth: Monte Carlo values of its reference rollouts and of alternative next
steps, computed once by exhaustive forking (``scripts/build_lm_truth.py``,
``scripts/build_step_alternatives.py``) and shipped in ``data/lm_truth``, and the advantages they
define (``truth_step_advantage``, ``truth_token_advantage``: ``labkit.core.stats.step_advantage``
on the cached values).
"""
from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from labkit.core.cache import read_cache
from labkit.core.paths import data_path
from labkit.core.credit import Credit
from labkit.core.rollouts import Rollouts
from labkit.core.stats import step_advantage
from labkit.envs.arithmetic.lm import ArithmeticLM


REFERENCE_DIR = data_path("lm_truth")


def _load_cache(path: Path | None, stem: str, what: str, script: str) -> tuple[dict, dict]:
    """``<stem>.safetensors`` and ``<stem>.json`` from ``path`` (default ``data/lm_truth``), once
    the meta's stamp says ``script`` built them from the files they depend on as they are now."""
    meta, files = read_cache(path if path is not None else REFERENCE_DIR, script=script, meta=f"{stem}.json",
                             files=[f"{stem}.safetensors"], what=what)
    return load_file(str(files[f"{stem}.safetensors"])), meta


def load_reference(env: ArithmeticLM | None = None, path: Path | None = None) -> tuple[Rollouts, dict]:
    """The reference rollouts of the shipped model and their Monte Carlo truth (built by
    ``scripts/build_lm_truth.py``). Returns ``(rollouts, meta)``; ``rollouts.truth`` holds
    ``step_values`` (B, S): V before each step from ``meta["k"]`` vines, ``token_values``
    (R, T): V before every token of the first R rows, plus the verifier's ``step_correct`` and
    ``first_error_step``. ``env`` (default: the shipped model) supplies the tokenizer for text.
    """
    t, meta = _load_cache(path, "reference", "cached truth", "build_lm_truth.py")
    env = env if env is not None else ArithmeticLM.load()
    problems = [env.task.problem(ops) for ops in meta["operands"]]
    pad = env.pad_id
    prompt_ids = [[i for i in row.tolist() if i != pad] for row in t["prompt_ids"]]
    text = [[env.token_text(i) if m else "" for i, m in zip(row.tolist(), mrow.tolist())]
            for row, mrow in zip(t["tokens"], t["mask"])]
    ro = Rollouts(tokens=t["tokens"], mask=t["mask"], rewards=t["rewards"], step_ids=t["step_ids"],
                  group_ids=torch.arange(len(problems)), logprobs=t["logprobs"], entropies=t["entropies"],
                  text=text, prompts=[p.prompt for p in problems],
                  truth={"step_values": t["step_values"].double(), "token_values": t["token_values"].double(),
                         "step_correct": t["step_correct"], "first_error_step": t["first_error_step"]},
                  info={"problems": problems, "prompt_ids": prompt_ids})
    return ro, meta


def load_step_alternatives(env: ArithmeticLM | None = None, path: Path | None = None) -> dict:
    """Alternative next steps from states of the reference rollouts, with Monte Carlo values
    (built by ``scripts/build_step_alternatives.py``): the data for asking whether a value
    estimate can rank the steps a policy might take next (``labkit.scoring.ranking_accuracy``).

    Returns a dict, one entry per candidate (C of them) unless noted:

    * ``prefixes``: state prefix + candidate step, token ids (what a value estimate is asked about);
    * ``groups`` (C,) long: the state a candidate continues (every state has >= 2 candidates);
    * ``mc_values`` (C,) float64: V(prefix + candidate) from ``meta["k"]`` vines, or the
      verifier's reward when the candidate ends the episode (``ends_episode`` (C,) bool);
    * ``texts``: the candidate steps as text; ``counts`` (C,): times each was drawn out of
      ``meta["m"]`` policy samples; ``problems``: the Problem each candidate belongs to;
    * per state (S of them): ``state_prefixes``, ``state_values`` (S,) float64 (the reference
      truth V before the step), ``state_rows`` / ``state_steps`` (S,): the reference rollout and
      step the state starts;
    * ``meta``: build parameters, model hash, timing.

    ``env`` (default: the shipped model) supplies the tokenizer for text.
    """
    t, meta = _load_cache(path, "alternatives", "step alternatives", "build_step_alternatives.py")
    env = env if env is not None else ArithmeticLM.load()
    state_prefixes = [row[:n].tolist() for row, n in zip(t["state_prefix"], t["state_len"].tolist())]
    candidates = [row[:n].tolist() for row, n in zip(t["candidate"], t["candidate_len"].tolist())]
    groups = t["group"].long()
    state_problems = [env.task.problem(ops) for ops in meta["operands"]]
    return {
        "prefixes": [state_prefixes[s] + c for s, c in zip(groups.tolist(), candidates)],
        "groups": groups,
        "mc_values": t["mc_value"].double(),
        "ends_episode": t["ends_episode"].bool(),
        "texts": [env.completion_text(c) for c in candidates],
        "counts": t["count"].long(),
        "problems": [state_problems[s] for s in groups.tolist()],
        "state_prefixes": state_prefixes,
        "state_values": t["state_value"].double(),
        "state_rows": t["state_row"].long(),
        "state_steps": t["state_step"].long(),
        "meta": meta,
    }


def truth_step_advantage(rollouts: Rollouts) -> torch.Tensor:
    """The Monte Carlo "true" step advantage of reference rollouts, (B, T) per token:
    A_i = r_i + V_{i+1} - V_i from ``truth["step_values"]`` (V after the last step = 0), each
    token taking its step's value: VinePPO's formula on the cached 256-vine values, in the
    rewards' precision as VinePPO computes it."""
    if "step_values" not in rollouts.truth:
        raise ValueError("rollouts: need truth['step_values'] (use labkit.envs.arithmetic.truth.load_reference)")
    r_step, present = rollouts.view(rollouts.rewards, "step", "sum")
    values = torch.where(present, rollouts.truth["step_values"].to(r_step.dtype), 0)
    return Credit.from_level(rollouts, step_advantage(values, r_step, present), "step", "truth").token


def truth_token_advantage(rollouts: Rollouts) -> torch.Tensor:
    """Token-level Monte Carlo advantage A_t = r_t + V_{t+1} - V_t for the rows that carry
    ``truth["token_values"]`` (V before every token; V after the last token = 0), (R, T)."""
    if "token_values" not in rollouts.truth:
        raise ValueError("rollouts: need truth['token_values'] (use labkit.envs.arithmetic.truth.load_reference)")
    v = rollouts.truth["token_values"]
    R = v.shape[0]
    return step_advantage(v, rollouts.rewards[:R].to(v.dtype), rollouts.mask[:R])
