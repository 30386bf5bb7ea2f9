"""The training loop (labkit.learn.loop): its losses have the right gradients, it learns, it counts
cost, it is seeded; its off-policy mode (stale batches, SORL's turn ratio) on a small ToolWorld.
"""

import math

import pytest
import torch

from labkit.core.credit import Credit
from labkit.course.presets import chain_setup
from labkit.credit import get_estimator
from labkit.envs.arithmetic.learner import LMLearner
from labkit.envs.chain import ChainLearner
from labkit.envs.toolworld.learner import ToolLearner
from labkit.learn.loop import compare, offpolicy_comparison, policy_loss, summarise, train, turn_log_ratio
from labkit.policies.lm import sequence_logprobs

from learn_worlds import small_world

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def chain_learner(seed=0, horizon=12, batch_size=32):
    env, policy, _ = chain_setup(horizon=horizon, n_bifurcations=2, env_seed=0, policy_seed=seed)
    return ChainLearner(env, policy, batch_size=batch_size, group_size=8)


def loss_gradient(learner, rollouts, credit, kind, old=None):
    learner.policy.zero_grad()
    rows = torch.arange(rollouts.batch_size)
    logp = learner.logprobs(rollouts, rows)
    loss, _ = policy_loss(logp, rollouts.logprobs if old is None else old, credit, rollouts.mask, kind)
    loss.backward()
    return -learner.policy.logits.grad.clone()


def test_reinforce_loss_gradient_is_the_policy_gradient_estimate():
    learner = chain_learner()
    ro = learner.collect(1, seed=3)
    credit = get_estimator("rloo")(ro).token
    expected = learner.policy.gradient_estimate(ro, credit)
    assert torch.allclose(loss_gradient(learner, ro, credit, "reinforce"), expected, atol=1e-12)


def test_clipped_losses_on_policy_are_token_averaged_policy_gradients():
    learner = chain_learner()
    ro = learner.collect(1, seed=4)
    credit = get_estimator("grpo")(ro).token
    n_tokens = int(ro.mask.sum())
    expected = learner.policy.gradient_estimate(ro, credit) * ro.batch_size / n_tokens
    assert torch.allclose(loss_gradient(learner, ro, credit, "ppo_clip"), expected, atol=1e-12)
    # every chain row has the same length, so grpo's per-sequence mean is the same average
    assert torch.allclose(loss_gradient(learner, ro, credit, "grpo"), expected, atol=1e-12)


def test_grpo_loss_weights_sequences_equally_not_tokens():
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[True, True, True, True], [True, False, False, False]])
    adv = torch.ones(2, 4)
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, "grpo")
    loss.backward()
    # row 0 spreads weight 1/2 over 4 tokens, row 1 puts 1/2 on its single token
    assert torch.allclose(-logp.grad, torch.tensor([[0.125] * 4, [0.5, 0, 0, 0]]))
    logp.grad = None
    loss, _ = policy_loss(logp, logp.detach(), adv, mask, "ppo_clip")
    loss.backward()
    assert torch.allclose(-logp.grad, mask.float() / 5)


def test_clipping_stops_the_gradient_beyond_the_trust_region():
    # log-probabilities (<= 0), shifted by -1 together so the ratios are 1.5, 1.1 and 0.5
    old = torch.full((1, 3), -1.0)
    logp = (torch.tensor([[math.log(1.5), math.log(1.1), math.log(0.5)]]) - 1.0).requires_grad_()
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    loss, stats = policy_loss(logp, old, adv, torch.ones(1, 3, dtype=torch.bool), "ppo_clip", clip_eps=0.2)
    loss.backward()
    # ratio 1.5 with A > 0 and ratio 0.5 with A < 0 are clipped: no gradient; ratio 1.1 passes
    assert logp.grad[0, 0] == 0 and logp.grad[0, 2] == 0 and logp.grad[0, 1] != 0
    assert stats["clip_frac"] == pytest.approx(2 / 3)


