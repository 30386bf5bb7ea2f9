"""Monte Carlo credit (labkit.credit.mc): VinePPO and Math-Shepherd against the chain's exact
values, SPO-chain (segment Monte Carlo) and TEMPO (prefix-tree TD) against hand-computed cases.
"""

import math

import pytest
import torch

from labkit.core.credit import Cost
from labkit.core.rollouts import Rollouts
from labkit.course.presets import chain_setup
from labkit.credit import ESTIMATORS, estimate
from labkit.credit.mc import math_shepherd, spo, tempo, vineppo

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_vineppo_with_exact_values_equals_the_exact_advantage_without_noise():
    env, pol, tr = chain_setup(10, n_bifurcations=3, init_std=0.7, policy_seed=2)
    ro = env.sample(pol, 64, seed=0)
    c = vineppo(ro, value_fn=tr.step_value_fn())
    assert torch.allclose(c.token, tr.advantage(ro), atol=1e-12)
    assert c.level == "step" and c.cost == Cost()


def test_vineppo_values_converge_to_truth_as_k_grows():
    env, pol, tr = chain_setup(12, init_std=0.5, policy_seed=1, slip=0.1)
    ro = env.sample(pol, 32, seed=0)
    exact = ro.view(tr.value(ro), "step", "first")[0]
    errors = {}
    for k in (4, 64, 1024):
        c = vineppo(ro, value_fn=env.vine_value_fn(pol, seed=k), k=k)
        errors[k] = float((c.info["step_values"] - exact).abs().mean())
        assert c.cost.policy_forwards == 32 * 12 * k and c.cost.env_resets == 32 * 12 * k
    assert errors[1024] < errors[64] < errors[4]
    assert errors[1024] < 0.02


def test_math_shepherd_labels():
    env, pol, tr = chain_setup(8, n_bifurcations=2, init_std=0.5, policy_seed=4)
    ro = env.sample(pol, 64, seed=0)
    soft = math_shepherd(ro, value_fn=tr.step_value_fn(), mode="soft")
    # with exact values the soft label of step t is Q(s_t, a_t) (no noise, no slip here)
    assert torch.allclose(soft.token, tr.q_value(ro), atol=1e-12)
    hard = math_shepherd(ro, value_fn=env.vine_value_fn(pol), k=8, mode="hard")
    assert set(hard.token.unique().tolist()) <= {0.0, 1.0}
    # the last step's label is the trajectory's own outcome
    assert torch.equal(hard.token[:, -1], ro.scores.to(hard.token.dtype))
    with pytest.raises(ValueError, match="mode"):
        math_shepherd(ro, value_fn=tr.step_value_fn(), mode="medium")


def test_math_shepherd_hard_mode_rejects_non_binary_rewards():
    env, pol, tr = chain_setup(6, init_std=0.5, policy_seed=2)
    ro = env.sample(pol, 8, seed=0)
    scaled = ro.with_(rewards=ro.rewards * 2.5)
    with pytest.raises(ValueError, match=r"^rollouts\.rewards: .*\{0, 1\}"):
        math_shepherd(scaled, value_fn=tr.step_value_fn(), mode="hard")
    soft = math_shepherd(scaled, value_fn=tr.step_value_fn(), mode="soft")  # soft mode takes any reward
    assert soft.level == "step"
    # a one-step trajectory is labelled with its own outcome
    one = chain_setup(1, n_bifurcations=1, init_std=0.5, policy_seed=2)
    ro1 = one[0].sample(one[1], 8, seed=0)
    lab = math_shepherd(ro1, value_fn=one[2].step_value_fn(), mode="hard")
    assert torch.equal(lab.values[:, 0], ro1.scores.to(lab.values.dtype))


def test_registered_by_name():
    env, pol, tr = chain_setup(5)
    ro = env.sample(pol, 4, seed=0)
    assert estimate("vineppo", ro, value_fn=tr.step_value_fn()).method == "vineppo"
    assert estimate("td0", ro, values=tr.value(ro)).method == "td0"


V_TABLE = [0.2, 0.4, 0.6, 0.7, 0.9, 0.5]  # V of the prefix before each position (a fake, exact sampler)


