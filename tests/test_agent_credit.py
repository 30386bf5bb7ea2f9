"""Turn-level agent estimators: GiGPO, StarPO filter, CARL, IGPO, turn GAE.

All rollouts here are built by hand so every expected number can be computed on paper.
"""
import pytest
import torch

from labkit.credit import ESTIMATORS, estimate
from labkit.credit.episode import dr_grpo, grpo
from labkit.credit.group import anchor_groups, gigpo, starpo_filter
from labkit.core.rollouts import Rollouts


def make(turn_rewards, *, turn_len=1, groups=None, keys=None, entropies=None, tool=False):
    """Rollouts whose trajectory b has len(turn_rewards[b]) turns of ``turn_len`` tokens each.

    A turn's reward sits on its last token; each turn is one step, so ``keys[b][k]`` is the
    anchor key of turn k. ``entropies[b][k]`` is spread over turn k's tokens (each token gets
    the value, so the turn mean is that value). ``tool=True`` puts one masked (environment)
    position after every turn but the last, as tool output in an LM agent.
    """
    B = len(turn_rewards)
    gap = 1 if tool else 0
    T = max(len(r) * (turn_len + gap) - gap for r in turn_rewards)
    mask = torch.zeros(B, T, dtype=torch.bool)
    rew = torch.zeros(B, T, dtype=torch.float64)
    tid = torch.full((B, T), -1, dtype=torch.long)
    ent = torch.zeros(B, T, dtype=torch.float64)
    for b, row in enumerate(turn_rewards):
        for k, r in enumerate(row):
            start = k * (turn_len + gap)
            mask[b, start:start + turn_len] = True
            tid[b, start:start + turn_len] = k
            rew[b, start + turn_len - 1] = r
            if entropies is not None:
                ent[b, start:start + turn_len] = entropies[b][k]
    return Rollouts(tokens=torch.zeros(B, T, dtype=torch.long), mask=mask, rewards=rew,
                    group_ids=None if groups is None else torch.tensor(groups),
                    step_ids=tid.clone(), turn_ids=tid, anchor_keys=keys,
                    entropies=ent if entropies is not None else None)


def turn_credit(credit, ro):
    """Credit of every turn, read back from the token credit (it must be constant per turn)."""
    lo, present = credit.at(ro, "turn", "min")
    hi, _ = credit.at(ro, "turn", "max")
    assert torch.allclose(lo, hi), "credit must be constant within a turn"
    return torch.where(present, lo, 0)


# --------------------------------------------------------------------------- GiGPO
def _singleton_case(turn_len=1, tool=False):
    rewards = [[0, 0, 1], [0, 0], [0, 1, 0, 0], [0.5], [1, 0]]
    keys = [[f"{b}-{k}" for k in range(len(r))] for b, r in enumerate(rewards)]
    return make(rewards, groups=[0, 0, 0, 1, 1], keys=keys, turn_len=turn_len, tool=tool)


@pytest.mark.parametrize("turn_len,tool", [(1, False), (3, True)])
def test_gigpo_with_only_singleton_anchor_groups_is_grpo(turn_len, tool):
    ro = _singleton_case(turn_len, tool)
    a = gigpo(ro, norm="mean_norm")
    assert a.info["singleton_share"] == 1.0
    assert torch.allclose(a.token, dr_grpo(ro).token)
    b = gigpo(ro, norm="mean_std_norm", eps=1e-6)
    assert torch.allclose(b.token, grpo(ro, eps=1e-6).token)
    assert torch.allclose(turn_credit(b, ro)[:, 0], grpo(ro).values[:, 0])


def test_gigpo_with_omega_zero_is_the_episode_term():
    ro = make([[0, 1], [0, 0], [1, 0]], keys=[["s", "a"], ["s", "a"], ["s", "b"]])
    for norm, ref in (("mean_norm", dr_grpo(ro)), ("mean_std_norm", grpo(ro))):
        c = gigpo(ro, omega=0.0, norm=norm)
        assert torch.allclose(c.token, ref.token)
        assert c.info["step_term"].abs().sum() > 0  # the step term exists but is switched off


