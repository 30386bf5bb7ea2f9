"""Judge stand-ins: what the lab uses where a method asks a large language model to judge.

The lab has no such model, so every judge here is a STAND-IN built from the exact quantity the
judge is supposed to report (which the environment knows), made imperfect on purpose:

* ``noisy_oracle``: the exact quantity plus seeded Gaussian noise, optionally clipped and
  rounded onto the judge's score scale (MAPPA's coach, LLM-MCA's critic);
* ``stand_in_judge``: good / bad verdicts per turn from the sign of the exact advantage, each
  flipped with a seeded error rate (CriticSearch's retrospective critic);
* ``stand_in_step_verifier``: correct / wrong verdicts per reasoning step from the task's exact
  step correctness, each flipped with a seeded error rate (CAPO's LLM-as-GenPRM).

Turning the noise up shows how much of a judge-based method's quality is the judge's. The
estimators in ``labkit.credit`` take the judge's output as a tensor or a callable, so a real
judge plugs in the same way.
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.core.rollouts import Rollouts


def noisy_oracle(reference, *, noise: float, seed: int = 0, low: float | None = None,
                 high: float | None = None, levels: int | None = None) -> torch.Tensor:
    """STAND-IN for an LLM judge: the exact quantity plus seeded Gaussian noise.

        judge = reference + noise * N(0, 1)            (same shape as ``reference``, float64)

    then, if ``low``/``high`` are given, clipped to [low, high]; if also ``levels`` is given, the
    result is rounded to ``levels`` evenly spaced grades over [low, high] (e.g. low=0, high=10,
    levels=11 for the 0..10 integer scores MAPPA's coach gives). ``noise = 0`` without ``levels``
    returns the reference exactly (clipped if asked). A real judge is biased as well as noisy
    (it prefers some roles, lengths, styles); this stand-in models only unbiased noise.
    """
    ref = as_tensor("reference", reference).to(torch.float64)
    check_finite("reference", ref)
    noise = check_number("noise", noise, low=0.0)
    seed = check_int("seed", seed)
    if (low is None) != (high is None):
        raise ValueError("low: give both low and high (the score scale), or neither")
    if low is not None:
        low = check_number("low", low)
        high = check_number("high", high)
        if high <= low:
            raise ValueError(f"high: must be > low ({low}), got {high}")
    if levels is not None:
        levels = check_int("levels", levels, low=2)
        if low is None:
            raise ValueError("levels: rounding to grades needs the scale low/high")
    g = torch.Generator().manual_seed(seed)
    out = ref + noise * torch.randn(ref.shape, generator=g, dtype=torch.float64)
    if low is not None:
        out = out.clamp(low, high)
        if levels is not None:
            step = (high - low) / (levels - 1)
            out = low + torch.round((out - low) / step) * step
    return out


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


def stand_in_step_verifier(rollouts: Rollouts, *, step_correct=None, error_rate: float = 0.1, n_critiques: int = 1,
                           seed: int = 0) -> torch.Tensor:
    """STAND-IN for CAPO's LLM-as-GenPRM: a correct / wrong verdict on every reasoning step.

    verdict_s = 1 ("correct") where the step is exactly correct, else 0 ("wrong"); each verdict
    is then flipped independently with probability ``error_rate`` (seeded), once per critique.
    ``step_correct`` (B, S) bool defaults to ``rollouts.truth["step_correct"]``: the arithmetic
    verifier's local verdict (a step is judged on its own, as CAPO's prompt asks the GenPRM to),
    the privileged knowledge this stand-in judges with. Returns (B, S) float64 for one critique,
    (n_critiques, B, S) for several (what CAPO's vote combines); 0 where there is no step. With
    error_rate = 0 the verdicts are the exact step correctness. A real LLM verifier's errors are
    not independent coin flips (it misses the same subtle step again); this models only that
    it errs at a known rate.
    """
    error_rate = check_number("error_rate", error_rate, low=0.0, high=1.0)
    n_critiques = check_int("n_critiques", n_critiques, low=1)
    _, present = rollouts.view(rollouts.rewards, "step", "sum")
    if step_correct is None:
        step_correct = rollouts.truth.get("step_correct")
        if step_correct is None:
            raise ValueError("step_correct: not given and rollouts.truth has no 'step_correct'")
    exact = as_tensor("step_correct", step_correct)
    if exact.dim() != 2 or exact.shape[0] != rollouts.batch_size or exact.shape[1] < present.shape[1]:
        raise ValueError(f"step_correct: expected shape ({rollouts.batch_size}, >= {present.shape[1]}), "
                         f"got {tuple(exact.shape)}")
    good = exact[:, :present.shape[1]].to(torch.float64)
    g = torch.Generator().manual_seed(check_int("seed", seed))
    flip = torch.rand((n_critiques, *present.shape), generator=g, dtype=torch.float64) < error_rate
    verdict = torch.where(flip, 1 - good, good)
    verdict = torch.where(present, verdict, 0.0)
    return verdict[0] if n_critiques == 1 else verdict
