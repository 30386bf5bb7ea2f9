"""Exercises of notebook 02_critics_gae: 02a, GAE's backward loop over the generated tokens; 02b
(find the bug), GAE on a padded batch; 02c (run and interpret), the variance side of the lambda
dial at a lambda the notebook does not print.

02a and 02b are graded against ``labkit.credit.td.gae``, 02c against the lab's own gradient study
(``labkit.scoring.gradient_study``) on the chain of the notebook's lambda sweep;
``reveal_solution("02a")`` (or "02b", "02c") prints the lab's solution: ``gae`` and ``padded_gae``
in labkit/course/solutions/ex02_critics_gae.py, 02c's ``measure`` here. 02a's rules check GAE's recursion itself on
the reader's answer (not only against the lab's), so the hint can say which part of it breaks: the
end, the discount, or the step over tool output.
"""
from __future__ import annotations

import functools

import torch

from labkit.course import presets
from labkit.course.exercises.cases import rand, randint, random_gamma, random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import OFF_MASK, looks_like, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import td
from labkit.learn.critics import TabularCritic
from labkit.scoring import gradient_study


def _reference(rewards, values, mask, gamma, lam):
    r = one_token_rollouts(rewards, mask)
    return td.gae(r, values=values.to(F64), gamma=gamma, lam=lam).token


def _next_generated(mask: torch.Tensor) -> torch.Tensor:
    """Column of the next generated position after t in the same row, -1 when there is none."""
    B, T = mask.shape
    out = torch.full((B, T), -1, dtype=torch.long)
    for b in range(B):
        nxt = -1
        for t in range(T - 1, -1, -1):
            out[b, t] = nxt
            if mask[b, t]:
                nxt = t
    return out


def _cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 3), (4, 7), tool_output=True)
        B, T = mask.shape
        rewards = torch.where(mask & (rand(gen, B, T) < 0.3), torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=1), 0.0)
        values = torch.round(rand(gen, B, T), decimals=2)  # nonzero also off the mask: it must not leak in
        gamma = random_gamma(gen)
        lam = round(0.05 + 0.95 * float(rand(gen, 1)), 2)  # lam = 0 is an edge case of its own
        cases.append(Case(f"random #{i}", dict(rewards=rewards, values=values, mask=mask, gamma=gamma, lam=lam)))
    m3 = torch.tensor([[True, True, False, True, False, False]])
    r3 = torch.tensor([[0.0, 0.0, 0.0, 1.0, 0.0, 0.0]], dtype=F64)
    v3 = torch.tensor([[0.5, 0.4, 0.9, 0.7, 0.8, 0.6]], dtype=F64)
    cases += [
        Case("tool output inside", dict(rewards=r3, values=v3, mask=m3, gamma=0.9, lam=0.5)),
        # the edges, graded once the cases above pass
        Case("single-token trajectory", dict(rewards=torch.tensor([[1.0]], dtype=F64), values=torch.tensor([[0.3]], dtype=F64),
                                             mask=torch.tensor([[True]]), gamma=0.9, lam=0.8), frozenset({"end"})),
        Case("one token, then padding", dict(rewards=torch.tensor([[1.0, 0.0, 0.0]], dtype=F64),
                                             values=torch.tensor([[0.3, 0.5, 0.5]], dtype=F64),
                                             mask=torch.tensor([[True, False, False]]), gamma=0.9, lam=0.8),
             frozenset({"end"})),
        Case("a row with nothing generated", dict(rewards=torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                  values=torch.tensor([[0.2, 0.4, 0.6], [0.5, 0.5, 0.5]], dtype=F64),
                                                  mask=torch.tensor([[False, False, False], [True, True, False]]),
                                                  gamma=0.9, lam=0.8), frozenset({"empty_row"})),
        Case("gamma = 0", dict(rewards=r3, values=v3, mask=m3, gamma=0.0, lam=0.5), frozenset({"gamma0"})),
        Case("lambda = 0", dict(rewards=r3, values=v3, mask=m3, gamma=0.9, lam=0.0), frozenset({"lam0"})),
        Case("gamma = lambda = 1", dict(rewards=r3, values=v3, mask=m3, gamma=1.0, lam=1.0), frozenset({"gamma1"})),
    ]
    return cases


