"""Implicit rewards (From r to Q*, T-REG), redistribution (RED, ACPO attribution), HICRA and InT:
hand-computed cases, degenerate input, bad arguments, and a few checks on the real tiny LM."""
import pytest
import torch

from labkit.core.credit import Cost, Credit
from labkit.core.rollouts import Rollouts
from labkit.credit import estimate
from labkit.credit.counterfactual import int_interventions
from labkit.credit.entropy import hicra
from labkit.credit.implicit import dpo_implicit_q, t_reg
from labkit.credit.redistribution import acpo, red

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: one thread, restored afterwards


def two_steps(reward=1.0, n=4):
    """One trajectory of n tokens, steps [0, 0, 1, 1], outcome on the last token."""
    rewards = torch.zeros(1, n)
    rewards[0, -1] = reward
    return Rollouts(tokens=torch.zeros(1, n, dtype=torch.long), mask=torch.ones(1, n, dtype=torch.bool),
                    rewards=rewards, step_ids=torch.tensor([[0, 0, 1, 1]]))


def empty():
    """Row 0 generated nothing; row 1 one token with reward 0 (a batch with nothing generated at
    all is refused by Rollouts, so "nothing generated" is a row's property)."""
    return Rollouts(tokens=torch.zeros(2, 3, dtype=torch.long),
                    mask=torch.tensor([[False, False, False], [True, False, False]]), rewards=torch.zeros(2, 3),
                    group_ids=torch.tensor([0, 1]))


def test_a_batch_with_nothing_generated_is_refused():
    with pytest.raises(ValueError, match="^mask"):
        Rollouts(tokens=torch.zeros(1, 3, dtype=torch.long), mask=torch.zeros(1, 3, dtype=torch.bool),
                 rewards=torch.zeros(1, 3))


# --------------------------------------------------------------------------- From r to Q*
def test_dpo_implicit_q_hand_computed_token_and_step():
    ro = two_steps()
    lp = torch.tensor([[-0.1, -0.5, -1.0, -0.2]])
    ref = torch.tensor([[-0.3, -0.5, -0.4, -0.2]])
    tok = dpo_implicit_q(ro, logprobs=lp, ref_logprobs=ref, beta=0.5, level="token")
    assert tok.token[0].tolist() == pytest.approx([0.1, 0.0, -0.3, 0.0])
    step = dpo_implicit_q(ro, logprobs=lp, ref_logprobs=ref, beta=0.5)
    assert step.level == "step" and step.values[0].tolist() == pytest.approx([0.1, -0.3])
    assert step.token[0].tolist() == pytest.approx([0.1, 0.1, -0.3, -0.3])
    assert float(step.info["sequence_reward"][0]) == pytest.approx(-0.2)
    # logprobs default to the rollouts' own (the sampling policy's)
    own = dpo_implicit_q(ro.with_(logprobs=lp), ref_logprobs=ref, beta=0.5, level="token")
    assert torch.allclose(own.token, tok.token)


def test_dpo_implicit_q_degenerate_input():
    ro = two_steps()
    lp = torch.tensor([[-0.1, -0.5, -1.0, -0.2]])
    assert dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp * 2, beta=0.0).token.abs().sum() == 0
    assert dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp).token.abs().sum() == 0
    e = empty()
    c = dpo_implicit_q(e, logprobs=torch.zeros(2, 3), ref_logprobs=torch.zeros(2, 3))
    assert c.token.abs().sum() == 0
    one = Rollouts(tokens=torch.zeros(1, 2, dtype=torch.long), mask=torch.ones(1, 2, dtype=torch.bool),
                   rewards=torch.tensor([[0.0, 1.0]]), step_ids=torch.tensor([[0, 0]]))
    c = dpo_implicit_q(one, logprobs=torch.tensor([[-0.1, -0.2]]), ref_logprobs=torch.tensor([[-0.3, -0.3]]), beta=1.0)
    assert c.values[0].tolist() == pytest.approx([0.3])  # the sequence-level implicit reward