def test_training_improves_an_easy_chain_and_is_seeded():
    a = train(chain_learner(seed=1), "grpo", kind="grpo", iterations=25, eval_every=5, seed=7, progress=False)
    b = train(chain_learner(seed=1), "grpo", kind="grpo", iterations=25, eval_every=5, seed=7, progress=False)
    assert a.success.iloc[0] < 0.3 and a.success.iloc[-1] > 0.8
    cols = ["train_reward", "success", "loss", "grad_norm", "env_steps"]
    assert a[cols].equals(b[cols])
    c = train(chain_learner(seed=1), "grpo", kind="grpo", iterations=25, eval_every=5, seed=8, progress=False)
    assert not a.train_reward.equals(c.train_reward)


def test_curve_columns_and_cost_accounting():
    vine = get_estimator("vineppo")
    learner = chain_learner()
    value_fn = learner.env.vine_value_fn(learner.policy, seed=0)
    cur = train(learner, lambda ro: vine(ro, value_fn=value_fn, k=3), kind="ppo_clip", iterations=4,
                eval_every=2, progress=False, label="vine")
    assert list(cur.iteration) == [0, 1, 2, 3, 4]
    assert cur.success.notna().tolist() == [True, False, True, False, True]
    per_iteration = 32 * 12
    assert cur.env_steps.diff().iloc[1:].gt(per_iteration).all()  # vines add environment steps
    assert (cur.label == "vine").all() and (cur.kind == "ppo_clip").all()
    plain = train(chain_learner(), "grpo", iterations=4, progress=False)
    assert plain.env_steps.iloc[-1] == 4 * per_iteration


def test_critic_is_updated_after_each_iteration():
    class Recorder:
        def __init__(self):
            self.calls = []

        def __call__(self, ro):
            return torch.zeros(ro.batch_size, ro.horizon, dtype=torch.float64)

        def update(self, ro, targets):
            self.calls.append(targets.clone())

    critic = Recorder()
    gae = get_estimator("gae")
    train(chain_learner(), lambda ro: gae(ro, values=critic), iterations=3, critic=critic, progress=False)
    assert len(critic.calls) == 3
    assert critic.calls[0].shape == (32, 12)


def test_bad_arguments_are_named():
    learner = chain_learner()
    with pytest.raises(ValueError, match="kind"):
        train(learner, "grpo", kind="dpo", progress=False)
    with pytest.raises(ValueError, match="iterations"):
        train(learner, "grpo", iterations=0, progress=False)
    with pytest.raises(TypeError, match="estimator"):
        train(learner, lambda ro: ro.rewards, iterations=1, progress=False)
    def broken(ro):  # a Credit whose tensor was corrupted after it was checked
        credit = Credit.from_tokens(ro, torch.zeros_like(ro.rewards), "broken")
        credit.token[0, 0] = float("nan")
        return credit
    with pytest.raises(ValueError, match="estimator"):
        train(learner, broken, iterations=1, progress=False)
    with pytest.raises(TypeError, match="critic"):
        train(learner, "grpo", critic=object(), progress=False)
    with pytest.raises(ValueError, match="lr"):
        train(learner, "grpo", lr=0.0, progress=False)
    with pytest.raises(ValueError, match="group_size"):
        ChainLearner(learner.env, learner.policy, batch_size=10, group_size=4)
    with pytest.raises(ValueError, match="runs"):
        compare(chain_learner, {})


def test_compare_and_summarise_report_spread_over_seeds():
    curves = compare(lambda s: chain_learner(seed=s), {"rloo": lambda L: {"estimator": "rloo", "kind": "reinforce"},
                                                       "grpo": lambda L: {"estimator": "grpo"}},
                     seeds=(0, 1), iterations=3, eval_every=3, progress=False)
    table = summarise(curves).set_index("label")
    assert set(table.index) == {"rloo", "grpo"} and (table.seeds == 2).all()
    for label in ("rloo", "grpo"):
        runs = curves[curves.label == label]
        changes = [r.success.iloc[-1] - r.success.iloc[0] for _, r in runs.groupby("seed")]
        assert table.loc[label, "change_mean"] == pytest.approx(sum(changes) / 2)
        assert table.loc[label, "change_min"] == pytest.approx(min(changes))


# --------------------------------------------------------------------------- the tiny LM
@pytest.fixture(scope="module")
def lm_learner():
    from labkit.envs.arithmetic.lm import ArithmeticLM
    env = ArithmeticLM.load()
    return LMLearner(env, env.task.sample_prompts(16, 3, seed=0),
                     env.task.sample_prompts(8, 3, split="held_out", seed=0), prompts_per_batch=2, n_per_prompt=4)


