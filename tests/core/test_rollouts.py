"""Rollouts (labkit.core.rollouts): the validated batch, its defaults and views, what it refuses."""

import re

import pytest
import torch

from labkit.core.rollouts import Rollouts

from core_cases import small_rollouts

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_defaults_and_sizes():
    r = small_rollouts()
    assert r.batch_size == 3 and r.horizon == 5
    assert r.lengths.tolist() == [5, 3, 5]
    assert r.scores.tolist() == [1.0, 1.0, 0.0]
    assert r.group_ids.tolist() == [0, 0, 0]
    assert r.step_ids[1].tolist() == [0, 1, 2, -1, -1]
    assert r.n_steps.tolist() == [5, 3, 5]


@pytest.mark.parametrize("field,value,message", [
    ("mask", torch.ones(3, 4, dtype=torch.bool), "mask"),
    ("rewards", torch.full((3, 5), float("nan")), "rewards"),
    ("group_ids", torch.zeros(2, dtype=torch.long), "group_ids"),
    ("tokens", torch.zeros(3, 5), "tokens"),
    ("logprobs", torch.zeros(3, 4), "logprobs"),
])
def test_bad_input_names_the_field(field, value, message):
    with pytest.raises((ValueError, TypeError), match=message):
        small_rollouts(**{field: value})


def test_reward_off_mask_is_rejected():
    rewards = torch.zeros(3, 5)
    rewards[1, 4] = 1.0  # trajectory 1 ended at position 2
    with pytest.raises(ValueError, match="rewards"):
        small_rollouts(rewards=rewards)


def test_step_ids_must_match_mask_and_not_decrease():
    steps = torch.tensor([[0, 0, 1, 1, 2], [0, 1, 1, -1, -1], [0, 0, 0, 0, 0]])
    r = small_rollouts(step_ids=steps)
    assert r.n_steps.tolist() == [3, 2, 1]
    bad = steps.clone(); bad[0, 3] = 0
    with pytest.raises(ValueError, match="step_ids"):
        small_rollouts(step_ids=bad)
    bad = steps.clone(); bad[1, 3] = 2
    with pytest.raises(ValueError, match="step_ids"):
        small_rollouts(step_ids=bad)


def test_anchor_keys_checked_against_steps():
    with pytest.raises(ValueError, match="anchor_keys"):
        small_rollouts(anchor_keys=[["a"] * 5, ["b"] * 5, ["c"] * 5])
    small_rollouts(anchor_keys=[["a"] * 5, ["b"] * 3, ["c"] * 5])


def test_returns_discount_and_skip_masked_positions():
    mask = torch.tensor([[True, False, True, True]])
    rewards = torch.tensor([[0.0, 0.0, 1.0, 2.0]])
    r = Rollouts(tokens=torch.zeros(1, 4, dtype=torch.long), mask=mask, rewards=rewards)
    g = r.returns(0.5)
    # position 2: 1 + 0.5*2 = 2; position 0: 0 + 0.5*2 = 1 (the masked position does not discount)
    assert g.tolist() == [[1.0, 0.0, 2.0, 2.0]]
    with pytest.raises(ValueError, match="gamma"):
        r.returns(1.5)


def test_views_reduce_and_broadcast_round_trip():
    steps = torch.tensor([[0, 0, 1, 1, 2], [0, 1, 1, -1, -1], [0, 0, 0, 0, 0]])
    r = small_rollouts(step_ids=steps)
    x = torch.arange(15, dtype=torch.float32).reshape(3, 5)
    s, present = r.view(x, "step", "sum")
    assert s[0].tolist() == [1.0, 5.0, 4.0]
    assert present.tolist() == [[True, True, True], [True, True, False], [True, False, False]]
    last, _ = r.view(x, "step", "last")
    assert last[1].tolist() == [5.0, 7.0, 0.0]
    first, _ = r.view(x, "step", "first")
    assert first[2].tolist() == [10.0, 0.0, 0.0]
    mean, _ = r.view(x, "episode", "mean")
    assert mean[:, 0].tolist() == [2.0, 6.0, 12.0]
    back = r.broadcast(s, "step")
    assert back[0].tolist() == [1.0, 1.0, 5.0, 5.0, 4.0]
    assert back[1, 3:].tolist() == [0.0, 0.0]


def test_select_and_split():
    r = small_rollouts(text=[list("abcde"), list("fghij"), list("klmno")])
    s = r.select([2, 0])
    assert s.text[0][0] == "k" and s.scores.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="n_batches"):
        r.split(2)
    assert [len(b) for b in r.split(3)] == [1, 1, 1]


def test_select_carries_per_row_truth_and_info_and_copies_them():
    r = small_rollouts(truth={"first": torch.tensor([10, 11, 12]), "J": 0.5, "forks": (1, 3), "first_two": torch.ones(2, 5)},
             info={"problems": ["p0", "p1", "p2"], "temperature": 1.0})
    s = r.select([2, 0])
    assert s.truth["first"].tolist() == [12, 10] and s.info["problems"] == ["p2", "p0"]
    assert s.truth["J"] == 0.5 and s.truth["forks"] == (1, 3) and s.info["temperature"] == 1.0
    assert "first_two" not in s.truth  # cannot be matched to the selected rows: dropped, not misaligned
    s.truth["J"] = 0.0
    assert r.truth["J"] == 0.5  # the original's dicts are untouched
    with pytest.raises(ValueError, match="^index"):
        r.select([3])
    with pytest.raises(ValueError, match="index"):
        r.select([[0, 1]])