def test_gigpo_hand_computed():
    # one task group, three trajectories; turn rewards, gamma = 0.5
    #   traj 0: keys s, a   rewards 0, 1  -> R = 0.5, 1
    #   traj 1: keys s, a   rewards 0, 0  -> R = 0,   0
    #   traj 2: keys s, b   rewards 1, 0  -> R = 1,   0
    ro = make([[0, 1], [0, 0], [1, 0]], keys=[["s", "a"], ["s", "a"], ["s", "b"]], turn_len=2, tool=True)
    c = gigpo(ro, gamma=0.5, omega=2.0)
    ep = torch.tensor([1 - 2 / 3, 0 - 2 / 3, 1 - 2 / 3], dtype=torch.float64)
    # anchor "s": R = 0.5, 0, 1 (mean 0.5); anchor "a": R = 1, 0 (mean 0.5); "b" singleton -> 0
    step = torch.tensor([[0.0, 0.5], [-0.5, -0.5], [0.5, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), ep[:, None] + 2.0 * step)
    assert c.level == "turn" and c.values.shape == (3, 2)
    assert c.info["anchor_sizes"].tolist() == [3, 2, 1]
    assert c.info["singleton_share"] == pytest.approx(1 / 3)
    assert c.info["singleton_turn_share"] == pytest.approx(1 / 6)
    # mean_std_norm divides each part by its group's unbiased std + eps
    d = gigpo(ro, gamma=0.5, norm="mean_std_norm", eps=0.0)
    s_ep = torch.tensor([1.0, 0, 1]).std()
    s_s, s_a = torch.tensor([0.5, 0, 1]).std(), torch.tensor([1.0, 0]).std()
    want = ep[:, None] / s_ep + torch.tensor([[0.0, 0.5 / s_a], [-0.5 / s_s, -0.5 / s_a], [0.5 / s_s, 0.0]],
                                             dtype=torch.float64)
    assert torch.allclose(turn_credit(d, ro), want)


def test_gigpo_anchor_groups_respect_task_groups_and_repeat_visits():
    # the same key in two task groups is two anchor groups; a loop within one trajectory is one
    ro = make([[0, 0, 1], [1], [0]], groups=[0, 0, 1], keys=[["s", "x", "s"], ["s"], ["s"]])
    df = anchor_groups(ro)
    assert list(df.columns) == ["group", "key", "size"]
    assert df.values.tolist() == [[0, "s", 3], [0, "x", 1], [1, "s", 1]]
    c = gigpo(ro)
    assert c.info["anchor_index"].tolist() == [[0, 1, 0], [0, -1, -1], [2, -1, -1]]


def test_gigpo_step_term_sums_to_zero_in_each_anchor_group():
    g = torch.Generator().manual_seed(0)
    rewards = [[float(torch.randint(0, 2, (1,), generator=g)) for _ in range(n)] for n in (3, 4, 2, 5, 3, 4)]
    keys = [[int(torch.randint(0, 3, (1,), generator=g)) for _ in r] for r in rewards]
    ro = make(rewards, groups=[0, 0, 0, 1, 1, 1], keys=keys, turn_len=2)
    c = gigpo(ro, gamma=0.9)
    idx, step = c.info["anchor_index"], c.info["step_term"]
    sums = torch.zeros(int(idx.max()) + 1, dtype=step.dtype).index_add_(0, idx[idx >= 0], step[idx >= 0])
    assert torch.allclose(sums, torch.zeros_like(sums), atol=1e-12)
    assert (c.info["anchor_sizes"] > 1).any()


def test_gigpo_is_registered_and_rejects_bad_input():
    ro = make([[0, 1], [1, 0]], keys=[["s", "a"], ["s", "b"]])
    assert torch.allclose(estimate("gigpo", ro).token, gigpo(ro).token)
    for kw, name in (({"norm": "std"}, "norm"), ({"omega": -1.0}, "omega"), ({"gamma": 1.5}, "gamma"),
                     ({"eps": -1.0}, "eps"), ({"omega": float("nan")}, "omega")):
        with pytest.raises(ValueError, match=f"^{name}"):
            gigpo(ro, **kw)
    with pytest.raises(ValueError, match="^anchor_keys"):
        gigpo(make([[0, 1], [1, 0]]))
    with pytest.raises(ValueError, match="^anchor_keys"):
        anchor_groups(make([[0, 1]]))
    with pytest.raises(TypeError, match="^anchor_keys"):
        gigpo(make([[0, 1]], keys=[[["unhashable"], "a"]]))


# --------------------------------------------------------------------------- StarPO filter
def _filter_case():
    # group 0: all equal (std 0); group 1: 0/1 split; group 2: spread 0..2; group 3: one trajectory
    scores = [[1], [1], [0], [1], [0], [2], [5]]
    return make(scores, groups=[0, 0, 1, 1, 2, 2, 3])


def test_starpo_filter_keeps_the_highest_variance_groups():
    ro = _filter_case()
    out = starpo_filter(ro, keep=0.5)  # 2 of 4 groups
    assert out.info["starpo"]["kept_groups"] == [1, 2]
    assert out.group_ids.tolist() == [1, 1, 2, 2]
    assert out.scores.tolist() == [0, 1, 0, 2]
    assert out.info["starpo"]["spreads"][3] == 0.0
    one = starpo_filter(ro, keep=0.25)
    assert one.info["starpo"]["kept_groups"] == [2]
    # at least one group even when keep * n_groups < 1
    assert starpo_filter(ro, keep=0.01).info["starpo"]["kept_groups"] == [2]


def test_starpo_filter_keep_one_keeps_everything_and_ties_go_to_the_lower_group_id():
    ro = _filter_case()
    out = starpo_filter(ro, keep=1.0)
    assert out.batch_size == ro.batch_size and torch.equal(out.rewards, ro.rewards)
    tie = make([[0], [1], [0], [1], [0], [0]], groups=[5, 5, 2, 2, 7, 7])
    assert starpo_filter(tie, keep=0.34).info["starpo"]["kept_groups"] == [2]


def test_starpo_filter_rejects_bad_keep():
    ro = _filter_case()
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="^keep"):
            starpo_filter(ro, keep=bad)
    with pytest.raises(TypeError, match="^keep"):
        starpo_filter(ro, keep="all")
    assert "starpo_filter" not in ESTIMATORS