def _residuals(case, got, disc):
    """Per masked position: got_t - (delta_t + disc * got_{t'}) with t' the next generated
    position (V = A = 0 after the last one); also which positions are followed by a gap."""
    a = case.args
    r, v, m, g = a["rewards"].to(F64), a["values"].to(F64), a["mask"], a["gamma"]
    nxt = _next_generated(m)
    res, before_gap, last = [], [], []
    for b, t in m.nonzero().tolist():
        n = int(nxt[b, t])
        v_next = float(v[b, n]) if n >= 0 else 0.0
        a_next = float(got[b, n]) if n >= 0 else 0.0
        delta = float(r[b, t]) + g * v_next - float(v[b, t])
        res.append(abs(float(got[b, t]) - delta - disc(a) * a_next))
        before_gap.append(n > t + 1)
        last.append(n < 0)
    return res, before_gap, last


def _gamma_lam(args):
    return args["gamma"] * args["lam"]


def _last_broken(case, got, want):
    res, _, last = _residuals(case, got, _gamma_lam)
    return any(e > 1e-5 for e, l in zip(res, last) if l)


def _recursion_broken(disc):
    return lambda case, got, want: any(e > 1e-5 for e in _residuals(case, got, disc)[0])


def _gap_broken(case, got, want):
    res, gap, _ = _residuals(case, got, _gamma_lam)
    wrong = [e > 1e-5 for e in res]
    return any(w and g for w, g in zip(wrong, gap)) and not any(w and not g for w, g in zip(wrong, gap))


EXERCISE = register(Exercise(
    notebook="02", name="gae", title="GAE's backward loop",
    signature="gae(rewards, values, mask, gamma, lam) -> tensor (B, T)",
    prompt=(
        "Write generalised advantage estimation (Schulman et al. 2016, arXiv 1506.02438).\n"
        "  rewards, values: (B, T) float tensors; values[b, t] = V(s_t), the critic's value before token t\n"
        "  mask: (B, T) bool, True where the policy generated the token (False: tool output, padding)\n"
        "  gamma, lam: floats in [0, 1]\n"
        "Walk backwards over the generated positions of each row:\n"
        "  delta_t = r_t + gamma * V_{t'} - V_t,   A_t = delta_t + gamma * lam * A_{t'}\n"
        "t' is the next GENERATED position (tool output in between is skipped); after the last one\n"
        "V = A = 0 (no bootstrap past the end). Return A, with 0 off the mask."),
    cases=_cases, reference=_reference,
    rules=(
        OFF_MASK,
        NOT_FINITE,
        Rule("you bootstrapped past the end of the trajectory: after the last generated token V = 0, "
             "so its advantage is r - V", _last_broken),
        Rule("your recursion discounts by gamma, not gamma * lam: A_t = delta_t + gamma * lam * A_{t'}",
             lambda c, g, w: _recursion_broken(_gamma_lam)(c, g, w)
             and not _recursion_broken(lambda a: a["gamma"])(c, g, w)),
        Rule("tool output is not a step: delta_t uses V at the next GENERATED position, and A passes "
             "over tool output unchanged", _gap_broken),
        Rule("at lam = 0 GAE is the one-step TD error: A_t = delta_t = r_t + gamma * V_{t'} - V_t",
             lambda c, g, w: any(e > 1e-5 for e in _residuals(c, g, lambda a: 0.0)[0]), frozenset({"lam0"})),
        Rule("A_t must equal delta_t + gamma * lam * A_{t'}, computed backwards from the end",
             _recursion_broken(_gamma_lam)),
    ),
))


# --------------------------------------------------------------------------- 02b: find the bug
def _padded_cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 3), (4, 7), shortest=1)
        B, T = mask.shape
        mask[randint(gen, 0, B - 1), T - 1:] = False  # at least one row ends in padding
        rewards = torch.where(mask & (rand(gen, B, T) < 0.3), torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=1), 0.0)
        values = torch.round(0.1 + 0.9 * rand(gen, B, T), decimals=2)  # what the critic outputs on padding, too
        lam = round(0.05 + 0.95 * float(rand(gen, 1)), 2)
        cases.append(Case(f"random #{i}", dict(rewards=rewards, values=values, mask=mask, gamma=random_gamma(gen), lam=lam)))
    cases += [
        Case("a short row beside a full one", dict(rewards=torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], dtype=F64),
                                                   values=torch.tensor([[0.5, 0.6, 0.8], [0.4, 0.9, 0.9]], dtype=F64),
                                                   mask=torch.tensor([[True, True, True], [True, False, False]]),
                                                   gamma=1.0, lam=0.5)),
        # the edges, graded once the cases above pass
        Case("a row with nothing generated", dict(rewards=torch.tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=F64),
                                                  values=torch.tensor([[0.2, 0.4, 0.6], [0.5, 0.5, 0.5]], dtype=F64),
                                                  mask=torch.tensor([[False, False, False], [True, True, False]]),
                                                  gamma=0.9, lam=0.8), frozenset({"empty_row"})),
        Case("gamma = 0", dict(rewards=torch.tensor([[0.0, 1.0, 0.0]], dtype=F64),
                               values=torch.tensor([[0.5, 0.7, 0.9]], dtype=F64),
                               mask=torch.tensor([[True, True, False]]), gamma=0.0, lam=0.5), frozenset({"gamma0"})),
        Case("lambda = 0", dict(rewards=torch.tensor([[0.0, 1.0, 0.0]], dtype=F64),
                                values=torch.tensor([[0.5, 0.7, 0.9]], dtype=F64),
                                mask=torch.tensor([[True, True, False]]), gamma=0.9, lam=0.0), frozenset({"lam0"})),
    ]
    return cases


