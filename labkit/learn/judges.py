"""Judge stand-ins: what the lab uses where a method asks a large language model to judge.

The lab has no such model, so every judge here is a STAND-IN built from the exact quantity the
judge is supposed to report (which the environment knows), made imperfect on purpose:

* ``noisy_oracle``: the exact quantity plus seeded Gaussian noise, optionally clipped and
  rounded onto the judge's score scale (MAPPA's coach, LLM-MCA's critic);
* ``stand_in_judge``: good / bad verdicts per turn from the sign of the exact advantage, each
  flipped with a seeded error rate (CriticSearch's retrospective critic);
* ``stand_in_step_verifier``: correct / wrong verdicts per reasoning step from the task's exact
  step correctness, each flipped with a seeded error rate (CAPO's LLM-as-GenPRM);
* ``stand_in_turn_roles``: one of four roles per ToolWorld turn (regression, plumbing,
  exploration, decisive) from the exact advantage and the belief's movement, each wrong with a
  seeded error rate (TRIAGE's role judge);
* ``stand_in_rubric_verdicts``: met / not met on every item of a written ToolWorld rubric from
  the episode and the hidden truth, each flipped with a seeded error rate (Rubric-Grounded RL's
  grader).

Turning the noise up shows how much of a judge-based method's quality is the judge's. The
estimators in ``labkit.credit`` take the judge's output as a tensor or a callable, so a real
judge plugs in the same way.
"""
from __future__ import annotations

import torch

from labkit.core.checks import as_tensor, check_finite, check_int, check_number, check_shape
from labkit.core.rollouts import Rollouts
from labkit.envs.toolworld.belief import belief_truth
from labkit.envs.toolworld.env import RUN_TESTS


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


#: The error rate of the stand-in judges the benchmark hands estimators (a verdict, grade, role or
#: rubric item wrong with this probability), one number for every judge so their rows compare.
JUDGE_ERROR = 0.1


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


# --------------------------------------------------------------------------- TARL, LaRe, the judge-error curve
def stand_in_turn_grades(rollouts: Rollouts, *, advantage, error_rate: float = 0.1, tolerance: float = 0.02,
                         seed: int = 0) -> torch.Tensor:
    """STAND-IN for TARL's LLM judge: a grade in {-1, 0, +1} for every turn.

    grade_n = +1 if the turn's exact advantage A_n > tolerance, -1 if A_n < -tolerance, else 0
    (a routine turn that neither helps nor hurts); each grade is then, with probability
    ``error_rate`` (seeded), replaced by one of the two *other* grades drawn uniformly. So
    ``error_rate`` is exactly the share of wrong grades: 0 is a perfect judge of the sign,
    2/3 a judge that knows nothing (uniform over the three grades). ``advantage`` (B, T) per
    position (``env.truth(policy).advantage(rollouts)``) is the privileged knowledge the
    stand-in grades with. Returns (B, N) float64, 0 where there is no turn. A real judge's
    errors are not independent coin flips (it misreads the same kind of turn again and again);
    this models only a known error rate.
    """
    error_rate = check_number("error_rate", error_rate, low=0.0, high=1.0)
    tolerance = check_number("tolerance", tolerance, low=0.0)
    adv = as_tensor("advantage", advantage).to(torch.float64)
    check_shape("advantage", adv, tuple(rollouts.mask.shape))
    check_finite("advantage", torch.where(rollouts.mask, adv, 0.0))
    a, present = rollouts.view(adv, "turn", "first")
    exact = torch.where(a > tolerance, 1.0, torch.where(a < -tolerance, -1.0, 0.0))
    g = torch.Generator().manual_seed(check_int("seed", seed))
    wrong = torch.rand(present.shape, generator=g, dtype=torch.float64) < error_rate
    # shift by 1 or 2 grades (mod 3): a uniformly drawn other grade
    shift = 1 + (torch.rand(present.shape, generator=g, dtype=torch.float64) < 0.5).to(torch.float64)
    other = torch.remainder(exact + 1 + shift, 3.0) - 1
    grade = torch.where(wrong, other, exact)
    return torch.where(present, grade, 0.0)


