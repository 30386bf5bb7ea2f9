"""Exercise 07 (notebook 07_critical_actions): CARL's selection of the most uncertain turns.

Graded against ``labkit.credit.entropy.carl``'s ``info["kept"]``; ``reveal_solution(7)`` prints the
reference solution, ``carl_select`` in labkit/course/solutions/ex07_critical_actions.py.
"""
from __future__ import annotations

import math

import torch

from labkit.course.exercises.cases import rand, random_prefix_mask
from labkit.course.exercises.grader import F64, Case, Exercise, Rule, register
from labkit.course.exercises.mistakes import looks_like, nonzero_where_false
from labkit.course.exercises.references import one_token_rollouts, pad_turns, prefix_ids
from labkit.credit.entropy import carl


def _reference(entropies, present, fraction):
    present = present.bool()
    H = torch.where(present, entropies.to(F64), 0.0)
    r = one_token_rollouts(torch.zeros(present.shape, dtype=F64), present, turn_ids=prefix_ids(present), entropies=H)
    kept = carl(r, top_fraction=fraction).info["kept"]
    return pad_turns(kept, present.shape, torch.bool)


def _cases(gen):
    cases = []
    for i in range(6):
        present = random_prefix_mask(gen, (2, 4), (3, 6), shortest=1, first_full=True)
        B, N = present.shape
        H = torch.round(2.0 * rand(gen, B, N), decimals=3)
        H = torch.where(present, H, 9.9)  # padding may hold anything: it must never be kept
        cases.append(Case(f"random #{i}", dict(entropies=H, present=present, fraction=[0.3, 0.5, 0.25][i % 3])))
    full = torch.ones(2, 4, dtype=torch.bool)
    cases += [
        # the edges, graded once the cases above pass
        Case("an episode with no turn", dict(entropies=torch.tensor([[0.4, 0.9, 0.1], [0.0, 0.0, 0.0]], dtype=F64),
                                             present=torch.tensor([[True, True, True], [False, False, False]]), fraction=0.5),
             frozenset({"empty_row"})),
        Case("one turn in the batch", dict(entropies=torch.tensor([[1.2]], dtype=F64), present=torch.tensor([[True]]), fraction=0.3),
             frozenset({"one_turn"})),
        Case("all entropies equal", dict(entropies=torch.full((2, 4), 0.7, dtype=F64), present=full, fraction=0.3),
             frozenset({"ties"})),
        Case("equal entropies across rows", dict(entropies=torch.tensor([[0.1, 1.5, 0.2], [1.5, 0.3, 1.5]], dtype=F64),
                                                 present=torch.ones(2, 3, dtype=torch.bool), fraction=0.34), frozenset({"ties"})),
        Case("fraction = 1", dict(entropies=torch.tensor([[0.5, 0.1, 0.0], [0.3, 9.9, 9.9]], dtype=F64),
                                  present=torch.tensor([[True, True, True], [True, False, False]]), fraction=1.0),
             frozenset({"fraction1"})),
    ]
    return cases


def _variant(how):
    def variant(entropies, present, fraction):
        present = present.bool()
        H = entropies.to(F64)
        out = torch.zeros_like(present)
        if how == "per_row":
            for b in range(len(H)):
                n = int(present[b].sum())
                if n:
                    k = max(1, math.ceil(fraction * n - 1e-9))
                    idx = torch.sort(-torch.where(present[b], H[b], -math.inf), stable=True).indices[:k]
                    out[b, idx] = True
            return out
        flat_p = present.flatten()
        n = int(flat_p.sum())
        k = {"floor": max(int(fraction * n), 0), "lowest": max(1, math.ceil(fraction * n - 1e-9)),
             "all_entries": max(1, math.ceil(fraction * flat_p.numel() - 1e-9))}[how]
        score = torch.where(flat_p, -H.flatten() if how == "lowest" else H.flatten(), -math.inf)
        idx = torch.sort(-score, stable=True).indices[:min(k, n)]
        flat = torch.zeros_like(flat_p)
        flat[idx] = True
        return flat.view(present.shape)
    return variant


def _count_broken(case, got, want):
    return int(got.sum()) != int(want.sum())


def _ties_broken(case, got, want):
    H = case.args["entropies"].to(F64)
    return (int(got.sum()) == int(want.sum()) and not bool(torch.equal(got, want))
            and torch.equal(torch.sort(H[got]).values, torch.sort(H[want]).values))


EXERCISE = register(Exercise(
    notebook="07", name="carl_select", title="CARL's critical-turn selection",
    signature="carl_select(entropies, present, fraction) -> bool tensor (B, N)",
    prompt=(
        "Write CARL's selection of critical turns (Shen et al. 2025, arXiv 2512.04949): only the turns where\n"
        "the policy was most uncertain get a gradient.\n"
        "  entropies: (B, N) float tensor, the policy's entropy at each turn\n"
        "  present: (B, N) bool, which turns were played (others are padding: never keep them)\n"
        "  fraction: float in (0, 1]\n"
        "Return a (B, N) bool tensor keeping the ceil(fraction * n) present turns with the LARGEST entropy,\n"
        "n = number of present turns in the whole batch (one cut-off for the batch). Ties: keep the\n"
        "earlier turn in row-major order (row by row, left to right)."),
    cases=_cases, reference=_reference, output="bool",
    rules=(
        Rule("a turn that is not present (padding) must never be kept", nonzero_where_false("present")),
        Rule("rank all turns of the batch together (one cut-off for the batch), not row by row",
             looks_like(_variant("per_row")), every=True),
        Rule("keep ceil(fraction * n) turns (at least one), not int(fraction * n)", looks_like(_variant("floor")), every=True),
        Rule("n counts the present turns only, not every entry of the padded table", looks_like(_variant("all_entries")), every=True),
        Rule("CARL keeps the most uncertain turns: the LARGEST entropy, not the smallest", looks_like(_variant("lowest")), every=True),
        Rule("keep exactly ceil(fraction * n) of the n present turns", _count_broken),
        Rule("break ties by position: among equal entropies keep the earlier turns (row-major order)", _ties_broken),
    ),
))