def test_dpo_implicit_q_bad_arguments():
    ro = two_steps()
    lp = torch.full((1, 4), -0.5)
    with pytest.raises(ValueError, match="^logprobs"):
        dpo_implicit_q(ro, ref_logprobs=lp)
    with pytest.raises(ValueError, match="^ref_logprobs"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=None)
    with pytest.raises(ValueError, match="^ref_logprobs"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=torch.full((1, 3), -0.5))
    with pytest.raises(ValueError, match="^logprobs"):
        dpo_implicit_q(ro, logprobs=-lp, ref_logprobs=lp)
    with pytest.raises(ValueError, match="^beta"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp, beta=-1.0)
    with pytest.raises(ValueError, match="^level"):
        dpo_implicit_q(ro, logprobs=lp, ref_logprobs=lp, level="turn")


# --------------------------------------------------------------------------- T-REG
def test_t_reg_hand_computed_and_degenerate():
    ro = two_steps()
    good = torch.tensor([[-0.1, -0.2, -2.0, -0.1]])
    bad = torch.tensor([[-0.2, -0.2, -0.5, -0.1]])
    c = t_reg(ro, better_logprobs=good, worse_logprobs=bad, scale=2.0)
    assert c.level == "token" and c.token[0].tolist() == pytest.approx([0.2, 0.0, -3.0, 0.0])
    s = t_reg(ro, better_logprobs=good, worse_logprobs=bad, level="step")
    assert s.values[0].tolist() == pytest.approx([0.1, -1.5])
    assert t_reg(ro, better_logprobs=good, worse_logprobs=bad, scale=0.0).token.abs().sum() == 0
    assert t_reg(empty(), better_logprobs=torch.zeros(2, 3), worse_logprobs=torch.zeros(2, 3)).token.abs().sum() == 0
    with pytest.raises(ValueError, match="^worse_logprobs"):
        t_reg(ro, better_logprobs=good, worse_logprobs=torch.full((1, 4), float("nan")))
    with pytest.raises(ValueError, match="^scale"):
        t_reg(ro, better_logprobs=good, worse_logprobs=bad, scale=-1)


# --------------------------------------------------------------------------- RED
def test_red_hand_computed_telescopes():
    ro = two_steps()
    s = torch.tensor([[0.6, 0.7, 0.2, 0.3]])
    c = red(ro, scores=s, prompt_scores=torch.tensor([0.5]))
    assert c.token[0].tolist() == pytest.approx([0.1, 0.1, -0.5, 0.1])
    assert float(c.token.sum()) == pytest.approx(0.3 - 0.5)           # final minus prompt score
    ret = red(ro, scores=s, prompt_scores=torch.tensor([0.5]), credit="return")
    assert ret.token[0].tolist() == pytest.approx([-0.2, -0.3, -0.4, 0.1])
    step = red(ro, scores=s, prompt_scores=torch.tensor([0.5]), level="step")
    assert step.values[0].tolist() == pytest.approx([0.2, -0.4])      # score after step - before it
    mixed = red(ro, scores=s, prompt_scores=torch.tensor([0.5]), outcome_weight=2.0)
    assert mixed.token[0].tolist() == pytest.approx([0.1, 0.1, -0.5, 2.1])
    assert c.cost == Cost()


def test_red_masked_gap_and_callable_scorer():
    # a tool position (masked) in the middle: the next token is measured from the last generated one
    ro = Rollouts(tokens=torch.zeros(1, 4, dtype=torch.long), mask=torch.tensor([[True, False, True, True]]),
                  rewards=torch.tensor([[0.0, 0.0, 0.0, 1.0]]))
    s = torch.tensor([[0.4, 99.0, 0.9, 1.0]])
    c = red(ro, scores=lambda r: (s, torch.tensor([0.5])))
    assert c.token[0].tolist() == pytest.approx([-0.1, 0.0, 0.5, 0.1])
    assert c.cost.aux_calls == 3 + 1
    assert red(ro, scores=lambda r: s).cost.aux_calls == 3


def test_red_degenerate_and_bad_arguments():
    c = red(empty(), scores=torch.zeros(2, 3))
    assert c.token.abs().sum() == 0 and float(c.info["final_scores"][0]) == 0
    ro = two_steps()
    const = red(ro, scores=torch.full((1, 4), 0.7), prompt_scores=torch.tensor([0.2]))
    assert const.token[0].tolist() == pytest.approx([0.5, 0, 0, 0])
    with pytest.raises(ValueError, match="^scores"):
        red(ro, scores=None)
    with pytest.raises(ValueError, match="^scores"):
        red(ro, scores=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="^prompt_scores"):
        red(ro, scores=torch.zeros(1, 4), prompt_scores=torch.zeros(3))
    with pytest.raises(ValueError, match="^credit"):
        red(ro, scores=torch.zeros(1, 4), credit="q")