def corrupt_features(features, *, error_rate: float, seed: int = 0, present=None) -> torch.Tensor:
    """STAND-IN for a sloppy LLM-written feature function: each 0/1 feature flipped w.p. ``error_rate``.

    ``features`` (B, N, d) from ``labkit.envs.toolworld.features.turn_features``; ``present``
    (B, N), if given, keeps absent turns at 0. This is LaRe's error dial in the judge-error
    curve: the LLM's encoder misjudging a factor of a step.
    """
    x = as_tensor("features", features).to(torch.float64)
    if x.dim() != 3:
        raise ValueError(f"features: expected (B, N, d), got shape {tuple(x.shape)}")
    error_rate = check_number("error_rate", error_rate, low=0.0, high=1.0)
    g = torch.Generator().manual_seed(check_int("seed", seed))
    flip = torch.rand(x.shape, generator=g, dtype=torch.float64) < error_rate
    out = torch.where(flip, 1.0 - x, x)
    if present is not None:
        p = as_tensor("present", present).bool()
        check_shape("present", p, tuple(x.shape[:2]))
        out = torch.where(p[..., None], out, 0.0)
    return out


class LatentRewardRegressor:
    """LaRe's reward decoder, by least squares: per-step rewards whose sum over an episode fits its return.

        r_hat(step) = w . phi(step)               (phi: the step's latent-reward features)
        w = argmin_w  sum_b (sum_n w . phi_{b,n} - R_b)^2 + ridge * |w|^2

    Because the model is linear, the sum over a trajectory is w . (sum_n phi_{b,n}), so the fit
    is one ridge regression of the returns on the per-episode feature sums (return
    decomposition, as in RUDDER / IRCR and LaRe's decoder). No intercept: a constant would not
    belong to any step. ``weights`` (d,) after ``fit``; ``feature_names`` for display.
    """

    def __init__(self, *, ridge: float = 1e-3, feature_names=None):
        self.ridge = check_number("ridge", ridge, low=0.0)
        self.feature_names = None if feature_names is None else tuple(feature_names)
        self.weights: torch.Tensor | None = None
        self.r2: float | None = None

    def fit(self, features, returns, present=None) -> "LatentRewardRegressor":
        """Fit on ``features`` (B, N, d) and episode ``returns`` (B,); absent turns (``present``
        False) are ignored. Returns self; ``r2`` is the share of the returns' variance the
        decomposition explains (in-sample)."""
        x = as_tensor("features", features).to(torch.float64)
        if x.dim() != 3:
            raise ValueError(f"features: expected (B, N, d), got shape {tuple(x.shape)}")
        B, N, d = x.shape
        if B < 1:
            raise ValueError("features: need at least one episode to fit")
        y = as_tensor("returns", returns).to(torch.float64).reshape(-1)
        check_shape("returns", y, (B,))
        check_finite("returns", y)
        if present is not None:
            p = as_tensor("present", present).bool()
            check_shape("present", p, (B, N))
            x = torch.where(p[..., None], x, 0.0)
        check_finite("features", x)
        S = x.sum(1)                                              # (B, d) feature sums per episode
        gram = S.T @ S + self.ridge * torch.eye(d, dtype=torch.float64)
        # lstsq rather than solve: with ridge = 0 and an unused feature the Gram matrix is singular
        self.weights = torch.linalg.lstsq(gram, (S.T @ y)[:, None]).solution[:, 0]
        resid = y - S @ self.weights
        var = float(((y - y.mean()) ** 2).sum())
        self.r2 = 1.0 - float((resid ** 2).sum()) / var if var > 0 else float("nan")
        return self

    def step_rewards(self, features, present=None) -> torch.Tensor:
        """r_hat (B, N) = w . phi per step, 0 where ``present`` is False."""
        if self.weights is None:
            raise ValueError("LatentRewardRegressor: call fit() first")
        x = as_tensor("features", features).to(torch.float64)
        if x.dim() != 3 or x.shape[-1] != self.weights.numel():
            raise ValueError(f"features: expected (B, N, {self.weights.numel()}), got shape {tuple(x.shape)}")
        r = x @ self.weights
        if present is not None:
            p = as_tensor("present", present).bool()
            check_shape("present", p, tuple(x.shape[:2]))
            r = torch.where(p, r, 0.0)
        return r

    def table(self):
        """The fitted weights as {feature name: weight} (what a reader checks against intuition)."""
        if self.weights is None:
            raise ValueError("LatentRewardRegressor: call fit() first")
        names = self.feature_names or tuple(f"f{i}" for i in range(self.weights.numel()))
        return {n: float(w) for n, w in zip(names, self.weights)}


