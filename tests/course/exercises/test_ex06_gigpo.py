"""Notebook 06_gigpo's exercises: 06a GiGPO's anchor-group step term, 06b GiGPO's std-normalised
advantage (find the bug), 06c a PPO-clip policy loss with both aggregations (capstone).

For each, the reference solution passes on every seed the tests try, the template fails cleanly, and each typical wrong
answer (written the way a reader would get it wrong) fails with the hint that names its mistake."""
from __future__ import annotations

import torch

import exercise_checks as checks
from labkit.course.exercises import EXERCISES, check
from labkit.course.exercises.ex06_gigpo import gigpo_advantage_buggy

EXERCISE = "06a"


# --------------------------------------------------------------------------- typical wrong answers
def _turn_returns(turn_rewards, present, gamma):
    R = torch.zeros_like(turn_rewards, dtype=torch.float64)
    for b in range(len(R)):
        running = 0.0
        for k in reversed(range(R.shape[1])):
            if present[b, k]:
                running = turn_rewards[b, k] + gamma * running
                R[b, k] = running
    return R


def _anchor_centre(R, present, anchors, singleton_raw=False, std=False, pool_all=False):
    out = torch.zeros_like(R)
    keys = {int(a) for a in anchors[present]}
    for key in keys:
        sel = present & ((anchors == key) | pool_all)
        vals = R[present & (anchors == key)]
        pool = R[sel]
        if len(vals) == 1 and not singleton_raw:
            continue
        centred = R - pool.mean() if len(vals) > 1 or not singleton_raw else R
        if std:
            centred = centred / (vals.std() + 1e-6)
        out = torch.where(present & (anchors == key), centred, out)
    return out


def gigpo_singleton_raw(turn_rewards, present, anchors, gamma):
    return _anchor_centre(_turn_returns(turn_rewards, present, gamma), present, anchors, singleton_raw=True)


def gigpo_batch_mean(turn_rewards, present, anchors, gamma):
    R = _turn_returns(turn_rewards, present, gamma)
    return torch.where(present, R - R[present].mean(), 0.0)


def gigpo_reward_not_return(turn_rewards, present, anchors, gamma):
    return _anchor_centre(torch.where(present, turn_rewards, 0.0).double(), present, anchors)


def gigpo_undiscounted(turn_rewards, present, anchors, gamma):
    return _anchor_centre(_turn_returns(turn_rewards, present, 1.0), present, anchors)


def gigpo_std_normalised(turn_rewards, present, anchors, gamma):
    return _anchor_centre(_turn_returns(turn_rewards, present, gamma), present, anchors, std=True)


WRONG = [
    (gigpo_singleton_raw, 'anchor group of one'),
    (gigpo_batch_mean, 'sum to zero within an anchor group'),
    (gigpo_reward_not_return, "not the turn's own reward"),
    (gigpo_undiscounted, 'discount the returns by gamma'),
    (gigpo_std_normalised, 'do not divide by the std'),
]

EDGE_WRONG = [
    (gigpo_singleton_raw, 'anchor group of one'),
]


# --------------------------------------------------------------------------- the tests
class TestExercise06a(checks.ExerciseTests):
    EXERCISE = EXERCISE
    WRONG = WRONG
    EDGE_WRONG = EDGE_WRONG


# --------------------------------------------------------------------------- 06b: find the bug
def _advantage(turn_rewards, present, anchors, gamma, omega, *, unbiased=True, eps=1e-6, std_episode=True,
               use_omega=True):
    """GiGPO's mean_std_norm advantage, groups of one handled, with the switches a reader gets wrong."""
    present = present.bool()
    B, N = turn_rewards.shape
    R = _turn_returns(turn_rewards, present, gamma)
    scores = torch.where(present, turn_rewards.double(), 0.0).sum(1)
    centred = scores - scores.mean()
    episode = centred / (scores.std(unbiased=unbiased) + eps) if std_episode else centred
    step = torch.zeros(B, N, dtype=torch.float64)
    for key in anchors[present].unique():
        members = present & (anchors == key)
        vals = R[members]
        if len(vals) > 1:
            step[members] = (vals - vals.mean()) / (vals.std(unbiased=unbiased) + eps)
    return torch.where(present, episode[:, None] + (omega if use_omega else 1.0) * step, 0.0)


def gigpo_advantage(turn_rewards, present, anchors, gamma, omega):
    """The buggy function as the notebook shows it."""
    return gigpo_advantage_buggy(turn_rewards, present, anchors, gamma, omega)


def gigpo_biased_std(turn_rewards, present, anchors, gamma, omega):
    # "fixes" the NaN by switching to the biased std, which is defined for one value
    return _advantage(turn_rewards, present, anchors, gamma, omega, unbiased=False)


def gigpo_episode_centred_only(turn_rewards, present, anchors, gamma, omega):
    return _advantage(turn_rewards, present, anchors, gamma, omega, std_episode=False)


def gigpo_omega_ignored(turn_rewards, present, anchors, gamma, omega):
    return _advantage(turn_rewards, present, anchors, gamma, omega, use_omega=False)


def gigpo_no_eps(turn_rewards, present, anchors, gamma, omega):
    return _advantage(turn_rewards, present, anchors, gamma, omega, eps=0.0)


