"""Monte Carlo forks, trees and process labels (labkit.credit.search_trees): OmegaPRM's binary
search, TreeRL's tree advantages, APPO's branching score, SCRL's subproblem scores and PRIME's
implicit-reward RLOO against hand-computed cases, degenerate inputs and bad arguments."""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.credit import ESTIMATORS, spec
from labkit.credit.search_trees import appo, omegaprm, prime, scrl, treerl

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def rows(lengths, rewards, *, step_len=1, groups=None, entropies=None, logprobs=None):
    """Rollouts of the given lengths, outcome on the last token, steps of ``step_len`` tokens."""
    B, T = len(lengths), max(lengths)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    for b, (n, r) in enumerate(zip(lengths, rewards)):
        mask[b, :n] = True
        rew[b, n - 1] = r
    step_ids = torch.where(mask, torch.arange(T)[None, :] // step_len, -1)
    kw = {}
    if entropies is not None:
        kw["entropies"] = torch.tensor(entropies, dtype=torch.float64)
    if logprobs is not None:
        kw["logprobs"] = torch.tensor(logprobs, dtype=torch.float64)
    return Rollouts(tokens=torch.arange(T).repeat(B, 1), mask=mask, rewards=rew, step_ids=step_ids,
                    group_ids=torch.tensor(groups) if groups is not None else torch.arange(B), **kw)


def table_fn(table, asked=None):
    """A fake fork sampler: V before position t is ``table[b][t]``; each call records its cuts and
    costs k per marked position."""
    def fn(rollouts, cuts, k):
        if asked is not None:
            asked.append(cuts.nonzero().tolist())
        return torch.tensor(table, dtype=torch.float64), Cost(policy_forwards=int(cuts.sum()) * k)
    return fn


# --------------------------------------------------------------------------- OmegaPRM
def test_omegaprm_binary_search_hand_computed():
    # 8 one-token steps, wrong answer; V before step m (the prefix of m steps) below: the first
    # prefix with V = 0 has 6 steps, so step 6 (1-based) is the first wrong one
    V = [[0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.0, 0.0]]
    asked = []
    ro = rows([8], [0.0])
    c = omegaprm(ro, fork_value_fn=table_fn(V, asked), k=2)
    # probes: m = 4 (V 0.5 > 0: lo 4), m = 6 (V 0: hi 6), m = 5 (V 0.4: lo 5) -> e = 6
    assert asked == [[[0, 4]], [[0, 6]], [[0, 5]]]
    assert c.info["first_error"].tolist() == [5] and c.info["probes"].tolist() == [3]
    assert c.cost.policy_forwards == 6  # 3 probes x k = 2, against 7 x 2 for a label per step
    # soft: steps 1..4 take the nearest later successful probe (0.5 after step 4), step 5 its own
    # probe 0.4, steps 6.. get 0
    assert c.values[0].tolist() == pytest.approx([0.5, 0.5, 0.5, 0.5, 0.4, 0.0, 0.0, 0.0])
    hard = omegaprm(ro, fork_value_fn=table_fn(V), k=2, mode="hard")
    assert hard.values[0].tolist() == [1.0] * 5 + [0.0] * 3
    assert c.level == "step" and c.method == "omegaprm_soft" and "omegaprm" in ESTIMATORS


def test_omegaprm_searches_wrong_rollouts_only_and_degenerate_inputs():
    V = [[0.5, 0.5, 0.5], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]
    ro = rows([3, 3, 1], [1.0, 0.0, 0.0])
    asked = []
    c = omegaprm(ro, fork_value_fn=table_fn(V, asked), k=1)
    # row 0 is right: not searched, every step gets its outcome; row 1: probe m = 1 (V 0 at
    # position 1) -> the first step is wrong; row 2: one step, no probe needed
    assert asked == [[[1, 1]]]
    assert c.values.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert c.info["first_error"].tolist() == [-1, 0, 0] and c.cost.policy_forwards == 1
    # nothing to search: no call, no cost
    none = omegaprm(rows([2], [1.0]), fork_value_fn=lambda *a: 1 / 0)
    assert none.cost == Cost() and none.values[0].tolist() == [1.0, 1.0]


def test_omegaprm_bad_arguments():
    ro = rows([4], [0.0])
    with pytest.raises(TypeError, match="^fork_value_fn"):
        omegaprm(ro, fork_value_fn=3)
    with pytest.raises(ValueError, match="^k"):
        omegaprm(ro, fork_value_fn=table_fn([[0.0] * 4]), k=0)
    with pytest.raises(ValueError, match="^mode"):
        omegaprm(ro, fork_value_fn=table_fn([[0.0] * 4]), mode="medium")
    with pytest.raises(TypeError, match="^fork_value_fn"):
        omegaprm(ro, fork_value_fn=lambda r, c, k: (torch.zeros(1, 4), None))
    with pytest.raises(ValueError, match="^fork_value_fn result"):
        omegaprm(ro, fork_value_fn=lambda r, c, k: (torch.zeros(1, 3), Cost()))


# --------------------------------------------------------------------------- TreeRL
def test_treerl_tree_values_hand_computed():
    # one rollout of 4 tokens, outcome 1; highest entropies at 1 and 3 -> fork points 1, 3;
    # k = 2 forks each with means 0.5 (at 1) and 0 (at 3)
    ro = rows([4], [1.0], entropies=[[0.1, 0.9, 0.2, 0.8]])
    V = [[0.0, 0.5, 0.0, 0.0]]
    asked = []
    c = treerl(ro, fork_value_fn=table_fn(V, asked), n_points=2, k=2)
    assert asked == [[[0, 1], [0, 3]]] and c.cost.policy_forwards == 4
    # leaves: rollout (1), forks at 1 (1, 0), forks at 3 (0, 0)
    # seg0 [0]: below = all 5 leaves, V = 2/5 = V(root); seg1 [1, 2]: rollout + forks at 3, V = 1/3;
    # seg2 [3]: the rollout, V = 1
    a0 = 0.0
    a1 = ((1 / 3 - 2 / 5) + (1 / 3 - 2 / 5)) / math.sqrt(3)
    a2 = ((1 - 2 / 5) + (1 - 1 / 3)) / 1.0
    assert c.token[0].tolist() == pytest.approx([a0, a1, a1, a2])
    assert c.info["segment_ids"][0].tolist() == [0, 1, 1, 2]
    flat = treerl(ro, fork_value_fn=table_fn(V), n_points=2, k=2, reweight=False)
    assert flat.token[0, 1].item() == pytest.approx(2 * (1 / 3 - 2 / 5))


def test_treerl_group_root_and_degenerate_inputs():
    # two rollouts in one group, no forks: one segment each, A = 2 * (R - mean)
    ro = rows([2, 2], [1.0, 0.0], groups=[0, 0], entropies=[[0.5, 0.5], [0.5, 0.5]])
    c = treerl(ro, fork_value_fn=lambda *a: 1 / 0, n_points=0)
    assert c.token.tolist() == [[1.0, 1.0], [-1.0, -1.0]]
    assert c.cost == Cost()
    # a fork at the response start (tied entropies go to the earlier token): segment 0 is empty,
    # the rest hangs from the root
    ro = rows([2], [1.0], entropies=[[0.5, 0.5]])
    c = treerl(ro, fork_value_fn=table_fn([[0.0, 0.0]]), n_points=1, k=2)
    # root: leaves 1, 0, 0 -> 1/3; segment 1 = the whole response, V = 1, parent = root
    assert c.token[0].tolist() == pytest.approx([2 * (1 - 1 / 3)] * 2)
    # a group of one without forks gets 0
    assert treerl(rows([3], [1.0], entropies=[[1.0] * 3]), fork_value_fn=table_fn([[0.0] * 3]),
                  n_points=0).token.abs().sum() == 0


def test_treerl_bad_arguments():
    ro = rows([3], [1.0], entropies=[[1.0] * 3])
    fn = table_fn([[0.0] * 3])
    with pytest.raises(ValueError, match="^n_points"):
        treerl(ro, fork_value_fn=fn, n_points=-1)
    with pytest.raises(ValueError, match="^k"):
        treerl(ro, fork_value_fn=fn, k=0)
    with pytest.raises(TypeError, match="^reweight"):
        treerl(ro, fork_value_fn=fn, reweight="yes")
    with pytest.raises(ValueError, match="^rollouts.entropies"):
        treerl(rows([3], [1.0]), fork_value_fn=fn)


# --------------------------------------------------------------------------- APPO
def test_appo_branching_score_and_rescaled_procedures_hand_computed():
    # 4 tokens; entropies favour token 2; log-probs rise after token 2 (-2 before, 0 after)
    ro = rows([4], [1.0], entropies=[[0.0, 0.1, 0.5, 0.2]], logprobs=[[-2.0, -2.0, 0.0, 0.0]])
    V = [[0.5, 0.0, 0.8, 0.0]]
    asked = []
    c = appo(ro, fork_value_fn=table_fn(V, asked), n_points=1, k=2, window=1, eps=0.1)
    # b_t = H_t + (lp_{t+1} - lp_{t-1}): t=1: 0.1 + (0 + 2) = 2.1; t=2: 0.5 + (0 + 2) = 2.5; t=3: 0.2 + 0
    assert c.info["branch_scores"][0].tolist() == pytest.approx([0.0 + (-2.0 - 0.0), 2.1, 2.5, 0.2])
    assert asked == [[[0, 0], [0, 2]]]  # the response start and the fork point
    a0 = (0.8 - 0.5) / (math.sqrt(0.25) + 0.1)
    a1 = (1.0 - 0.8) / (math.sqrt(0.8 * 0.2) + 0.1)
    assert c.token[0].tolist() == pytest.approx([a0, a0, a1, a1])
    assert c.cost.policy_forwards == 4


def test_appo_degenerate_inputs():
    ro = rows([3], [0.0], entropies=[[1.0] * 3], logprobs=[[-1.0] * 3])
    c = appo(ro, fork_value_fn=table_fn([[1.0, 0.0, 0.0]]), n_points=0)
    # one procedure from a branch whose forks all succeeded: (0 - 1) / (0 + eps)
    assert c.token[0].tolist() == pytest.approx([-10.0] * 3)
    one = appo(rows([1], [1.0], entropies=[[1.0]], logprobs=[[-1.0]]), fork_value_fn=table_fn([[0.5]]))
    assert one.token[0].tolist() == pytest.approx([0.5 / 0.6])


def test_appo_bad_arguments():
    ro = rows([3], [1.0], entropies=[[1.0] * 3], logprobs=[[-1.0] * 3])
    fn = table_fn([[0.5] * 3])
    with pytest.raises(ValueError, match="^window"):
        appo(ro, fork_value_fn=fn, window=0)
    with pytest.raises(ValueError, match="^eps"):
        appo(ro, fork_value_fn=fn, eps=0.0)
    with pytest.raises(ValueError, match="^rollouts.entropies"):
        appo(rows([3], [1.0]), fork_value_fn=fn)
    with pytest.raises(ValueError, match="^rollouts.entropies"):
        appo(rows([3], [1.0], entropies=[[1.0] * 3]), fork_value_fn=fn)  # no log-probabilities
    with pytest.raises(ValueError, match="^weight"):
        appo(ro, fork_value_fn=fn, weight=float("nan"))


# --------------------------------------------------------------------------- SCRL
def test_scrl_group_normalised_subproblem_scores_hand_computed():
    # three responses to one prompt, two steps each (two tokens a step); the third stops after one
    ro = rows([4, 4, 2], [1.0, 0.0, 0.0], step_len=2, groups=[0, 0, 0])
    v = torch.tensor([[1.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    c = scrl(ro, subproblem_scores=v)
    s0 = math.sqrt(1 / 3)  # std of (1, 1, 0), unbiased
    z = 1 / 3 / (s0 + 1e-6)
    s1 = math.sqrt(0.5)  # step 1: only rows 0 and 1, (1, 0)
    assert c.values[:, 0].tolist() == pytest.approx([z, z, -2 * z])
    assert c.values[:2, 1].tolist() == pytest.approx([0.5 / (s1 + 1e-6), -0.5 / (s1 + 1e-6)])
    assert c.values[2, 1].item() == 0.0 and c.cost == Cost()
    called = scrl(ro, subproblem_scores=lambda r: v)
    assert called.cost == Cost(aux_calls=3) and torch.equal(called.token, c.token)


def test_scrl_degenerate_and_bad_inputs():
    ro = rows([2], [1.0])  # a group of one: raw scores
    assert scrl(ro, subproblem_scores=torch.tensor([[1.0, 0.0]])).values[0].tolist() == pytest.approx([1 / (1 + 1e-6), 0.0])
    with pytest.raises(ValueError, match="^subproblem_scores"):
        scrl(ro)
    with pytest.raises(ValueError, match="^subproblem_scores"):
        scrl(ro, subproblem_scores=torch.tensor([[2.0, 0.0]]))
    with pytest.raises(ValueError, match="^subproblem_scores"):
        scrl(ro, subproblem_scores=torch.tensor([[1.0, 0.0, 1.0]]))


# --------------------------------------------------------------------------- PRIME
def test_prime_rloo_on_both_reward_sources_hand_computed():
    ro = rows([2, 3], [1.0, 0.0], groups=[0, 0])
    r = torch.tensor([[0.2, 0.4, 0.0], [0.3, 0.0, -0.3]])
    c = prime(ro, implicit_rewards=r)
    # sequence means 0.3 and 0.0; process baseline = the other's mean; outcome RLOO +1 / -1
    p0 = [0.2 - 0.0, 0.4 - 0.0]
    p1 = [0.3 - 0.3, 0.0 - 0.3, -0.3 - 0.3]
    assert c.token[0, :2].tolist() == pytest.approx([p0[0] + p0[1] + 1.0, p0[1] + 1.0])
    assert c.token[1].tolist() == pytest.approx([sum(p1) - 1.0, p1[1] + p1[2] - 1.0, p1[2] - 1.0])
    g = prime(ro, implicit_rewards=r, gamma=0.5, outcome_weight=0.0, process_weight=2.0)
    assert g.token[1, 0].item() == pytest.approx(2 * (p1[0] + 0.5 * p1[1] + 0.25 * p1[2]))
    assert c.info["outcome_advantage"].tolist() == [1.0, -1.0]


def test_prime_degenerate_and_bad_inputs():
    ro = rows([2], [1.0])  # a group of one: baselines 0, the outcome term 0
    c = prime(ro, implicit_rewards=torch.tensor([[0.1, 0.2]]))
    assert c.token[0].tolist() == pytest.approx([0.3, 0.2])
    zero = prime(rows([2, 2], [1.0, 0.0], groups=[0, 0]), implicit_rewards=torch.zeros(2, 2))
    assert zero.token.tolist() == [[1.0, 1.0], [-1.0, -1.0]]  # RLOO outcome credit on every token
    w = prime(rows([2, 2], [1.0, 0.0], groups=[0, 0]), implicit_rewards=torch.zeros(2, 2), whiten_advantages=True)
    assert float(w.token.mean()) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="^implicit_rewards"):
        prime(ro)
    with pytest.raises(ValueError, match="^implicit_rewards"):
        prime(ro, implicit_rewards=torch.zeros(1, 3))
    with pytest.raises(ValueError, match="^gamma"):
        prime(ro, implicit_rewards=torch.zeros(1, 2), gamma=2.0)
    assert prime(ro, implicit_rewards=lambda r: torch.zeros(1, 2)).cost == Cost(aux_calls=1)


def test_the_specs_say_what_each_replaces():
    assert [spec(n).status for n in ("omegaprm", "treerl", "appo", "scrl", "prime")] == [
        "implemented", "implemented", "adaptation", "adaptation", "adaptation"]
    assert "curriculum" in spec("scrl").replaces and "offline" in spec("prime").replaces


# --------------------------------------------------------------------------- the real tiny LM
def test_real_lm_forks_and_cost_accounting(lm_ref):
    from labkit.credit.search_trees import subproblem_verdicts
    env, ro = lm_ref
    ro = ro.select(torch.arange(4))
    fn = env.cut_value_fn(seed=1)
    o = omegaprm(ro, fork_value_fn=fn, k=2)
    assert o.cost.policy_forwards == 2 * int(o.info["probes"].sum())
    t = treerl(ro, fork_value_fn=fn, n_points=1, k=2)
    assert t.cost.policy_forwards <= 2 * ro.batch_size and torch.isfinite(t.token).all()
    v = subproblem_verdicts(env, ro)
    assert v.shape == ro.view(ro.rewards, "step", "sum")[0].shape
    # a right answer answers its last subproblem (the answer) right
    right = ro.scores > 0
    last = ro.n_steps - 1
    assert bool((v[right, last[right]] == 1).all())
    s = scrl(ro, subproblem_scores=v)
    assert torch.isfinite(s.token).all() and s.cost == Cost()