# --------------------------------------------------------------------------- ACPO attribution
def linear_model(w):
    """scores = sum_t w_t * e_t with one-dimensional embeddings e_t = 1, 2, 3, ...: saliency a_t = w_t e_t."""
    def fn(ro):
        B, T = ro.tokens.shape
        e = torch.arange(1.0, T + 1).repeat(B, 1)[..., None].requires_grad_(True)
        return (e.squeeze(-1) * w).sum(1), e
    return fn


def test_acpo_hand_computed():
    ro = two_steps(reward=1.0)
    w = torch.tensor([[1.0, 0.0, -1.0, 0.5]])      # saliency 1, 0, -3, 2 -> steps 1 and -1
    c = acpo(ro, outcome_model=linear_model(w))
    assert c.values[0].tolist() == pytest.approx([0.5, 0.5])               # |1| : |-1|
    assert c.info["saliency"][0].tolist() == pytest.approx([1.0, 0.0, -3.0, 2.0])
    w2 = torch.tensor([[1.0, 2.0, 0.0, 1.0]])      # saliency 1, 4, 0, 4 -> steps 5 and 4
    s = acpo(ro, outcome_model=linear_model(w2), total=torch.tensor([-0.9]), normalize="signed")
    assert s.values[0].tolist() == pytest.approx([-0.5, -0.4])
    assert float(s.values.sum()) == pytest.approx(-0.9)
    assert c.cost.aux_calls == 1


def test_acpo_degenerate_and_bad_arguments():
    ro = two_steps(reward=1.0)
    zero = acpo(ro, outcome_model=linear_model(torch.zeros(1, 4)))
    assert zero.values[0].tolist() == pytest.approx([0.5, 0.5])            # no saliency: equal split
    cancel = acpo(ro, outcome_model=linear_model(torch.tensor([[1.0, 0.0, -1 / 3, 0.0]])), normalize="signed")
    assert cancel.values[0].tolist() == pytest.approx([0.5, 0.5])
    assert acpo(ro, outcome_model=linear_model(torch.ones(1, 4)), total=torch.zeros(1)).token.abs().sum() == 0
    with pytest.raises(ValueError, match="^outcome_model"):
        acpo(ro, outcome_model=lambda r: torch.zeros(1))
    with pytest.raises(ValueError, match="^outcome_model"):
        acpo(ro, outcome_model=lambda r: (torch.zeros(1), torch.zeros(1, 4, 2)))
    with pytest.raises(TypeError, match="^outcome_model"):
        acpo(ro, outcome_model=None)
    with pytest.raises(ValueError, match="^normalize"):
        acpo(ro, outcome_model=linear_model(torch.ones(1, 4)), normalize="l2")


# --------------------------------------------------------------------------- HICRA
def test_hicra_hand_computed():
    ro = Rollouts(tokens=torch.zeros(1, 3, dtype=torch.long), mask=torch.ones(1, 3, dtype=torch.bool),
                  rewards=torch.tensor([[0.0, 0.0, 1.0]]))
    A = torch.tensor([[1.0, -1.0, 2.0]])
    c = hicra(ro, planning_mask=torch.tensor([[True, True, False]]), alpha=0.5, base_credit=A)
    assert c.token[0].tolist() == pytest.approx([1.5, -0.5, 2.0])
    assert c.info["planning_share"] == pytest.approx(2 / 3)
    # default base: GRPO over a group of two (scores 1 and 0 -> +-1/sqrt(2))
    two = Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=torch.ones(2, 2, dtype=torch.bool),
                   rewards=torch.tensor([[0.0, 1.0], [0.0, 0.0]]))
    g = estimate("hicra", two, planning_mask=torch.tensor([[True, False], [True, False]]))
    a = 2 ** -0.5 / (1 + 1e-6 * 2 ** 0.5)
    assert g.token[:, 0].tolist() == pytest.approx([1.2 * a, -0.8 * a], rel=1e-5)
    assert g.token[:, 1].tolist() == pytest.approx([a, -a], rel=1e-5)