def chain(probs, reward=1.0, table=V_TABLE):
    """One rollout whose sampled tokens had probabilities ``probs``, with a recording fake value_fn."""
    T = len(probs)
    rewards = torch.zeros(1, T)
    rewards[0, -1] = reward
    ro = Rollouts(tokens=torch.arange(T)[None], mask=torch.ones(1, T, dtype=torch.bool), rewards=rewards,
                  logprobs=torch.tensor([probs]).log())
    asked = []

    def value_fn(rollouts, cuts, k):
        asked.append(cuts.nonzero()[:, 1].tolist())
        return torch.tensor([table[:T]], dtype=torch.float64), Cost(policy_forwards=int(cuts.sum()) * k)
    return ro, value_fn, asked


P = [1.0, 0.5, 1.0, 0.3, 1.0, 0.6]  # low-probability tokens (p < 0.9) at 1, 3, 5


def test_spo_probability_cuts_hand_computed():
    ro, fn, asked = chain(P)
    c = spo(ro, value_fn=fn, k=3, interval=1)
    # segments [0] (head) [1, 2] [3, 4] [5]: A = V3 - V1, V5 - V3, 1 - V5; only p < 0.9 tokens take it
    assert c.token[0].tolist() == pytest.approx([0.0, 0.3, 0.0, -0.2, 0.0, 0.5])
    assert asked == [[1, 3, 5]]  # the head has no credited token, so V(start) is not sampled
    assert c.cost.policy_forwards == 9
    assert c.info["cuts"][0].tolist() == [False, True, False, True, False, True]
    assert c.info["segment_ids"][0].tolist() == [0, 1, 1, 2, 2, 3]
    assert c.info["segment_valued"][0].tolist() == [False, True, True, True]


def test_spo_every_interval_th_candidate_cuts_and_skipped_candidates_share_its_credit():
    ro, fn, asked = chain(P)
    c = spo(ro, value_fn=fn, k=1, interval=2)  # candidates 1, 3, 5 -> cuts at 1 and 5
    assert asked == [[1, 5]]
    assert c.token[0].tolist() == pytest.approx([0.0, 0.1, 0.0, 0.1, 0.0, 0.5])


def test_spo_credit_on_all_values_the_head_segment():
    ro, fn, asked = chain(P)
    c = spo(ro, value_fn=fn, k=1, interval=1, credit_on="all")
    assert asked == [[0, 1, 3, 5]]
    assert c.token[0].tolist() == pytest.approx([0.2, 0.3, 0.3, -0.2, -0.2, 0.5])


def test_spo_interval_cuts_and_a_cut_at_every_token():
    ro, fn, asked = chain(P)
    c = spo(ro, value_fn=fn, k=1, cut="interval", interval=2)  # segments [0,1] [2,3] [4,5]
    assert asked == [[0, 2, 4]] and c.info["credit_on"] == "all"
    assert c.token[0].tolist() == pytest.approx([0.4, 0.4, 0.3, 0.3, 0.1, 0.1])
    every = spo(ro, value_fn=fn, k=1, cut="interval", interval=1).token[0]
    assert every.tolist() == pytest.approx([0.2, 0.2, 0.1, 0.2, -0.4, 0.5])
    assert float(every.sum()) == pytest.approx(1.0 - V_TABLE[0])  # telescopes to outcome - V(start)
    # an interval longer than the response: one segment
    assert spo(ro, value_fn=fn, k=1, cut="interval", interval=20).token[0].tolist() == pytest.approx([0.8] * 6)


def test_spo_degenerate_inputs():
    # no cut point: one segment, the whole response
    ro, fn, asked = chain([1.0] * 4, reward=0.0)
    c = spo(ro, value_fn=fn, k=2)
    assert c.token.abs().sum() == 0 and asked == [[]] and c.cost.policy_forwards == 0
    c = spo(ro, value_fn=fn, k=2, credit_on="all")
    assert asked[-1] == [0] and c.token[0].tolist() == pytest.approx([-0.2] * 4)
    # threshold 1 cuts every token with p < 1; a one-token response is a single segment
    ro, fn, asked = chain([0.95])
    assert spo(ro, value_fn=fn, threshold=1.0).token[0].tolist() == pytest.approx([0.8])
    assert spo(ro, value_fn=fn, threshold=0.5).token[0].tolist() == [0.0]
    # padding rows of different lengths
    ro = Rollouts(tokens=torch.zeros(2, 3, dtype=torch.long), mask=torch.tensor([[1, 1, 1], [1, 0, 0]]).bool(),
                  rewards=torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]),
                  logprobs=torch.tensor([[0.5, 0.5, 0.5], [0.5, 0.0, 0.0]]).log())
    c = spo(ro, value_fn=lambda r, cuts, k: (torch.full((2, 3), 0.25, dtype=torch.float64), Cost()), interval=1)
    assert torch.allclose(c.token.double(), torch.tensor([[0.0, 0.0, 0.75], [0.75, 0.0, 0.0]], dtype=torch.float64))


