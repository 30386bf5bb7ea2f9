"""Exercises of notebook 10_benchmark: 10a, the benchmark's headline metric, Spearman's rank
correlation; 10b, recall@k of the deciding positions with a planted bug; 10c, whose credit is best at
equal compute on the cached frontier.

10a is graded against ``labkit.scoring.rank_correlation``, 10b against ``labkit.scoring.recall_at_k``;
``reveal_solution("10a")`` / ``("10b")`` print the reference solutions
(labkit/course/solutions/ex10_benchmark.py), ``reveal_solution("10c")`` the lab's run.
"""
from __future__ import annotations

import torch

from labkit.bench.frontier import FRONTIER_DIR, frontier_band, load_frontier
from labkit.course.exercises.cases import randint, random_prefix_mask
from labkit.course.exercises.grader import F64, NOT_FINITE, Case, Exercise, Rule, not_finite, register
from labkit.course.exercises.mistakes import any_of, looks_like, wrong
from labkit.course.exercises.reading import Misreading, Reading
from labkit.scoring import rank_correlation, recall_at_k


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


# --------------------------------------------------------------------------- 10b: find the bug in recall@k
def _recall_reference(credit, mask, targets):
    return torch.tensor(recall_at_k(credit.to(F64), mask, targets), dtype=F64)


def _recall_cases(gen):
    cases = []
    for i in range(5):
        mask = random_prefix_mask(gen, (2, 3), (5, 8), shortest=4, tool_output=True)
        B, T = mask.shape
        credit = torch.round(torch.randn(B, T, generator=gen, dtype=F64), decimals=2)
        if i >= 3:  # episode-level credit: one value per row, so every position ties
            credit = credit[:, :1].expand(B, T).clone()
        targets = torch.zeros(B, T, dtype=torch.bool)
        for b in range(B):  # one to three deciding positions, inside the mask, per row
            inside = torch.nonzero(mask[b]).flatten()
            pick = inside[torch.randperm(len(inside), generator=gen)[: randint(gen, 1, min(3, len(inside) - 1))]]
            targets[b, pick] = True
        credit = torch.where(mask, credit, 5.0)  # padding and tool output hold junk: they must not be ranked
        cases.append(Case(f"random #{i}", dict(credit=credit, mask=mask, targets=targets)))
    m = torch.tensor([[True, True, True, True, False, False]])
    cases += [
        Case("a fork taken wrong: large negative credit",
             dict(credit=torch.tensor([[0.1, -0.9, 0.2, 0.3, 0.0, 0.0]], dtype=F64), mask=m,
                  targets=torch.tensor([[False, True, False, False, False, False]]))),
        Case("junk on the padding", dict(credit=torch.tensor([[0.1, 0.8, 0.2, 0.3, 9.0, 9.0]], dtype=F64), mask=m,
                                         targets=torch.tensor([[False, True, False, True, False, False]]))),
        Case("one credit per episode", dict(credit=torch.tensor([[0.5] * 6, [-0.2] * 6], dtype=F64),
                                            mask=torch.tensor([[True] * 4 + [False] * 2, [True] * 6]),
                                            targets=torch.tensor([[False, False, True, False, False, False],
                                                                  [False, False, False, True, True, False]]))),
        # the edges, graded once the cases above pass
        Case("a row without a deciding position",
             dict(credit=torch.tensor([[0.1, 0.8, 0.2, 0.3], [0.5, 0.1, 0.2, 0.0]], dtype=F64),
                  mask=torch.tensor([[True, True, True, True], [True, True, True, False]]),
                  targets=torch.tensor([[False, True, False, False], [False, False, False, False]])),
             frozenset({"no_target"})),
    ]
    return cases


def _recall_variant(how):
    def variant(credit, mask, targets):
        recalls, hits, total = [], 0.0, 0
        for b in range(credit.shape[0]):
            wanted = targets[b] & mask[b]
            k = int(wanted.sum())
            if k == 0:
                if how in ("no_target_zero", "no_target_nan"):
                    recalls.append(0.0 if how == "no_target_zero" else float("nan"))
                continue
            keep = torch.ones_like(mask[b]) if how == "padding" else mask[b]
            size = credit[b].to(F64)[keep]
            size = size if how == "signed" else size.abs()
            wanted = wanted[keep]
            if how == "first_k":  # ties broken by position, as a plain top-k does
                pick = torch.zeros(len(size), dtype=F64)
                pick[torch.sort(-size, stable=True).indices[:k]] = 1.0
            else:
                kth = torch.sort(size, descending=True).values[k - 1]
                above, tied = size > kth, size == kth
                pick = above.to(F64)
                pick[tied] = (k - int(above.sum())) / int(tied.sum())
            recalls.append(float(pick[wanted].sum()) / k)
            hits, total = hits + float(pick[wanted].sum()), total + k
        return torch.tensor(hits / total if how == "pooled" else sum(recalls) / len(recalls), dtype=F64)
    return variant


