"""AT2PO and Tree-GRPO: turn trees grown by re-execution, checked on a hand-built deterministic
ToolWorld where every branch's outcome is known in advance."""
import math

import pytest
import torch

from labkit.core.rollouts import Rollouts
from labkit.credit import get_estimator
from labkit.envs.toolworld import ToolWorld
from labkit.envs.toolworld.branching import play_recorded

at2po = get_estimator("at2po")
tree_grpo = get_estimator("tree_grpo")

# ToolWorld(2 files), bug in file 0, tools that never err: actions 0 think, 3 submit, 6 edit 0;
# observations 0 start, 1 thought, 10 edited file 0.
THINK, SUBMIT, EDIT0 = 0, 3, 6
START, THOUGHT, EDITED0 = 0, 1, 10


def _world():
    env = ToolWorld(2, max_turns=4, mislead=0.0, noise=0.0, flaky=0.0)
    # the branch policy, deterministic to 1e-20: start -> edit 0, every other observation -> submit
    pol = env.make_policy()
    with torch.no_grad():
        pol.logits[:, SUBMIT] = 60.0
        pol.logits[START, SUBMIT] = 0.0
        pol.logits[START, EDIT0] = 60.0
    return env, pol


def _batch(env, entropies):
    """Two episodes of task 0 (bug 0): A = think, submit (fails, R = 0); B = edit 0, submit
    (succeeds, R = 1). ``entropies`` (2, 2) are the recorded entropies of their turns."""
    tokens = torch.tensor([[THINK, SUBMIT], [EDIT0, SUBMIT]])
    states = torch.tensor([[START, THOUGHT], [START, EDITED0]])
    fixed = torch.tensor([[0, 0], [0, 1]])
    hidden = env.hidden_index(torch.zeros(2, 2, dtype=torch.long), fixed, states)
    return Rollouts(tokens=tokens, mask=torch.ones(2, 2, dtype=torch.bool),
                    rewards=torch.tensor([[0.0, 0.0], [0.0, 1.0]], dtype=torch.float64),
                    group_ids=torch.tensor([0, 0]), step_ids=torch.tensor([[0, 1], [0, 1]]),
                    turn_ids=torch.tensor([[0, 1], [0, 1]]), states=states,
                    entropies=torch.tensor(entropies, dtype=torch.float64), truth={"hidden_states": hidden})


def _inputs(env, pol, ro):
    return dict(env=env, policy=pol, hidden_states=ro.truth["hidden_states"])