# --------------------------------------------------------------------------- CARL
from labkit.credit.entropy import carl  # noqa: E402
from labkit.credit.episode import reinforce_pp  # noqa: E402


def _carl_case(turn_len=2):
    rewards = [[0, 0, 1], [0, 1], [0, 0, 0, 0], [1], [0, 0, 1]]
    g = torch.Generator().manual_seed(3)
    ent = [torch.rand(len(r), generator=g, dtype=torch.float64).tolist() for r in rewards]
    return make(rewards, groups=[0, 0, 0, 1, 1], entropies=ent, turn_len=turn_len, tool=True), ent


def test_carl_keeps_the_top_fraction_of_turns_by_entropy():
    ro, ent = _carl_case()
    n = sum(len(e) for e in ent)  # 13 turns
    c = carl(ro, top_fraction=0.3)
    kept = c.info["kept"]
    assert int(kept.sum()) == 4 and c.info["share_updated"] == pytest.approx(4 / n)  # ceil(3.9)
    flat = sorted((e for row in ent for e in row), reverse=True)
    assert c.info["entropy_threshold"] == pytest.approx(flat[3])
    kept_ent = [ent[b][k] for b in range(len(ent)) for k in range(len(ent[b])) if kept[b, k]]
    assert sorted(kept_ent, reverse=True) == pytest.approx(flat[:4])
    # kept turns carry the base (GRPO) credit, the others nothing
    base = turn_credit(grpo(ro), ro)
    assert torch.allclose(turn_credit(c, ro), torch.where(kept, base, 0))
    assert c.level == "turn"
    # an exact fraction gives exactly that share
    ro10 = make([[0] * 5, [1] * 5], entropies=[[0.1 * k for k in range(5)], [0.5 + 0.1 * k for k in range(5)]])
    assert carl(ro10, top_fraction=0.3).info["share_updated"] == pytest.approx(0.3)
    assert carl(ro10, top_fraction=0.3).info["kept"].tolist() == [[False] * 5, [False, False, True, True, True]]


