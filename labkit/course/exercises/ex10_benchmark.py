"""Exercise 10 (notebook 10_benchmark): the benchmark's headline metric, Spearman's rank correlation.

Graded against ``labkit.scoring.rank_correlation``; ``reveal_solution(10)`` prints the reference
solution, ``rank_correlation`` in labkit/course/solutions/ex10_benchmark.py.
"""
from __future__ import annotations

import torch

from labkit.course.exercises.cases import random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import any_of, looks_like, wrong
from labkit.scoring import rank_correlation


def _reference(credit, truth, mask):
    return torch.tensor(rank_correlation(credit.to(F64), truth.to(F64), mask), dtype=F64)


def _cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 3), (4, 8))
        B, T = mask.shape
        truth = torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=2)
        credit = torch.round(truth + torch.randn(B, T, generator=gen, dtype=F64), decimals=1 if i % 2 else 2)
        if i >= 3:  # episode-level credit: one value per row, so heavy ties
            credit = credit[:, :1].expand(B, T).clone()
            if bool((credit[mask] == credit[0, 0]).all()):  # a constant credit is an edge case of its own
                credit[0] += 0.5
        credit = torch.where(mask, credit, 5.0)  # padding holds junk: it must not be scored
        truth = torch.where(mask, truth, -5.0)
        cases.append(Case(f"random #{i}", dict(credit=credit, truth=truth, mask=mask)))
    m = torch.tensor([[True, True, True, True, False]])
    cases += [
        Case("monotone, not linear", dict(credit=torch.tensor([[1.0, 8.0, 27.0, 64.0, 0.0]], dtype=F64),
                                          truth=torch.tensor([[1.0, 2.0, 3.0, 4.0, 0.0]], dtype=F64), mask=m)),
        Case("ties in the credit", dict(credit=torch.tensor([[1.0, 1.0, 2.0, 2.0, 0.0]], dtype=F64),
                                        truth=torch.tensor([[0.1, 0.4, 0.3, 0.9, 0.0]], dtype=F64), mask=m)),
        # the chain's exact advantage: 0 on every routine token, so the truth ties as much as the credit
        Case("ties in the truth", dict(credit=torch.tensor([[0.3, -0.2, 0.5, 0.1, 0.4, -0.1, 9.0]], dtype=F64),
                                       truth=torch.tensor([[0.0, 0.0, 0.7, 0.0, 0.0, -0.6, 9.0]], dtype=F64),
                                       mask=torch.tensor([[True] * 6 + [False]]))),
        # the edges, graded once the cases above pass
        Case("constant credit", dict(credit=torch.tensor([[0.5, 0.5, 0.5, 0.5, 0.0]], dtype=F64),
                                     truth=torch.tensor([[0.1, 0.4, 0.3, 0.9, 0.0]], dtype=F64), mask=m), frozenset({"constant"})),
        Case("constant truth", dict(credit=torch.tensor([[0.1, 0.4, 0.3, 0.9, 0.0]], dtype=F64),
                                    truth=torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]], dtype=F64), mask=m), frozenset({"constant"})),
        Case("one scored position", dict(credit=torch.tensor([[0.5, 0.2]], dtype=F64), truth=torch.tensor([[0.1, 0.3]], dtype=F64),
                                         mask=torch.tensor([[True, False]])), frozenset({"constant"})),
    ]
    return cases


def _plain_ranks(x: torch.Tensor) -> torch.Tensor:
    r = torch.empty_like(x)
    r[torch.argsort(x, stable=True)] = torch.arange(len(x), dtype=x.dtype)
    return r


def _average_ranks(x: torch.Tensor) -> torch.Tensor:
    return torch.stack([(x < v).sum() + ((x == v).sum() - 1) / 2 for v in x]).to(F64)


def _corr(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a - a.mean(), b - b.mean()
    return (a @ b) / (a.norm() * b.norm())


def _variant(how):
    def variant(credit, truth, mask):
        c, t = (credit.to(F64).flatten(), truth.to(F64).flatten()) if how == "no_mask" else \
            (credit.to(F64)[mask], truth.to(F64)[mask])
        if how == "pearson":
            return _corr(c, t)
        if how == "plain_ranks":
            return _corr(_plain_ranks(c), _plain_ranks(t))
        if how == "plain_truth_ranks":   # ties averaged in the credit only
            return _corr(_average_ranks(c), _plain_ranks(t))
        return _corr(_average_ranks(c), _average_ranks(t))  # no_mask: right ranks, wrong positions
    return variant


EXERCISE = register(Exercise(
    notebook="10", name="rank_correlation", title="The benchmark's rank correlation",
    signature="rank_correlation(credit, truth, mask) -> float",
    prompt=(
        "Write the benchmark's headline metric: Spearman's rank correlation between an estimator's credit and\n"
        "the exact advantage (the survey's benchmark proposal, arXiv 2604.09459, section 9.2).\n"
        "  credit, truth: (B, T) float tensors;  mask: (B, T) bool, the positions to score\n"
        "Return one float: the Pearson correlation of the RANKS of credit[mask] and truth[mask], where tied\n"
        "values share their average rank. A constant side (or a single position) ranks nothing: return 0.0."),
    cases=_cases, reference=_reference,
    rules=(
        Rule("a constant side, credit or truth (or a single position), ranks nothing: return 0.0, not NaN",
             not_finite, frozenset({"constant"})),
        NOT_FINITE,
        Rule("score only the positions where mask is True (padding and tool output are not credit)",
             looks_like(_variant("no_mask")), every=True),
        Rule("rank the values first: Spearman's rho is the Pearson correlation of the RANKS "
             "(a monotone credit that is not linear should score 1)", looks_like(_variant("pearson")), every=True),
        Rule("tied values must share their average rank, in the credit and in the truth (episode-level credit "
             "gives a whole row one value; the exact advantage is 0 on every routine token)",
             any_of(looks_like(_variant("plain_ranks")), looks_like(_variant("plain_truth_ranks"))), every=True),

        # a guard on the credit alone leaves a constant truth to a 0 / 0 or to whatever a tie-breaking rank gives
        Rule("a constant side ranks nothing, the truth as much as the credit (or a single position): guard "
             "both sides and return 0.0", wrong, frozenset({"constant"})),
    ),
))