def _padded_variant(how):
    """Typical mistakes in a padded batch's GAE: bootstrapping the last generated token from the
    critic's value on the padding after it (the bug planted in 02b); delta_t with V(s_t) in place
    of V(s_{t+1}); discounting the running advantage by gamma alone."""
    def variant(rewards, values, mask, gamma, lam):
        B, T = rewards.shape
        adv = torch.zeros(B, T, dtype=F64)
        for b in range(B):
            running = 0.0
            for t in reversed(range(T)):
                if not mask[b, t]:
                    continue
                inside = t + 1 < T and (how == "padding" or bool(mask[b, t + 1]))
                next_value = float(values[b, t + 1]) if inside else 0.0
                if how == "same_state":
                    next_value = float(values[b, t])
                delta = float(rewards[b, t]) + gamma * next_value - float(values[b, t])
                running = delta + (gamma if how == "gamma_only" else gamma * lam) * running
                adv[b, t] = running
        return adv
    return variant


def buggy_padded_gae(rewards, values, mask, gamma, lam):
    """Generalised advantage estimation on a padded batch.

    rewards, values, mask: (B, T); values[b, t] is the critic's V(s_t) before token t, and each row
    is its generated tokens followed by padding. Returns (B, T) advantages, 0 on padding.
    """
    B, T = rewards.shape
    advantages = torch.zeros(B, T, dtype=torch.float64)
    for b in range(B):
        running = 0.0
        for t in reversed(range(T)):
            if not mask[b, t]:
                continue
            next_value = values[b, t + 1] if t + 1 < T else 0.0
            delta = rewards[b, t] + gamma * next_value - values[b, t]
            running = delta + gamma * lam * running
            advantages[b, t] = running
    return advantages


EXERCISE_B = register(Exercise(
    notebook="02", letter="b", kind="debug", path="deep dive",
    name="padded_gae", title="GAE on a padded batch",
    signature="padded_gae(rewards, values, mask, gamma, lam) -> tensor (B, T)",
    prompt=(
        "Find the bug. The function below should compute GAE (Schulman et al. 2016, arXiv 1506.02438) on a\n"
        "padded batch, as labkit.credit.td.gae does:\n"
        "  rewards, values: (B, T) float tensors; values[b, t] = V(s_t), the critic's value before token t\n"
        "  (a critic outputs a value on padding positions too: it means nothing there)\n"
        "  mask: (B, T) bool, each row its generated tokens (True), then padding (False)\n"
        "  delta_t = r_t + gamma * V(s_{t+1}) - V(s_t),   A_t = delta_t + gamma * lam * A_{t+1}\n"
        "After a row's last generated token V = A = 0 (the episode is over: no bootstrap past its end).\n"
        "Padding gets 0. The code has exactly one planted mistake, of the kind people make in real RL\n"
        "code; fix it and check."),
    cases=_padded_cases, reference=_reference, buggy=buggy_padded_gae,
    rules=(
        OFF_MASK,
        Rule("you bootstrapped from the critic's value on padding: after a row's last generated token the "
             "episode is over, so V(s_{t+1}) = 0 there (the value at t + 1 counts only if t + 1 is generated)",
             looks_like(_padded_variant("padding")), every=True),
        Rule("delta_t uses V(s_t) twice: delta_t = r_t + gamma * V(s_{t+1}) - V(s_t), the NEXT state's value "
             "first", looks_like(_padded_variant("same_state")), every=True),
        Rule("your recursion discounts by gamma, not gamma * lam: A_t = delta_t + gamma * lam * A_{t+1}",
             looks_like(_padded_variant("gamma_only")), every=True),
        Rule("at lam = 0 GAE is the one-step TD error: A_t = delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)",
             wrong, frozenset({"lam0"})),
        Rule("with gamma = 0 nothing is carried back: A_t = r_t - V(s_t)", wrong, frozenset({"gamma0"})),
    ),
))


