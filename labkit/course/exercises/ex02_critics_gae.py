"""Exercise 02 (notebook 02_critics_gae): GAE's backward loop over the generated tokens.

Graded against ``labkit.credit.td.gae``; ``reveal_solution(2)`` prints the reference solution,
``gae`` in labkit/course/solutions/ex02_critics_gae.py. The rules check GAE's recursion itself on
the reader's answer (not only against the lab's), so the hint can say which part of it breaks: the
end, the discount, or the step over tool output.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import rand, random_gamma, random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import OFF_MASK
from labkit.course.exercises.references import one_token_rollouts
from labkit.credit import td


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