# --------------------------------------------------------------------------- TRIAGE's role judge, a rubric grader
TURN_ROLES = ("regression", "plumbing", "exploration", "decisive")
"""The four roles a TRIAGE judge gives a turn, by label 0..3 (ordered from worst to best):
0 regression (set the task back), 1 plumbing (routine, no progress), 2 exploration (gained
information without deciding anything), 3 decisive (real progress towards the fix)."""

ROLE_THRESHOLD = 0.1
"""The stand-in's skill threshold: a turn whose exact advantage exceeds it is decisive, one below
minus it a regression. On the bench's ToolWorld batches (noise 0.2, scripted agent) about one
turn in ten clears it either way; the edit that fixes the bug and the submit after it mostly do."""

INFO_THRESHOLD = 0.05
"""The stand-in's information threshold: a turn that moved the agent's exact belief over the
buggy file by more than this (total variation) gained information."""


def _other_labels(exact: torch.Tensor, n_labels: int, error_rate: float, g: torch.Generator) -> torch.Tensor:
    """``exact`` (float labels 0..n_labels-1) with each entry, w.p. ``error_rate``, replaced by one
    of the other n_labels - 1 labels drawn uniformly (so ``error_rate`` is the share of wrong labels)."""
    wrong = torch.rand(exact.shape, generator=g, dtype=torch.float64) < error_rate
    shift = torch.randint(1, n_labels, exact.shape, generator=g).to(torch.float64)
    return torch.where(wrong, torch.remainder(exact + shift, float(n_labels)), exact)


def belief_movement(env, truth, rollouts: Rollouts) -> torch.Tensor:
    """How much every turn taught the agent about the buggy file: (B, T) float64 in [0, 1].

    movement_t = TV(beta_{t+1}, beta_t) = 1/2 sum_b |beta_{t+1}(b) - beta_t(b)|, with beta_t the
    exact belief over the buggy file before turn t given the history the agent saw
    (``labkit.envs.toolworld.belief.belief_truth``). The last turn of an episode gets 0 (a
    submit answers nothing, and a timed-out episode never reads its last answer); 0 off the
    mask. Oracle side: it reads the world's answer kernel, not the hidden state.
    """
    beta = belief_truth(env, truth, rollouts).belief                  # (B, T, N)
    tv = torch.zeros(rollouts.mask.shape, dtype=torch.float64)
    tv[:, :-1] = 0.5 * (beta[:, 1:] - beta[:, :-1]).abs().sum(-1)
    nxt = torch.zeros_like(rollouts.mask)
    nxt[:, :-1] = rollouts.mask[:, 1:]
    return torch.where(rollouts.mask & nxt, tv, 0.0)


def stand_in_turn_roles(rollouts: Rollouts, *, advantage, information, error_rate: float = 0.1,
                        threshold: float = ROLE_THRESHOLD, info_threshold: float = INFO_THRESHOLD,
                        seed: int = 0) -> torch.Tensor:
    """STAND-IN for TRIAGE's LLM role judge: one of the four ``TURN_ROLES`` (label 0..3) per turn.

        3 decisive     if A_t > threshold
        0 regression   if A_t < -threshold
        2 exploration  else, if information_t > info_threshold
        1 plumbing     else

    A_t is the turn's exact advantage (its skill: ``advantage`` (B, T) per position, e.g.
    ``env.truth(policy).advantage(rollouts)``), ``information`` (B, T) per position how much the
    turn moved the agent's belief (``belief_movement``). The sign part is
    ``stand_in_turn_grades`` with ``tolerance = threshold`` and no error. Each label is then,
    w.p. ``error_rate`` (seeded), replaced by one of the three *other* roles drawn uniformly:
    0 is a perfect judge, 3/4 one that knows nothing. Returns (B, N) float64 labels, 0 where
    there is no turn. A real judge's errors are not independent coin flips; this models only a
    known error rate.
    """
    error_rate = check_number("error_rate", error_rate, low=0.0, high=1.0)
    threshold = check_number("threshold", threshold, low=0.0)
    info_threshold = check_number("info_threshold", info_threshold, low=0.0)
    seed = check_int("seed", seed)
    sign = stand_in_turn_grades(rollouts, advantage=advantage, error_rate=0.0, tolerance=threshold)
    moved = as_tensor("information", information).to(torch.float64)
    check_shape("information", moved, tuple(rollouts.mask.shape))
    check_finite("information", torch.where(rollouts.mask, moved, 0.0))
    moved, present = rollouts.view(moved, "turn", "first")
    exact = torch.where(sign > 0, 3.0, torch.where(sign < 0, 0.0, torch.where(moved > info_threshold, 2.0, 1.0)))
    g = torch.Generator().manual_seed(seed)
    return torch.where(present, _other_labels(exact, len(TURN_ROLES), error_rate, g), 0.0)