def test_carl_with_top_fraction_one_is_the_base_estimator():
    ro, _ = _carl_case()
    assert torch.allclose(carl(ro, top_fraction=1.0).token, grpo(ro).token)
    c = carl(ro, top_fraction=1.0, base="reinforce_pp", base_kwargs={"gamma": 0.9})
    assert torch.allclose(c.token, reinforce_pp(ro, gamma=0.9).token)
    assert c.level == "token"  # the base varies inside a turn, so token credit is kept as is
    half = carl(ro, top_fraction=0.5, base="reinforce_pp", base_kwargs={"gamma": 0.9})
    on = ro.broadcast(half.info["kept"].long(), "turn").bool()
    assert torch.allclose(half.token, torch.where(on, reinforce_pp(ro, gamma=0.9).token, 0))


def test_carl_ties_break_by_position_and_bad_input_errors():
    ro = make([[0, 1], [1, 0]], entropies=[[0.5, 0.5], [0.5, 0.5]])
    assert carl(ro, top_fraction=0.5).info["kept"].tolist() == [[True, True], [False, False]]
    assert torch.allclose(estimate("carl", ro, top_fraction=0.5).token, carl(ro, top_fraction=0.5).token)
    with pytest.raises(ValueError, match="^entropies"):
        carl(make([[0, 1], [1, 0]]))
    for bad in (0.0, 1.2, -0.5):
        with pytest.raises(ValueError, match="^top_fraction"):
            carl(ro, top_fraction=bad)
    with pytest.raises(ValueError, match="^base: no estimator 'nope'"):
        carl(ro, base="nope")
    with pytest.raises(ValueError, match="^base"):
        carl(ro, base="carl")
    with pytest.raises(TypeError, match="^base_kwargs"):
        carl(ro, base_kwargs=[1])


# --------------------------------------------------------------------------- IGPO
from labkit.credit.information import igpo  # noqa: E402
from labkit.core.credit import Cost  # noqa: E402


def _igpo_case():
    # traj 0: 3 turns, success; traj 1: 2 turns, failure; traj 2 (own group): 1 turn, success
    ro = make([[0, 0, 1], [0, 0], [1]], groups=[0, 0, 1], turn_len=2, tool=True)
    p = torch.tensor([[0.5, 0.6, 0.9, 1.0],
                      [0.5, 0.2, 0.0, 9.0],      # column 3 is past the end: ignored
                      [0.3, 1.0, float("nan"), float("nan")]], dtype=torch.float64)
    return ro, p