def test_spo_bad_arguments():
    ro, fn, _ = chain(P)
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="^threshold"):
            spo(ro, value_fn=fn, threshold=bad)
    with pytest.raises(ValueError, match="^interval"):
        spo(ro, value_fn=fn, interval=0)
    with pytest.raises(ValueError, match="^k"):
        spo(ro, value_fn=fn, k=0)
    with pytest.raises(TypeError, match="^value_fn"):
        spo(ro, value_fn=0.5)
    with pytest.raises(ValueError, match="^cut"):
        spo(ro, value_fn=fn, cut="entropy")
    with pytest.raises(ValueError, match="^credit_on"):
        spo(ro, value_fn=fn, credit_on="some")
    with pytest.raises(ValueError, match="^rollouts"):
        spo(ro.with_(logprobs=None), value_fn=fn)
    with pytest.raises(ValueError, match="^value_fn result"):
        spo(ro, value_fn=lambda r, cuts, k: (torch.zeros(2, 2), Cost()))
    with pytest.raises(ValueError, match="^value_fn result"):
        spo(ro, value_fn=lambda r, cuts, k: (torch.full((1, 6), math.nan), Cost()))


def group(seqs, rewards, group_ids=None):
    """Rollouts from token lists (padded with -1 -> 0 off the mask); reward on the last token."""
    T = max(len(s) for s in seqs)
    tokens = torch.zeros(len(seqs), T, dtype=torch.long)
    mask = torch.zeros(len(seqs), T, dtype=torch.bool)
    rew = torch.zeros(len(seqs), T)
    for b, (s, r) in enumerate(zip(seqs, rewards)):
        tokens[b, :len(s)] = torch.tensor(s)
        mask[b, :len(s)] = True
        rew[b, len(s) - 1] = r
    return Rollouts(tokens=tokens, mask=mask, rewards=rew, group_ids=group_ids)


def test_tempo_prefix_tree_of_a_group_hand_computed():
    ro = group([[1, 2, 3], [1, 2, 4], [1, 5, 6]], [1.0, 0.0, 1.0])
    c = tempo(ro)
    std = math.sqrt(1 / 3)
    g1, g0 = (1 - 2 / 3) / (std + 1e-6), (0 - 2 / 3) / (std + 1e-6)
    # root -> [1]: one child, no TD; [1] branches (V 2/3 -> [1,2]: 1/2, [1,5]: 1); [1,2] branches (-> 1 or 0)
    assert c.token[0].tolist() == pytest.approx([g1, g1 - 1 / 6, g1 + 1 / 2])
    assert c.token[1].tolist() == pytest.approx([g0, g0 - 1 / 6, g0 - 1 / 2])
    assert c.token[2].tolist() == pytest.approx([g1, g1 + 1 / 3, g1])
    assert c.info["branch"].tolist() == [[False, True, True], [False, True, True], [False, True, False]]
    assert c.info["node_values"][0].tolist() == pytest.approx([2 / 3, 2 / 3, 1 / 2])
    assert c.cost == Cost() and c.level == "token" and "tempo" in ESTIMATORS


def test_tempo_explicit_tree_with_the_unbiased_and_the_pooled_leaf_rule():
    ro = group([[1, 2, 3]], [1.0])
    leaves = [(0, 0, [1, 7, 8], 0.0), (0, 1, [1, 2, 9], 0.0), (0, 2, [1, 2, 4], 0.0)]
    seen = []

    def tree_fn(rollouts, branching):
        seen.append(branching)
        return leaves, Cost(policy_forwards=3, policy_tokens=11)
    c = tempo(ro, tree_fn=tree_fn, branching=1)
    # unbiased: V(root) = mean(1, 0) over the draws from the prompt, V([1]) = mean(1, 0, 0) (forks at
    # depth <= 1), V([1, 2]) = 1/3, V([1, 2, 3]) = 1; group term over the prompt's draws (1, 0)
    g = 0.5 / (math.sqrt(0.5) + 1e-6)
    assert c.token[0].tolist() == pytest.approx([g, g + 0.0, g + 2 / 3])
    assert seen == [1] and c.cost == Cost(policy_forwards=3, policy_tokens=11)
    assert c.info["tree_leaves"].tolist() == [4]
    pooled = tempo(ro, tree_fn=tree_fn, branching=1, node_values="all_leaves")
    assert pooled.token[0].tolist() == pytest.approx([g, g + 1 / 3 - 1 / 4, g + 2 / 3])