def test_play_recorded_keeps_every_turn():
    env, pol = _world()
    hid, rew, steps = play_recorded(env, pol, torch.tensor([0, 0]), torch.tensor([0, 0]),
                                    torch.tensor([START, THOUGHT]), torch.tensor([0, 1]))
    # row 0 from the start: edit 0 (turn 0), submit with the bug fixed (turn 1, reward 1)
    # row 1 before turn 1 after a thought: submit with the bug there (reward 0)
    assert hid[0].tolist() == [env.hidden_index(0, 0, START), env.hidden_index(0, 1, EDITED0), -1, -1]
    assert hid[1].tolist() == [-1, env.hidden_index(0, 0, THOUGHT), -1, -1]
    assert rew.tolist() == [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    assert steps == 3


def test_at2po_hand_computed():
    env, pol = _world()
    ro = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    c = at2po(ro, **_inputs(env, pol, ro), rounds=1, k=1, alpha=0.0)
    # Inner nodes A0 (H 2.0) and B0 (H 1.0); A1, B1 end their episodes. The top score is A0: a
    # sibling C is forked before turn 0 from A's state; the branch policy plays edit 0, submit:
    # R_C = 1 (2 turns replayed, 1 reset).
    assert c.info["fork_turns"].tolist() == [0] and c.info["fork_parents"].tolist() == [0]
    assert c.cost.env_steps == 2 and c.cost.env_resets == 1 and c.cost.policy_forwards == 2
    # leaves R = (0, 1, 1): mean 2/3, unbiased std sqrt(1/3); r^ = (-2/sqrt3, 1/sqrt3, 1/sqrt3)
    s3 = math.sqrt(3.0)
    ra, rb = -2 / s3, 1 / s3
    # V(A0) = V(A1) = ra (one child), V(B0) = rb; root: entropy-weighted over A0 (2.0), B0 (1.0),
    # C0 (~1e-24): (2 ra + rb) / 3 = -1/sqrt3
    root = (2 * ra + rb) / 3
    assert torch.allclose(c.values, torch.tensor([[ra, ra], [rb, rb]], dtype=torch.float64), atol=1e-5)
    assert torch.allclose(c.info["root_values"], torch.tensor([root, root], dtype=torch.float64), atol=1e-5)
    loc = at2po(ro, **_inputs(env, pol, ro), rounds=1, k=1, alpha=0.0, advantage="local")
    # turn 0 against the root; turn 1 has one child above it: V(A1) - V(A0) = 0
    assert torch.allclose(loc.values, torch.tensor([[ra - root, 0.0], [rb - root, 0.0]], dtype=torch.float64),
                          atol=1e-5)
    leaf = at2po(ro, **_inputs(env, pol, ro), rounds=1, k=1, alpha=0.0, advantage="global", value_rule="leaf_mean")
    # leaf-mean root = mean r^ = 0
    assert torch.allclose(leaf.values, torch.tensor([[ra, ra], [rb, rb]], dtype=torch.float64), atol=1e-5)


def test_at2po_branching_penalty_moves_the_fork():
    env, pol = _world()
    ro = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    # alpha = 1: the turn-0 nodes share the root's 2 children (score 2.0 - 2, 1.0 - 2), so no
    # inner node but A0, B0 exists; A0 still wins. Two rounds: the second sees the root with 3
    # children and picks B0 over A0 only if its score is higher: 1.0 - 3 < 2.0 - 3, so A0 again.
    c = at2po(ro, **_inputs(env, pol, ro), rounds=2, k=1, alpha=1.0)
    assert c.info["fork_turns"].tolist() == [0, 0]
    assert c.info["n_chains"] == 4


def test_tree_grpo_hand_computed():
    env, pol = _world()
    ro = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    c = tree_grpo(ro, **_inputs(env, pol, ro), rounds=1, n=1, seed=0, credit="leaf")
    # Trees: A's and B's. Each draws one of (its root: a fresh episode, fork turn 0) or (its turn
    # 0 node: fork after it, turn 1). Which one seed 0 draws is recorded in the info.
    forks = c.info["fork_turns"].tolist()
    assert forks == [0, 1]  # seed 0 draws both kinds: tree A forks from its root, tree B after B0
    # outcomes of each possible fork (the branch policy): from the root edit 0, submit -> 1;
    # after A0 (a thought) submit -> 0; after B0 (bug fixed) submit -> 1
    ra = {0: 1.0, 1: 0.0}[forks[0]]
    rb = 1.0
    R = torch.tensor([0.0, 1.0, ra, rb], dtype=torch.float64)
    inter = (R - R.mean()) / R.std()
    tree = torch.tensor([0, 1, 0, 1])
    intra = torch.zeros(4, dtype=torch.float64)
    for k in (0, 1):
        x = R[tree == k]
        intra[tree == k] = 0.0 if float(x.std()) == 0 else (x - x.mean()) / x.std()
    A = inter + intra
    assert torch.allclose(c.info["leaf_advantages"], A[:2], atol=1e-5)
    assert torch.allclose(c.values, A[:2, None].expand(2, 2), atol=1e-5)
    # "subtree": a fork after turn 0 shares that turn's node (chain 2 below A0, chain 3 below
    # B0), a fork from the root shares nothing; turn 1 is each episode's own leaf
    sub = tree_grpo(ro, **_inputs(env, pol, ro), rounds=1, n=1, seed=0)
    a0 = (A[0] + A[2]) / 2 if forks[0] == 1 else A[0]
    b0 = (A[1] + A[3]) / 2 if forks[1] == 1 else A[1]
    assert torch.allclose(sub.values, torch.stack([torch.stack([a0, A[0]]), torch.stack([b0, A[1]])]), atol=1e-5)


def test_tree_grpo_hand_computed_fixed_forks():
    # with rounds = 0 nothing is forked: intra-tree = raw outcome (a tree of one), inter = GRPO
    env, pol = _world()
    ro = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    c = tree_grpo(ro, **_inputs(env, pol, ro), rounds=0)
    # R = (0, 1): mean 1/2, std sqrt(1/2); inter = (-1/sqrt2, 1/sqrt2); intra = R / (1 + 1e-6)
    s2 = math.sqrt(0.5)
    want = torch.tensor([-0.5 / s2, 0.5 / s2 + 1.0], dtype=torch.float64)
    assert torch.allclose(c.values[:, 0], want, atol=1e-5)
    assert c.cost.env_steps == 0 and c.info["n_chains"] == 2
    sub = tree_grpo(ro, **_inputs(env, pol, ro), rounds=0, credit="difference")
    # one leaf per tree: the node's leaf mean equals its root's, difference 0 everywhere
    assert torch.allclose(sub.values, torch.zeros(2, 2, dtype=torch.float64))


def test_at2po_degenerate_no_rounds_and_one_group():
    env, pol = _world()
    ro = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    c = at2po(ro, **_inputs(env, pol, ro), rounds=0)
    s2 = math.sqrt(0.5)
    # R = (0, 1) normalised: (-1/sqrt2 * 1/2 * 2 ...) = (-0.7071, 0.7071), every turn its episode's
    assert torch.allclose(c.values, torch.tensor([[-0.5 / s2] * 2, [0.5 / s2] * 2], dtype=torch.float64), atol=1e-5)
    assert c.cost.env_steps == 0
    # all-equal outcomes: 0
    same = _batch(env, [[1.0, 1.0], [1.0, 1.0]])
    same.rewards[0, 1] = 1.0
    assert torch.allclose(at2po(same, **_inputs(env, pol, same), rounds=0).values, torch.zeros(2, 2, dtype=torch.float64))


def test_seeded_and_on_a_sampled_batch():
    env = ToolWorld(3, max_turns=8, noise=0.2, mislead=0.2, flaky=0.2)
    pol = env.scripted_policy(2.0)
    ro = env.sample(pol, 2, group_size=4, seed=3)
    kw = dict(env=env, policy=pol, hidden_states=ro.truth["hidden_states"])
    for fn in (at2po, tree_grpo):
        a, b = fn(ro, **kw, seed=5), fn(ro, **kw, seed=5)
        assert torch.equal(a.token, b.token)
        assert a.cost.env_steps > 0 and a.cost.env_steps == a.cost.policy_forwards
        assert bool(torch.isfinite(a.token).all()) and bool((a.token[~ro.mask] == 0).all())


def test_bad_inputs_raise_named_errors():
    env, pol = _world()
    ro = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    kw = _inputs(env, pol, ro)
    with pytest.raises(ValueError, match="^env"):
        at2po(ro, env=None, policy=pol, hidden_states=kw["hidden_states"])
    with pytest.raises(ValueError, match="^policy"):
        tree_grpo(ro, env=env, policy=None, hidden_states=kw["hidden_states"])
    with pytest.raises(ValueError, match="^hidden_states"):
        at2po(ro, env=env, policy=pol, hidden_states=None)
    with pytest.raises(ValueError, match="^hidden_states"):
        tree_grpo(ro, env=env, policy=pol, hidden_states=torch.full((2, 2), 10_000))
    with pytest.raises(ValueError, match="^hidden_states"):
        tree_grpo(ro, env=env, policy=pol, hidden_states=torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="^rounds"):
        at2po(ro, **kw, rounds=-1)
    with pytest.raises(ValueError, match="^k"):
        at2po(ro, **kw, k=0)
    with pytest.raises(ValueError, match="^alpha"):
        at2po(ro, **kw, alpha=-0.5)
    with pytest.raises(ValueError, match="^advantage"):
        at2po(ro, **kw, advantage="q")
    with pytest.raises(ValueError, match="^value_rule"):
        at2po(ro, **kw, value_rule="max")
    with pytest.raises(ValueError, match="^credit"):
        tree_grpo(ro, **kw, credit="token")
    with pytest.raises(ValueError, match="^n"):
        tree_grpo(ro, **kw, n=-1)
    with pytest.raises((ValueError, TypeError), match="^seed"):
        tree_grpo(ro, **kw, seed=1.5)
    bare = _batch(env, [[2.0, 0.5], [1.0, 0.1]])
    bare.entropies = None
    with pytest.raises(ValueError, match="^rollouts.entropies"):
        at2po(bare, **kw)
    other = ToolWorld(3, max_turns=4)
    with pytest.raises(ValueError, match="^policy"):
        at2po(ro, env=other, policy=pol, hidden_states=kw["hidden_states"])