def test_igpo_with_perfect_probabilities_telescopes():
    ro, p = _igpo_case()
    c = igpo(ro, success_prob=p, final="ig", normalize=False)
    # A_k = p_n - p_{k-1} = outcome - value before turn k
    want = torch.tensor([[0.5, 0.4, 0.1], [-0.5, -0.2, 0.0], [0.7, 0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    # the paper's final turn (the outcome instead of the last gain): A_k = s + p_{n-1} - p_{k-1}
    d = igpo(ro, success_prob=p, normalize=False)
    want = torch.tensor([[1 + 0.9 - 0.5, 1 + 0.9 - 0.6, 1.0], [0 + 0.2 - 0.5, 0.0, 0.0], [1.0, 0.0, 0.0]],
                        dtype=torch.float64)
    assert torch.allclose(turn_credit(d, ro), want)
    e = igpo(ro, success_prob=p, final="ig_plus_outcome", normalize=False, gamma=0.5)
    assert torch.allclose(e.info["ig"], torch.tensor([[0.1, 0.3, 1.1], [-0.3, -0.2, 0.0], [1.7, 0, 0]],
                                                     dtype=torch.float64))
    assert e.info["turn_rewards"][0].tolist() == pytest.approx([0.1, 0.3, 1.1])
    assert turn_credit(e, ro)[0].tolist() == pytest.approx([0.1 + 0.5 * 0.3 + 0.25 * 1.1, 0.3 + 0.5 * 1.1, 1.1])


def test_igpo_hand_computed_with_group_normalisation():
    ro, p = _igpo_case()
    c = igpo(ro, success_prob=p, gamma=0.5, eps=0.0)
    # group 0 pools the 5 turn rewards 0.1, 0.3, 1 | -0.3, 0 (outcome on the final turns)
    pool = torch.tensor([0.1, 0.3, 1.0, -0.3, 0.0], dtype=torch.float64)
    z = (pool - pool.mean()) / pool.std()
    want0 = [z[0] + 0.5 * z[1] + 0.25 * z[2], z[1] + 0.5 * z[2], z[2]]
    want1 = [z[3] + 0.5 * z[4], z[4]]
    got = turn_credit(c, ro)
    assert got[0].tolist() == pytest.approx([float(x) for x in want0])
    assert got[1, :2].tolist() == pytest.approx([float(x) for x in want1])
    # group 1 is a pool of one: mean 0, std 1, so its raw reward (the outcome 1) survives
    assert got[2, 0].item() == pytest.approx(1.0)
    # normalised rewards of a pool have mean 0 and unbiased std 1
    r = c.info["turn_rewards"]
    present = ro.view(ro.rewards, "turn")[1]
    g0 = r[:2][present[:2]]
    assert float(g0.mean()) == pytest.approx(0.0, abs=1e-12) and float(g0.std()) == pytest.approx(1.0)
    assert c.level == "turn" and c.cost == Cost()
    # a callable is evaluated once and counted as one teacher-forced pass per probability
    d = igpo(ro, success_prob=lambda r: p, gamma=0.5, eps=0.0)
    assert torch.allclose(d.token, c.token) and d.cost.policy_forwards == 4 + 3 + 2
    assert torch.allclose(estimate("igpo", ro, success_prob=p).token, igpo(ro, success_prob=p).token)


def test_igpo_rejects_bad_input():
    ro, p = _igpo_case()
    with pytest.raises(ValueError, match=r"^success_prob: expected shape \(3, 4\)"):
        igpo(ro, success_prob=p[:, :3])
    with pytest.raises(ValueError, match="^success_prob: expected shape"):
        igpo(ro, success_prob=lambda r: p[:2])
    bad = p.clone()
    bad[1, 1] = float("nan")
    with pytest.raises(ValueError, match="^success_prob: contains a non-finite"):
        igpo(ro, success_prob=bad)
    with pytest.raises(TypeError, match="^success_prob"):
        igpo(ro, success_prob="high")
    with pytest.raises(ValueError, match="^final"):
        igpo(ro, success_prob=p, final="sum")
    with pytest.raises(ValueError, match="^gamma"):
        igpo(ro, success_prob=p, gamma=2.0)


# --------------------------------------------------------------------------- turn GAE
from labkit.credit.td import gae, turn_gae  # noqa: E402


def test_turn_gae_equals_token_gae_when_every_turn_is_one_token():
    ro = make([[0, 0.5, 1], [0, -1], [1, 0, 0, 2]])
    g = torch.Generator().manual_seed(1)
    V = torch.rand(3, 4, generator=g, dtype=torch.float64)
    c = turn_gae(ro, values=V, gamma=0.9, lam=0.7)
    ref = gae(ro, values=torch.where(ro.mask, V, 0), gamma=0.9, lam=0.7)
    assert torch.allclose(c.token, ref.token)
    assert torch.allclose(ro.broadcast(c.info["returns"], "turn"), ref.info["returns"])
    assert c.level == "turn" and "turn_gae" in ESTIMATORS


def test_turn_gae_with_gamma_lambda_one_is_return_minus_value_on_multi_token_turns():
    ro = make([[0, 0.5, 1], [0, -1]], turn_len=3, tool=True)
    V = torch.tensor([[0.2, 0.4, 0.8], [0.1, -0.3, 123.0]], dtype=torch.float64)  # 123: past the end
    c = turn_gae(ro, values=V)
    G = torch.tensor([[1.5, 1.5, 1.0], [-1.0, -1.0, 0.0]], dtype=torch.float64)
    want = torch.tensor([[1.3, 1.1, 0.2], [-1.1, -0.7, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert torch.allclose(c.info["returns"], G)
    # lam = 0: one-step TD errors over turns, hand-computed with gamma = 0.5
    d = turn_gae(ro, values=V, gamma=0.5, lam=0.0)
    td = [[0 + 0.5 * 0.4 - 0.2, 0.5 + 0.5 * 0.8 - 0.4, 1 - 0.8], [0 + 0.5 * -0.3 - 0.1, -1 + 0.3, 0.0]]
    assert turn_credit(d, ro).tolist() == [pytest.approx(row) for row in td]
    e = turn_gae(ro, values=lambda r: V)
    assert torch.allclose(e.token, c.token) and e.cost.aux_calls == 2


def test_turn_gae_rejects_bad_input():
    ro = make([[0, 1], [1]])
    with pytest.raises(ValueError, match=r"^values: expected shape \(2, 2\)"):
        turn_gae(ro, values=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="^values: contains a non-finite"):
        turn_gae(ro, values=torch.tensor([[0.0, float("nan")], [0.0, 0.0]]))
    turn_gae(ro, values=torch.tensor([[0.0, 0.0], [0.0, float("nan")]]))  # past the end: ignored
    for kw, name in (({"gamma": -0.1}, "gamma"), ({"lam": 1.1}, "lam")):
        with pytest.raises(ValueError, match=f"^{name}"):
            turn_gae(ro, values=torch.zeros(2, 2), **kw)


# --------------------------------------------------------------------------- ARCHER
from labkit.credit.td import archer  # noqa: E402
from labkit.learn.critics import TurnQCritic  # noqa: E402


def _two_turn_mdp():
    # turn 0 in state 0: action a -> state 1 + a; turn 1: action 1 in state 1 pays 1, else 0
    tok = torch.tensor([[0, 0], [0, 1], [1, 0], [1, 1]])
    states = torch.tensor([[0, 1], [0, 1], [0, 2], [0, 2]])
    rew = torch.tensor([[0.0, 0], [0, 1], [0, 0], [0, 0]], dtype=torch.float64)
    tid = torch.tensor([[0, 1]] * 4)
    return Rollouts(tokens=tok, mask=torch.ones(4, 2, dtype=torch.bool), rewards=rew, turn_ids=tid,
                    states=states)


def test_turn_q_critic_recovers_exact_q_and_archer_gives_q_minus_v():
    ro = _two_turn_mdp()
    uniform = torch.full((3, 2), 0.5, dtype=torch.float64)
    critic = TurnQCritic(3, 2).fit(ro, pi=uniform, gamma=0.9)
    assert critic.q.tolist() == [pytest.approx([0.45, 0.0]), pytest.approx([0.0, 1.0]), pytest.approx([0.0, 0.0])]
    c = archer(ro, critic=critic)
    want = torch.tensor([[0.45 - 0.225, -0.5], [0.225, 0.5], [-0.225, 0.0], [-0.225, 0.0]], dtype=torch.float64)
    assert torch.allclose(turn_credit(c, ro), want)
    assert c.cost.aux_calls == 4 and c.level == "turn"
    # off-policy: evaluate the greedy policy on the same uniform data
    greedy = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], dtype=torch.float64)
    g = TurnQCritic(3, 2).fit(ro, pi=greedy, gamma=0.9)
    assert g.q[0].tolist() == pytest.approx([0.9, 0.0])
    # SARSA target (pi=None) averages the actions taken, here the same as uniform
    assert torch.allclose(TurnQCritic(3, 2).fit(ro, gamma=0.9).q, critic.q)
    # tensors instead of a critic
    d = archer(ro, q_values=critic.q_values(ro), v_values=critic.v_values(ro))
    assert torch.allclose(d.token, c.token) and "archer" in ESTIMATORS


def test_archer_and_turn_q_critic_reject_bad_input():
    ro = _two_turn_mdp()
    q = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="^q_values"):
        archer(ro, q_values=q)
    with pytest.raises(ValueError, match=r"^v_values: expected shape \(4, 2\)"):
        archer(ro, q_values=q, v_values=torch.zeros(4, 3))
    with pytest.raises(ValueError, match="^critic"):
        archer(ro, critic=TurnQCritic(3, 2), q_values=q, v_values=q)
    with pytest.raises(ValueError, match="^pi"):
        TurnQCritic(3, 2).fit(ro).v_values(ro)
    with pytest.raises(ValueError, match="^pi"):
        TurnQCritic(3, 2).fit(ro, pi=torch.ones(3, 2))
    with pytest.raises(ValueError, match="^rollouts.states"):
        TurnQCritic(2, 2).fit(ro)
    with pytest.raises(ValueError, match="^rollouts.states"):
        TurnQCritic(3, 2).fit(make([[0, 1]]))