@pytest.mark.usefixtures("one_torch_thread")
def test_lm_logprobs_match_the_sampler(lm_learner):
    ro = lm_learner.collect(1, seed=5)
    logp = lm_learner.logprobs(ro, torch.arange(ro.batch_size))
    assert logp.requires_grad
    assert torch.allclose(logp.detach()[ro.mask], ro.logprobs[ro.mask], atol=1e-4)
    assert (logp.detach()[~ro.mask] == 0).all()
    with pytest.raises(ValueError, match="prompts"):
        sequence_logprobs(lm_learner.env.model, ro.info["prompt_ids"][:1], ro.tokens, ro.mask)


@pytest.mark.usefixtures("one_torch_thread")
def test_lm_training_step_moves_the_policy_and_counts_tokens(lm_learner):
    before = [p.detach().clone() for p in lm_learner.parameters()]
    cur = train(lm_learner, "reinforce", kind="reinforce", iterations=1, lr=1e-4, progress=False)
    after = list(lm_learner.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(after, before))
    assert 0.0 <= cur.success.iloc[-1] <= 1.0
    assert cur.policy_tokens.iloc[-1] >= cur.env_steps.iloc[-1] > 0  # sampling also reads the prompts
    with torch.no_grad():  # put the shared model back for the other tests
        for p, b in zip(lm_learner.parameters(), before):
            p.copy_(b)


# --------------------------------------------------------------------------- ToolWorld learner
def tool_learner(seed=0, batch_filter=None, **env_kw):
    from labkit.envs import ToolWorld
    from labkit.envs.toolworld import ToolLearner
    env = ToolWorld(3, max_turns=10, **env_kw)
    return ToolLearner(env, env.make_policy(init_std=0.1, seed=seed), n_tasks=4, group_size=8,
                       batch_filter=batch_filter)


def test_tool_learner_improves_exact_success_on_an_easy_world():
    learner = tool_learner()
    curve = train(learner, "grpo", iterations=30, kind="grpo", lr=0.1, eval_every=10, seed=0, progress=False)
    before, after = curve.success.iloc[0], curve.success.iloc[-1]
    assert after > before + 0.25, (before, after)
    assert learner.last_truth.J == pytest.approx(after)
    # the same seed gives the same curve
    again = train(tool_learner(), "grpo", iterations=30, kind="grpo", lr=0.1, eval_every=10, seed=0, progress=False)
    assert torch.allclose(torch.tensor(curve.success.fillna(-1).values), torch.tensor(again.success.fillna(-1).values))


def test_tool_learner_logprobs_are_those_that_sampled():
    learner = tool_learner()
    ro = learner.collect(1, seed=5)
    rows = torch.arange(ro.batch_size)
    logp = learner.logprobs(ro, rows)
    assert torch.allclose(logp[ro.mask], ro.logprobs[ro.mask].to(logp.dtype), atol=1e-6)


def test_a_batch_filter_trains_on_fewer_rows_but_is_charged_for_all_it_sampled():
    from functools import partial
    from labkit.credit.group import starpo_filter
    plain = train(tool_learner(), "grpo", iterations=3, seed=1, progress=False)
    filtered = train(tool_learner(batch_filter=partial(starpo_filter, keep=0.25)), "grpo", iterations=3, seed=1,
                     progress=False)
    # iteration 1 samples the same batch (same policy, same seed): the same env steps are charged
    assert filtered.env_steps.iloc[1] == plain.env_steps.iloc[1]
    ro = tool_learner(batch_filter=partial(starpo_filter, keep=0.25)).collect(1, seed=1)
    assert ro.batch_size == 8 and ro.info["sampled_steps"] > int(ro.mask.sum())


# --------------------------------------------------------------------------- SORL: the loss
def test_turn_ratio_is_the_geometric_mean_of_the_turns_tokens():
    log_ratio = torch.tensor([[math.log(2.0), math.log(0.5), math.log(4.0), 0.3]])
    mask = torch.tensor([[True, True, True, False]])
    tid = torch.tensor([[0, 0, 1, -1]])
    out = turn_log_ratio(log_ratio, mask, tid)
    # turn 0: sqrt(2 * 0.5) = 1 -> log 0; turn 1: one token keeps its ratio; off-mask unchanged
    assert torch.allclose(out, torch.tensor([[0.0, 0.0, math.log(4.0), 0.3]]))