RUBRIC_CRITERIA = ("opened_buggy_file", "edited_buggy_file", "tested_after_fix", "submitted_fixed", "no_loops")
"""The ToolWorld rubric, one checkable item per column: opened the buggy file (some turn opens
file b); edited the buggy file (some turn edits b, i.e. fixed the bug); ran the tests after the
fix (a run-tests turn with the bug already fixed); submitted with the bug fixed (the outcome);
no loops (no turn repeats the previous turn's action on the same observation, e.g. think after
"thought" after think: the echo trap)."""

RUBRIC_WEIGHTS = (0.15, 0.2, 0.15, 0.4, 0.1)
"""The rubric's weights, in ``RUBRIC_CRITERIA`` order (sum 1): the outcome weighs most, the
three process items together as much again, the loop check least (labkit's choice)."""


def rubric_checks(env, rollouts: Rollouts) -> torch.Tensor:
    """The exact answer to every ``RUBRIC_CRITERIA`` item per episode: (B, K) float64 in {0, 1}.

    Reads the hidden bug (``truth["bug"]``), whether it was fixed before each turn
    (``truth["fixed"]``) and the outcome (``truth["success"]``) of a ToolWorld batch."""
    for attr in ("open_action", "edit_action"):
        if not hasattr(env, attr):
            raise TypeError(f"env: expected a ToolWorld, got {type(env).__name__}")
    truth = rollouts.truth if isinstance(rollouts.truth, dict) else {}
    missing = [k for k in ("bug", "fixed", "success") if k not in truth]
    if missing:
        raise ValueError(f"rollouts.truth: needs {missing} (sample with ToolWorld.sample)")
    m = rollouts.mask
    act = torch.where(m, rollouts.tokens, -1).long()
    obs = rollouts.states if rollouts.states is not None else torch.zeros_like(act)
    bug = as_tensor("rollouts.truth['bug']", truth["bug"]).long()[:, None]
    fixed = as_tensor("rollouts.truth['fixed']", truth["fixed"]).bool() & m
    repeat = torch.zeros_like(m)
    repeat[:, 1:] = m[:, 1:] & (act[:, 1:] == act[:, :-1]) & (obs[:, 1:] == obs[:, :-1])
    cols = [(act == env.open_action(bug)).any(1), (act == env.edit_action(bug)).any(1),
            ((act == RUN_TESTS) & fixed).any(1), as_tensor("rollouts.truth['success']", truth["success"]).bool(),
            ~repeat.any(1)]
    return torch.stack(cols, 1).to(torch.float64)


def stand_in_rubric_verdicts(env, rollouts: Rollouts, *, error_rate: float = 0.1, seed: int = 0) -> torch.Tensor:
    """STAND-IN for Rubric-Grounded RL's grader model: a met / not met verdict on every rubric item.

    verdict_{b,k} = ``rubric_checks(env, rollouts)[b, k]`` (the exact answer, read from the
    episode and the hidden truth), flipped independently w.p. ``error_rate`` (seeded). Returns
    (B, len(RUBRIC_CRITERIA)) float64 in {0, 1}; with error_rate = 0 the exact checks. A real
    grader's errors are correlated (it misreads the same kind of item again); this models only a
    known error rate per item.
    """
    error_rate = check_number("error_rate", error_rate, low=0.0, high=1.0)
    exact = rubric_checks(env, rollouts)
    g = torch.Generator().manual_seed(check_int("seed", seed))
    return _other_labels(exact, 2, error_rate, g)