def test_mask_as_is_kept_per_dtype_and_remade_when_the_mask_changes():
    mask = torch.tensor([[True, False, True], [False, True, True]])
    ro = Rollouts(tokens=torch.zeros(2, 3, dtype=torch.long), mask=mask, rewards=torch.zeros(2, 3))
    m32 = ro.mask_as(torch.float32)
    assert m32.dtype == torch.float32 and torch.equal(m32, mask.float())
    assert ro.mask_as(torch.float32) is m32                       # kept
    assert torch.equal(ro.mask_as(torch.float64), mask.double())  # one per dtype
    ro.mask[0, 1] = True                                          # changed in place: remade
    assert ro.mask_as(torch.float32)[0, 1] == 1.0
    ro.mask = torch.zeros(2, 3, dtype=torch.bool)                 # replaced: remade
    assert float(ro.mask_as(torch.float32).sum()) == 0.0


def test_a_float_mask_is_kept_as_a_copy_and_read_as_bool():
    given = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    ro = Rollouts(tokens=torch.zeros(2, 2, dtype=torch.long), mask=given, rewards=torch.zeros(2, 2))
    assert ro.mask.dtype == torch.bool
    kept = ro.mask_as(torch.float32)
    assert torch.equal(kept, given) and kept.data_ptr() != given.data_ptr()
    given[0, 0] = 0.0                                             # the caller's tensor is not ours
    assert ro.mask_as(torch.float32)[0, 0] == 1.0


def test_default_turn_and_agent_labels_share_one_tensor_and_stay_correct():
    # one turn and one agent are the same labels; a large imported batch keeps one copy of them
    mask = torch.tensor([[True, True, False], [True, False, False]])
    ro = Rollouts(tokens=torch.zeros(2, 3, dtype=torch.long), mask=mask, rewards=torch.zeros(2, 3))
    assert ro.agent_ids is ro.turn_ids
    assert ro.turn_ids.tolist() == [[0, 0, -1], [0, -1, -1]]
    given = Rollouts(tokens=torch.zeros(2, 3, dtype=torch.long), mask=mask, rewards=torch.zeros(2, 3),
                     turn_ids=torch.tensor([[0, 1, -1], [0, -1, -1]]))
    assert given.agent_ids is not given.turn_ids and given.agent_ids.tolist() == [[0, 0, -1], [0, -1, -1]]


def test_a_batch_with_nothing_generated_is_refused():
    with pytest.raises(ValueError, match="^mask"):
        Rollouts(tokens=torch.zeros(1, 3, dtype=torch.long), mask=torch.zeros(1, 3, dtype=torch.bool),
                 rewards=torch.zeros(1, 3))


@pytest.mark.parametrize("field", ["rewards", "logprobs", "entropies", "mask"])
def test_complex_numbers_are_refused_by_field(field):
    r = small_rollouts(logprobs=torch.full((3, 5), -0.5), entropies=torch.full((3, 5), 0.2))
    kw = dict(tokens=r.tokens, mask=r.mask, rewards=r.rewards, logprobs=r.logprobs, entropies=r.entropies)
    kw[field] = kw[field].to(torch.complex64)
    with pytest.raises(TypeError, match=rf"^{field}: expected real numbers, got complex dtype"):
        Rollouts(**kw)


def test_complex_values_are_refused_by_view_and_broadcast():
    r = small_rollouts()
    with pytest.raises(TypeError, match=r"^values: expected real numbers"):
        r.view(torch.zeros(3, 5, dtype=torch.complex64), "step")
    with pytest.raises(TypeError, match=r"^values: expected real numbers"):
        r.broadcast(torch.zeros(3, 5, dtype=torch.complex64), "step")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_rewards_whose_batch_sums_overflow_their_dtype_are_refused_naming_the_limit(dtype):
    top = torch.finfo(dtype).max
    rewards = torch.zeros(3, 5, dtype=dtype)
    rewards[0, -1] = top / 2
    with pytest.raises(ValueError, match=rf"^rewards: too large for {dtype}.*at most {re.escape(f'{top:.3g}')}"):
        small_rollouts(rewards=rewards)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rewards_just_inside_the_limit_are_kept_as_given(dtype):
    # T times the batch's total |reward| just below the dtype's largest value
    value = 0.999 * torch.finfo(dtype).max / (5 * 2)
    rewards = torch.zeros(3, 5, dtype=dtype)
    rewards[0, -1], rewards[1, 2] = value, -value
    r = small_rollouts(rewards=rewards)
    assert r.rewards is rewards
    assert bool(torch.isfinite(r.returns()).all()) and bool(torch.isfinite(r.scores).all())