def _buggy_recall(credit, mask, targets):
    """Recall@k of the deciding positions, averaged over the trajectories that have one.

    In each trajectory, k is its number of deciding positions (targets inside the mask); its
    recall is the share of them among the k generated positions with the largest |credit|,
    a tie at the k-th value counted with the probability that it would be picked.
    """
    recalls = []
    for b in range(credit.shape[0]):
        wanted = targets[b] & mask[b]
        k = int(wanted.sum())
        if k == 0:
            continue
        size = credit[b].abs()
        kth = torch.sort(size, descending=True).values[k - 1]
        above, tied = size > kth, size == kth
        pick = above.double()
        pick[tied] = (k - int(above.sum())) / int(tied.sum())
        recalls.append(float(pick[wanted].sum()) / k)
    return sum(recalls) / len(recalls)


EXERCISE_B = register(Exercise(
    notebook="10", letter="b", kind="debug", path="deep dive", buggy=_buggy_recall,
    name="recall_at_k", title="Recall@k of the deciding positions",
    signature="recall_at_k(credit, mask, targets) -> float",
    prompt=(
        "The function below should compute the benchmark's recall@k of the deciding positions (the survey's\n"
        "benchmark, arXiv 2604.09459, section 9.3), as labkit.scoring.recall_at_k does:\n"
        "  credit: (B, T) float tensor;  mask: (B, T) bool, the generated positions;\n"
        "  targets: (B, T) bool, the deciding positions (forks, bifurcations)\n"
        "In each trajectory let k be its number of deciding positions inside the mask; its recall is the\n"
        "share of them among the k generated positions with the largest |credit|. A tie at the k-th value\n"
        "counts each tied position with the probability that it would be picked (credit that is the same\n"
        "on every token scores the chance level k / n). Return the mean recall over the trajectories with\n"
        "at least one deciding position, as a float.\n"
        "It has exactly one planted mistake of the kind people make. Find it and fix it."),
    cases=_recall_cases, reference=_recall_reference,
    rules=(
        Rule("rank only the generated positions (mask True): padding and tool output are no candidates, "
             "yet junk there takes places in your top k (a mask applied after ranking comes too late)",
             looks_like(_recall_variant("padding")), every=True),
        Rule("rank by |credit|: a large negative credit on a deciding position (the wrong token at a fork) "
             "points at it as much as a large positive one", looks_like(_recall_variant("signed")), every=True),
        Rule("a tie at the k-th value must count each tied position with the probability it would be picked, "
             "(k - number above) / number tied, not take the first ones (torch.topk breaks ties by position)",
             looks_like(_recall_variant("first_k")), every=True),
        Rule("average the recall per trajectory, not the hits pooled over the batch: a trajectory with one "
             "deciding position counts as much as one with three", looks_like(_recall_variant("pooled")), every=True),
        Rule("a trajectory without a deciding position inside its mask is left out of the average, neither "
             "counted as 0 nor as 0 / 0", wrong, frozenset({"no_target"})),
    ),
))


# --------------------------------------------------------------------------- 10c: the best credit at equal compute
def _best_credit_toolworld():
    """The cached frontier (tabular chain and ToolWorld, ``scripts/build_frontier.py``): in
    ToolWorld at 10 turns, after training to 4,096 episode equivalents, the arm whose credit
    ranks closest to the exact advantage (mean rank correlation over seeds)."""
    runs = load_frontier(FRONTIER_DIR)[0]
    quality = frontier_band(runs, "credit_rank")
    at = quality[(quality.world == "toolworld") & (quality.horizon == 10) & (quality.budget == 4096)]
    return at.set_index("estimator")["mean"].idxmax()


def _best_success_toolworld():
    """The misreading: the arm with the best final success at the same setting."""
    runs = load_frontier(FRONTIER_DIR)[0]
    success = frontier_band(runs, "success")
    at = success[(success.world == "toolworld") & (success.horizon == 10) & (success.budget == 4096)]
    return at.set_index("estimator")["mean"].idxmax()


EXERCISE_C = register(Reading(
    notebook="10", letter="c", name="best_credit", title="Whose credit is best at equal compute",
    prompt=(
        "Read the efficiency frontier (section 3; survey arXiv 2604.09459, section 9.2) in ToolWorld at 10 turns,\n"
        "metric credit quality (rank correlation of the credit with the exact advantage, mean over seeds), at a\n"
        "budget of 4,096 episode equivalents. Which arm's credit ranks the tokens best there? Answer with one\n"
        "of 'grpo', 'gigpo', 'vineppo', 'c3'."),
    measure=_best_credit_toolworld, choices=("grpo", "gigpo", "vineppo", "c3"),
    hint="read the credit-quality metric in ToolWorld at 10 turns, at 4,096 episode equivalents (the third budget)",
    misreadings=(
        Misreading(_best_success_toolworld, "that arm has the best final SUCCESS there: switch the metric to "
                                            "credit quality"),
    ),
))