def test_sorl_renormalisation_by_hand():
    # two positions, ratios 1.0 and 1.5 (outside [0.8, 1.2]), advantages 1 and 3
    # log-probabilities (<= 0): both shifted by -1, so the ratios stay 1.0 and 1.5
    old = torch.full((1, 2), -1.0, dtype=torch.float64)
    logp = torch.tensor([[-1.0, math.log(1.5) - 1.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, 3.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    plain, st0 = policy_loss(logp, old, adv, mask, "ppo_clip")
    assert set(st0) == {"clip_frac", "approx_kl"}  # defaults: the old loss and stats, unchanged
    # plain: -(1 * 1 + min(1.5 * 3, 1.2 * 3)) / 2 = -(1 + 3.6) / 2
    assert float(plain.detach()) == pytest.approx(-2.3)
    sorl, st = policy_loss(logp, old, adv, mask, "ppo_clip", renorm="sorl")
    # kappa = |A| outside / |A| total = 3 / 4, weight 1/4 on every position
    assert float(sorl.detach()) == pytest.approx(-2.3 * 0.25)
    assert st["out_frac"] == pytest.approx(0.5) and st["scale"] == pytest.approx(0.25)
    # per trajectory: a second row without drift keeps weight 1
    old2 = torch.full((2, 2), -1.0, dtype=torch.float64)
    logp2 = torch.tensor([[0.0, math.log(1.5)], [0.0, 0.0]], dtype=torch.float64) - 1.0
    adv2 = torch.tensor([[1.0, 3.0], [2.0, 2.0]], dtype=torch.float64)
    row, _ = policy_loss(logp2, old2, adv2, torch.ones(2, 2, dtype=torch.bool), "grpo", renorm="sorl_row")
    # row 0: 0.25 * -(1 + 3.6) / 2; row 1: -(2 + 2) / 2; grpo: mean of the two rows
    assert float(row) == pytest.approx((0.25 * -2.3 + -2.0) / 2)


def test_policy_loss_rejects_bad_sorl_arguments():
    x = torch.zeros(1, 2)
    m = torch.ones(1, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="^renorm"):
        policy_loss(x, x, x, m, renorm="sometimes")
    with pytest.raises(ValueError, match="^ratio_level"):
        policy_loss(x, x, x, m, ratio_level="sentence")
    with pytest.raises(ValueError, match="^turn_ids"):
        policy_loss(x, x, x, m, ratio_level="turn")


# --------------------------------------------------------------------------- SORL: the loop
def _learner(seed=0):
    env = small_world()
    return ToolLearner(env, env.make_policy(), n_tasks=4, group_size=4)


def test_staleness_zero_is_the_on_policy_loop_and_staleness_k_lags():
    base = train(_learner(), "grpo", kind="grpo", iterations=4, eval_every=2, progress=False)
    assert "staleness" not in base.columns
    stale = train(_learner(), "grpo", kind="grpo", iterations=5, eval_every=5, progress=False, staleness=2,
                  epochs=2, renorm="sorl_row")
    assert stale.staleness.iloc[1:].tolist() == [0, 1, 2, 2, 2]
    # every iteration samples (and pays for) one fresh batch, whatever batch it trains on
    assert (stale.env_steps.diff().iloc[1:] > 0).all()
    assert stale.scale.iloc[1:].between(0, 1).all()
    # the first iteration trains on its own fresh batch: identical to the on-policy run
    assert stale.loss.iloc[1] == pytest.approx(train(_learner(), "grpo", kind="grpo", iterations=1, epochs=2,
                                                     progress=False).loss.iloc[1])


def test_train_rejects_bad_off_policy_arguments():
    with pytest.raises(ValueError, match="^staleness"):
        train(_learner(), "grpo", iterations=1, staleness=-1, progress=False)
    with pytest.raises(ValueError, match="^renorm"):
        train(_learner(), "grpo", iterations=1, renorm="yes", progress=False)
    with pytest.raises(ValueError, match="^arms"):
        offpolicy_comparison(_learner, arms=["nope"])


def test_offpolicy_comparison_runs_every_arm():
    curves = offpolicy_comparison(_learner, staleness=2, seeds=(0,), kind="grpo", iterations=3, eval_every=3)
    table = summarise(curves)
    assert len(table) == 4 and (table.seeds == 1).all()


# --------------------------------------------------------------------------- a loss of one's own
def test_a_loss_fn_equal_to_the_labs_loss_gives_the_labs_curve():
    def grpo_loss(logp, old_logp, advantages, mask):
        return policy_loss(logp, old_logp, advantages, mask, "grpo")[0]

    kw = dict(kind="grpo", iterations=4, eval_every=2, epochs=2, minibatches=2, seed=3, progress=False)
    lab = train(chain_learner(seed=1), "grpo", **kw)
    own = train(chain_learner(seed=1), "grpo", loss_fn=grpo_loss, **kw)
    cols = ["train_reward", "success", "loss", "grad_norm", "entropy", "clip_frac", "approx_kl", "env_steps"]
    assert own[cols].equals(lab[cols])
    assert (own.kind == "loss_fn").all() and (lab.kind == "grpo").all()
    assert own.clip_frac.iloc[1:].gt(0).any()  # two epochs: the second one clips, measured the lab's way
    # the other aggregation is another curve
    token = train(chain_learner(seed=1), "grpo", loss_fn=lambda *a: policy_loss(*a, "ppo_clip")[0], **kw)
    assert not token.loss.equals(own.loss)


def test_a_loss_fn_is_used_and_checked():
    seen = []

    def zero_step(logp, old_logp, advantages, mask):
        seen.append((tuple(logp.shape), mask.dtype, logp.requires_grad))
        return 0.0 * logp[mask].sum()

    learner = chain_learner()
    before = learner.policy.logits.detach().clone()
    cur = train(learner, "grpo", iterations=2, loss_fn=zero_step, optimizer="sgd", progress=False)
    assert seen and seen[0] == ((32, 12), torch.bool, True)
    assert torch.equal(learner.policy.logits.detach(), before)  # a zero loss moves nothing
    assert cur.loss.iloc[1:].eq(0).all()
    with pytest.raises(TypeError, match="^loss_fn: "):
        train(chain_learner(), "grpo", iterations=1, loss_fn="grpo", progress=False)
    with pytest.raises(ValueError, match="^loss_fn: .*renorm"):
        train(chain_learner(), "grpo", iterations=1, loss_fn=zero_step, renorm="sorl", progress=False)
    for bad, match in ((lambda lp, o, a, m: lp.sum(1), "one number"), (lambda lp, o, a, m: 1.0, "scalar tensor"),
                       (lambda lp, o, a, m: torch.tensor(0.0), "does not depend on logp"),
                       (lambda lp, o, a, m: lp.sum() * float("nan"), "non-finite")):
        with pytest.raises((TypeError, ValueError), match=f"^loss_fn: .*{match}"):
            train(chain_learner(), "grpo", iterations=1, loss_fn=bad, progress=False)


def test_a_missing_learner_is_refused_by_name():
    with pytest.raises(TypeError, match=r"^learner: expected a learner with parameters\(\), collect\(\), logprobs\(\) "
                                        r"and evaluate\(\) \(e.g. ChainLearner\), got None"):
        train(None, "grpo", iterations=1, progress=False)
    with pytest.raises(TypeError, match=r"^learner: .*got str \(it has no parameters, collect, logprobs, evaluate\)"):
        train("x", "grpo", iterations=1, progress=False)
    runs = {"grpo": lambda learner: {"estimator": "grpo", "iterations": 1}}
    with pytest.raises(TypeError, match="^make_learner: expected a function seed -> learner, got NoneType"):
        compare(None, runs, progress=False)
    with pytest.raises(TypeError, match="^make_learner: expected a learner .*got None"):
        compare(lambda seed: None, runs, progress=False)
    with pytest.raises(TypeError, match="^make_learner: expected a learner .*got None"):
        offpolicy_comparison(lambda seed: None, progress=False)


def test_a_number_where_a_setting_name_is_expected_is_refused_by_name():
    env, policy, _ = chain_setup(5)
    learner = ChainLearner(env, policy, batch_size=4, group_size=2)
    for opt in ("kind", "optimizer", "ratio_level"):
        with pytest.raises(TypeError, match=rf"^{opt}: expected one of .* \(a name\), got 3 \(int\)"):
            train(learner, "grpo", iterations=1, progress=False, **{opt: 3})