def test_tempo_degenerate_inputs():
    ro = group([[1, 2, 3]], [1.0])  # a group of one: a single path, GRPO's raw-score rule
    c = tempo(ro)
    assert c.token[0].tolist() == pytest.approx([1 / (1 + 1e-6)] * 3) and not c.info["branch"].any()
    ro = group([[1, 2], [1, 3], [4]], [1.0, 1.0, 1.0])  # all-equal outcomes
    assert tempo(ro).token.abs().sum() == 0
    ro = group([[5], [6]], [1.0, 0.0])  # one-token responses branch at the root
    c = tempo(ro, normalize_std=False)
    assert c.token[:, 0].tolist() == pytest.approx([0.5 + 0.5, -0.5 - 0.5])
    ro = group([[1, 2], [1, 2], [1, 3]], [1.0, 1.0, 0.0])  # identical responses share one path
    c = tempo(ro, normalize_std=False)
    assert c.token[0].tolist() == c.token[1].tolist() == pytest.approx([1 / 3, 1 / 3 + 1 / 3])
    two = group([[1, 2], [1, 3], [1, 2], [1, 3]], [1.0, 0.0, 0.0, 1.0], group_ids=torch.tensor([0, 0, 1, 1]))
    c = tempo(two, normalize_std=False)  # groups never share a tree
    assert c.token[0].tolist() == pytest.approx([0.5, 1.0]) and c.token[2].tolist() == pytest.approx([-0.5, -1.0])


def test_tempo_bad_arguments():
    ro = group([[1, 2, 3]], [1.0])
    with pytest.raises(ValueError, match="^branching"):
        tempo(ro, branching=0)
    with pytest.raises(TypeError, match="^tree_fn"):
        tempo(ro, tree_fn=3)
    with pytest.raises(ValueError, match="^node_values"):
        tempo(ro, node_values="max")
    with pytest.raises(ValueError, match="^tree_fn"):
        tempo(ro, tree_fn=lambda r, m: ([(0, 2, [1, 9, 9], 1.0)], Cost()))  # does not copy its fork prefix
    with pytest.raises(TypeError, match="^tree_fn"):
        tempo(ro, tree_fn=lambda r, m: ([(0, 0, [1])], Cost()))
    with pytest.raises(TypeError, match="^tree_fn"):
        tempo(ro, tree_fn=lambda r, m: ([], None))


def test_real_lm_smoke_shapes_and_cost_accounting(lm_env):
    from labkit.envs.arithmetic.truth import load_reference

    env = lm_env
    ref, _ = load_reference(env)
    ro = ref.select([0, 1, 24])
    c = spo(ro, value_fn=env.cut_value_fn(seed=1), k=2, interval=1)
    assert c.token.shape == ro.mask.shape and bool((c.token[~ro.mask] == 0).all())
    n_cuts = int(c.info["cuts"].sum())
    assert c.cost.policy_forwards == 2 * n_cuts and (c.cost.policy_tokens > 0) == (n_cuts > 0)
    assert bool((c.token[~c.info["credited"]] == 0).all())
    c = spo(ro, value_fn=env.cut_value_fn(seed=1), k=2, cut="interval", interval=10)
    assert c.cost.policy_forwards == 2 * int(c.info["cuts"].sum()) and c.cost.policy_tokens > 0
    values = c.info["segment_values"][c.info["segment_valued"]]
    assert bool(((values >= 0) & (values <= 1)).all())

    t = tempo(ro, tree_fn=env.tree_fn(seed=1), branching=2)
    assert t.token.shape == ro.mask.shape
    n_steps = ro.n_steps
    assert t.cost.policy_forwards == 2 * int(n_steps.sum()) and t.cost.policy_tokens > 0
    assert t.info["tree_leaves"].tolist() == (1 + 2 * n_steps).tolist()
    shallow = tempo(ro, tree_fn=env.tree_fn(seed=1, depth=1), branching=2)
    assert shallow.cost.policy_forwards == 2 * 3
    # the kept continuations average to prefix_values' estimate (same seeds, same batches)
    prefixes = [ro.info["prompt_ids"][0]]
    conts, rewards, _ = env.fork_completions(prefixes, ro.info["problems"][:1], 3, seed=5)
    assert len(conts[0]) == 3 and float(rewards.mean()) == pytest.approx(
        float(env.prefix_values(prefixes, ro.info["problems"][:1], 3, seed=5)[0][0]))