class TestExercise06b(checks.ExerciseTests):
    EXERCISE = "06b"
    BUGGY_HINT = "a turn alone in its anchor group gets NaN"
    WRONG = [
        (gigpo_advantage, "a turn alone in its anchor group gets NaN"),
        (gigpo_biased_std, "use the unbiased std"),
        (gigpo_episode_centred_only, "the episode term is divided by the std of the scores too"),
        (gigpo_omega_ignored, "weight the step term by omega"),
    ]
    EDGE_WRONG = [
        (gigpo_no_eps, "divide by (std + 1e-6)"),
    ]


    def test_the_prompt_says_what_to_compute_not_where_the_bug_is(self):
        ex = EXERCISES[self.EXERCISE]
        assert "exactly one planted mistake" in ex.prompt and "expected" not in ex.prompt.lower()
        assert "bug" not in ex.template.lower() and "#" not in ex.template.split("torch.where(present, episode")[0]\
            .split("for key in")[1]


# --------------------------------------------------------------------------- 06c: capstone, the policy loss
EPS = 0.2


def _per_token(logp, old_logp, advantages, *, clip="min"):
    ratio = torch.exp(logp - old_logp)
    unclipped, clipped = ratio * advantages, torch.clamp(ratio, 1 - EPS, 1 + EPS) * advantages
    if clip == "none":
        return -unclipped
    if clip == "ratio_only":
        return -clipped
    if clip == "max":
        return -torch.maximum(unclipped, clipped)
    return -torch.minimum(unclipped, clipped)


def _token_mean(per_token, m):
    return (per_token * m).sum() / m.sum().clamp(min=1)


def _seq_mean(per_token, m):
    lengths = m.sum(1)
    has = lengths > 0
    return ((per_token * m).sum(1)[has] / lengths[has]).sum() / has.sum().clamp(min=1)


def _aggregate(per_token, mask, aggregation):
    m = mask.double()
    return _token_mean(per_token, m) if aggregation == "token-mean" else _seq_mean(per_token, m)


def loss_over_all_positions(logp, old_logp, advantages, mask, aggregation):
    per_token = _per_token(logp, old_logp, advantages) * mask
    return per_token.mean() if aggregation == "token-mean" else per_token.mean(1)[mask.any(1)].mean()


def loss_sequence_sum(logp, old_logp, advantages, mask, aggregation):
    per_token = _per_token(logp, old_logp, advantages) * mask
    if aggregation == "token-mean":
        return per_token.sum() / mask.sum()
    return per_token.sum(1)[mask.any(1)].mean()


def loss_no_clipping(logp, old_logp, advantages, mask, aggregation):
    return _aggregate(_per_token(logp, old_logp, advantages, clip="none"), mask, aggregation)


def loss_clipped_ratio_without_min(logp, old_logp, advantages, mask, aggregation):
    return _aggregate(_per_token(logp, old_logp, advantages, clip="ratio_only"), mask, aggregation)


def loss_max_not_min(logp, old_logp, advantages, mask, aggregation):
    return _aggregate(_per_token(logp, old_logp, advantages, clip="max"), mask, aggregation)


def loss_ignores_aggregation(logp, old_logp, advantages, mask, aggregation):
    return _aggregate(_per_token(logp, old_logp, advantages), mask, "token-mean")


def loss_empty_rows_averaged_in(logp, old_logp, advantages, mask, aggregation):
    per_token = _per_token(logp, old_logp, advantages) * mask
    if aggregation == "token-mean":
        return per_token.sum() / mask.sum().clamp(min=1)
    return (per_token.sum(1) / mask.sum(1).clamp(min=1)).mean()


def loss_unguarded(logp, old_logp, advantages, mask, aggregation):
    per_token = _per_token(logp, old_logp, advantages) * mask
    if aggregation == "token-mean":
        return per_token.sum() / mask.sum()
    has = mask.any(1)
    return (per_token.sum(1)[has] / mask.sum(1)[has]).sum() / has.sum()


class TestExercise06c(checks.ExerciseTests):
    EXERCISE = "06c"
    WRONG = [
        (loss_over_all_positions, "average over the generated tokens only"),
        (loss_sequence_sum, "take the MEAN over its generated tokens, not the sum"),
        (loss_no_clipping, "no clipping"),
        (loss_clipped_ratio_without_min, "clipping the ratio alone is not PPO"),
        (loss_max_not_min, "not the max"),
        (loss_ignores_aggregation, "your loss ignores aggregation"),
        (loss_empty_rows_averaged_in, "a row with no generated token must not count as a sequence"),
    ]
    EDGE_WRONG = [
        (loss_unguarded, "a batch with no generated token has loss 0"),
    ]

    def test_the_loss_and_its_gradient_are_graded(self):
        from labkit.course.exercises.ex06_gigpo import graded_loss
        from labkit.course.solutions import policy_loss
        case = EXERCISES["06c"].cases(torch.Generator().manual_seed(0))[0]
        got = graded_loss(policy_loss, dict(case.args))
        B, T = case.args["mask"].shape
        assert got.shape == (1 + B * T,) and got.dtype == torch.float64
        grad = got[1:].reshape(B, T)
        assert bool((grad[~case.args["mask"]] == 0).all()) and bool(grad[case.args["mask"]].ne(0).any())
        assert not case.args["logp"].requires_grad  # the case itself is left as it was
        # a loss right in value but detached from logp has gradient 0: it fails
        def detached(logp, old_logp, advantages, mask, aggregation):
            return policy_loss(logp.detach(), old_logp, advantages, mask, aggregation)
        result = check(detached, "06c", seed=0, verbose=False)
        assert not result.passed and "does not carry logp's gradient" in result.hint

    def test_a_loss_of_the_wrong_shape_is_named(self):
        def per_token(logp, old_logp, advantages, mask, aggregation):
            return -torch.exp(logp - old_logp) * advantages
        result = check(per_token, "06c", seed=0, verbose=False)
        assert not result.passed and "one number (a 0-d tensor)" in result.hint