def test_hicra_degenerate_and_bad_arguments():
    ro = two_steps()
    A = torch.tensor([[1.0, -1.0, 2.0, 0.0]])
    none = hicra(ro, planning_mask=torch.zeros(1, 4, dtype=torch.bool), base_credit=A)
    assert torch.allclose(none.token, A)
    every = hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base_credit=A, alpha=0.2)
    assert every.token[0].tolist() == pytest.approx([1.2, -0.8, 2.4, 0.0])
    assert torch.allclose(hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base_credit=A, alpha=0).token, A)
    base = Credit.from_tokens(ro, A, "given")
    assert hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base_credit=base).info["base"] == "given"
    with pytest.raises(TypeError, match="^planning_mask"):
        hicra(ro, planning_mask=torch.ones(1, 4))
    with pytest.raises(ValueError, match="^planning_mask"):
        hicra(ro, planning_mask=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="^base"):
        hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), base="nope")
    with pytest.raises(ValueError, match="^alpha"):
        hicra(ro, planning_mask=torch.ones(1, 4, dtype=torch.bool), alpha=-0.1)


def test_planning_mask_labels_arithmetic_roles():
    from labkit.envs.arithmetic.labels import planning_mask, token_roles

    chars = list("23+48=71;#71") + ["<eos>"]
    ro = Rollouts(tokens=torch.zeros(1, len(chars), dtype=torch.long), mask=torch.ones(1, len(chars), dtype=torch.bool),
                  rewards=torch.zeros(1, len(chars)), text=[chars])
    roles = token_roles(ro)[0]
    assert roles == ["operand"] * 2 + ["operator"] + ["operand"] * 2 + ["operator"] + ["result"] * 2 + \
        ["separator", "answer_mark", "answer", "answer", "eos"]
    pm = planning_mask(ro)[0].tolist()
    assert pm == [True, True, False, True, True, False, False, False, False, True, False, False, False]
    assert planning_mask(ro, roles=("result",))[0].sum() == 2
    with pytest.raises(ValueError, match="^roles"):
        planning_mask(ro, roles=("strategy",))
    with pytest.raises(ValueError, match="^decode"):
        planning_mask(ro.with_(text=None))


# --------------------------------------------------------------------------- InT
def fake_rewrites(outcomes, changed):
    calls = []

    def fn(ro, cells, k):
        calls.append(list(cells))
        return torch.tensor(outcomes[:len(cells)], dtype=torch.float64), torch.tensor(changed[:len(cells)]), \
            Cost(policy_forwards=len(cells) * k)
    fn.calls = calls
    return fn


def test_int_hand_computed():
    ro = two_steps(reward=0.0)
    fn = fake_rewrites([[1.0, 0.0, 1.0], [1.0, 1.0, 0.0]], [[True, True, False], [False, False, False]])
    c = int_interventions(ro, rewrite_fn=fn, k=3)
    # step 0: differing rewrites score 1, 0 -> flip 0.5, credit -0.5; step 1: no intervention -> 0
    assert c.values[0].tolist() == pytest.approx([-0.5, 0.0])
    assert c.info["interventions"][0].tolist() == [2, 0]
    assert fn.calls == [[(0, 0), (0, 1)]] and c.cost.policy_forwards == 6
    # a successful response is skipped by default and credited 1 - flip with rows="all"
    win = two_steps(reward=1.0)
    skip = fake_rewrites([], [])
    assert int_interventions(win, rewrite_fn=skip, k=3).token.abs().sum() == 0 and skip.calls == []
    allrows = int_interventions(win, rewrite_fn=fake_rewrites([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]],
                                                              [[True] * 3, [True] * 3]), k=3, rows="all")
    assert allrows.values[0].tolist() == pytest.approx([2 / 3, 0.0])