# --------------------------------------------------------------------------- 02c: run and interpret
def gae_noise_at_lambda_06():
    """The relative variance (noise-to-signal of one batch gradient) of GAE at lambda = 0.6 with the
    learned critic, on the chain of this notebook's lambda sweep: 100 batches of 32, the critic fitted
    on 64 episodes (seeds as ``gae_lambda_sweep`` draws them)."""
    chain = presets.NB02_CHAIN
    env, policy, truth = presets.chain_setup(chain.horizon, n_bifurcations=chain.n_bifurcations,
                                             noise_std=chain.noise_std, slip=chain.slip,
                                             init_std=chain.init_std, env_seed=0, policy_seed=0)
    critic = TabularCritic(env.n_states).fit(env.sample(policy, 64, seed=2))
    batches = env.sample(policy, 100 * 32, seed=1)
    study = gradient_study(policy, batches.split(100), lambda b: td.gae(b, values=critic.value(b), lam=0.6),
                           truth.grad, whole=batches)
    return study["relative_variance"]


@functools.lru_cache(maxsize=None)
def _sweep_setting() -> tuple:
    """The lambda sweep's policy, truth, critics and batches (kept: a wrong reading is compared with
    several misreadings, each a study of the same batches)."""
    chain = presets.NB02_CHAIN
    env, policy, truth = presets.chain_setup(chain.horizon, n_bifurcations=chain.n_bifurcations,
                                             noise_std=chain.noise_std, slip=chain.slip,
                                             init_std=chain.init_std, env_seed=0, policy_seed=0)
    critic = TabularCritic(env.n_states).fit(env.sample(policy, 64, seed=2))
    whole = env.sample(policy, 100 * 32, seed=1)
    return policy, truth, {"learned": critic.value, "exact": truth.value}, whole, whole.split(100)


def _sweep_study(critic: str, lam: float, what: str = "relative_variance"):
    def value():
        policy, truth, critics, whole, batches = _sweep_setting()
        values = critics[critic]
        return gradient_study(policy, batches, lambda b: td.gae(b, values=values(b), lam=lam), truth.grad,
                              whole=whole)[what]
    return value


EXERCISE_C = register(Reading(
    notebook="02", letter="c", name="gae_noise", title="The variance side of the lambda dial",
    prompt=(
        "Run the lambda dial at a lambda it does not print (GAE: Schulman et al. 2016, arXiv 1506.02438).\n"
        "Call lesson.gae_lambda_sweep([0.6], critic_episodes=64, n_batches=100, batch_size=32, seed=0),\n"
        "the sweep of \"The λ dial\" at lambda = 0.6 alone, and read the column relative_variance\n"
        "(E||g - E g||^2 / ||E g||^2, the noise-to-signal of one batch gradient, which the notebook's table\n"
        "leaves out) in the row of the LEARNED critic. Enter it to two decimals (tolerance 0.05). Then\n"
        "compare it with the exact critic's row: at this lambda, how much of the noise is the critic's?"),
    measure=gae_noise_at_lambda_06, tolerance=0.05,
    hint="read it again: lesson.gae_lambda_sweep([0.6], critic_episodes=64, n_batches=100, batch_size=32, seed=0), "
         "the row whose critic is 'learned', the column relative_variance",
    misreadings=(
        Misreading(_sweep_study("exact", 0.6), "that is the exact critic's row; the question asks for the learned one"),
        Misreading(_sweep_study("learned", 0.6, "cosine"), "that is the cosine; the question asks for the column "
                   "relative_variance"),
        Misreading(_sweep_study("learned", 0.6, "variance"), "that is the column variance (it depends on the "
                   "credit's scale); the question asks for relative_variance, the variance over the squared mean"),
        Misreading(_sweep_study("learned", 0.5), "that is the reading at lambda = 0.5: run the sweep at 0.6"),
        Misreading(_sweep_study("learned", 0.75), "that is the reading at lambda = 0.75: run the sweep at 0.6"),
    ),
))