def test_int_degenerate_and_bad_arguments():
    # nothing failed (one success and a row with nothing generated): no intervention, no cost
    solved = empty().with_(rewards=torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    c = int_interventions(solved, rewrite_fn=fake_rewrites([], []))
    assert c.token.abs().sum() == 0 and c.cost == Cost()
    ro = two_steps(reward=0.0)
    with pytest.raises(ValueError, match="^rewrite_fn"):
        int_interventions(ro, rewrite_fn=lambda r, cells, k: (torch.zeros(1, k), torch.zeros(1, k), Cost()), k=2)
    with pytest.raises(TypeError, match="^rewrite_fn"):
        int_interventions(ro, rewrite_fn=None)
    with pytest.raises(ValueError, match="^k"):
        int_interventions(ro, rewrite_fn=fake_rewrites([], []), k=0)
    with pytest.raises(ValueError, match="^rows"):
        int_interventions(ro, rewrite_fn=fake_rewrites([], []), rows="some")


# --------------------------------------------------------------------------- the real tiny LM
@pytest.fixture(scope="module")
def lm_ref():
    from labkit.envs.arithmetic.lm import ArithmeticLM
    from labkit.envs.arithmetic.truth import load_reference

    env = ArithmeticLM.load()
    ref, _ = load_reference(env)
    return env, ref


def test_rollout_logprobs_reproduce_the_sampling_logprobs(lm_ref):
    env, ref = lm_ref
    lp = env.rollout_logprobs(ref)
    assert torch.allclose(lp, torch.where(ref.mask, ref.logprobs.double(), 0.0), atol=1e-4)


def test_tuned_models_give_finite_implicit_credit(lm_ref):
    env, ref = lm_ref
    sub = ref.select(range(8))
    dpo = env.tuned("dpo")
    c = dpo_implicit_q(sub, logprobs=dpo.rollout_logprobs(sub), ref_logprobs=env.rollout_logprobs(sub))
    assert torch.isfinite(c.token).all() and c.token.abs().sum() > 0
    treg = env.tuned("treg")
    t = t_reg(sub, better_logprobs=treg.rollout_logprobs(sub, condition="better"),
              worse_logprobs=treg.rollout_logprobs(sub, condition="worse"))
    assert t.token.abs().sum() > 0
    with pytest.raises(ValueError, match="^name"):
        env.tuned("ppo")
    with pytest.raises(ValueError, match="^condition"):
        treg.rollout_logprobs(sub, condition="best")


def test_step_rewrites_on_a_failed_reference_rollout(lm_ref):
    env, ref = lm_ref
    failed = (ref.scores == 0).nonzero().flatten()[:2]
    sub = ref.select(failed)
    c = int_interventions(sub, rewrite_fn=env.step_rewrite_fn(seed=0), k=2)
    assert c.cost.policy_forwards >= 2 * int(sub.n_steps.sum())
    assert (c.values <= 0).all() and (c.info["interventions"] <= 2).all()


def test_stand_in_outcome_model_adapters_on_the_tiny_lm(lm_ref):
    from labkit.learn.critics import LMCritic

    env, ref = lm_ref
    sub = ref.select(range(3))
    critic = LMCritic.from_policy(env.model, seed=0)
    with torch.no_grad():  # an untrained head is constant (w = 0): give it a direction to attribute to
        critic.head.weight.normal_(0, 0.1, generator=torch.Generator().manual_seed(0))
    fn = env.prefix_score_fn(critic)
    c = red(sub, scores=fn)
    full = [p + sub.tokens[b][sub.mask[b]].tolist() for b, p in enumerate(sub.info["prompt_ids"])]
    want = critic.prefix_values(full) - critic.prefix_values(sub.info["prompt_ids"])
    assert torch.allclose(c.token.sum(1), want, atol=1e-5)            # telescoping on a real scorer
    assert c.cost.aux_calls == int(sub.mask.sum()) + 3 == fn.calls
    a = acpo(sub, outcome_model=env.outcome_attribution_fn(critic))
    assert torch.allclose(a.info["model_scores"].double(), critic.prefix_values(full), atol=1e-5)
    assert torch.allclose(a.values.sum(1), sub.scores.double(), atol=1e-9)
    assert a.info["saliency"].abs().sum() > 0
    with pytest.raises(TypeError, match="^scorer"):
        env.outcome_attribution_fn(object())


def test_tuned_weights_were_built_from_the_shipped_model():
    import hashlib
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    log = json.loads((root / "data" / "implicit_lm" / "train_log.json").read_text())
    base = hashlib.sha256((root / "data" / "tiny_lm" / "model.safetensors").read_bytes()).hexdigest()
    assert log["provenance"]["inputs"]["tiny_lm/model.safetensors"] == base, \
        "data/implicit_lm is stale: rerun scripts/train_implicit_lm.py"
    for name, digest in log["sha256"].items():
        assert hashlib.sha256((root / "data" / "implicit_lm" / name).read_bytes()).hexdigest() == digest
