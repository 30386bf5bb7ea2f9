"""Notebook 04's runners (labkit.course.nb04_process_rewards): scoring credit against the Monte
Carlo truth of the reference rollouts, and the cross-family table."""
import pytest
import torch

from labkit.core.rollouts import Cost, Credit
from labkit.course import nb04_process_rewards as lesson
from labkit.envs.arithmetic.truth import load_reference


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


def test_the_truth_itself_scores_perfectly(reference):
    truth = lesson.truth_step_advantage(reference)
    q = lesson.credit_quality(Credit.from_tokens(reference, truth, "truth"), reference)
    assert q["rank_corr"] == pytest.approx(1.0)
    assert q["rank_corr_within"] == pytest.approx(1.0)
    assert q["hit_rate"] == pytest.approx(1.0)
    assert q["policy_forwards"] == 0 and q["aux_calls"] == 0


def test_outcome_credit_has_no_within_rollout_signal(reference):
    outcome = reference.scores.double()[:, None].expand(-1, reference.horizon) * reference.mask
    # equal credit on every step of a rollout: nothing to rank inside it, and the hit rate is chance
    assert lesson.step_rank_correlation(outcome, reference, within=True) == 0.0
    q = lesson.credit_quality(Credit.from_tokens(reference, outcome.float(), "outcome"), reference)
    assert q["hit_rate"] == pytest.approx(q["chance"])
    # pooled over rollouts it does rank: failed rollouts hold the negative true advantages
    assert q["rank_corr"] > 0.2


def test_reversed_truth_ranks_backwards(reference):
    truth = lesson.truth_step_advantage(reference)
    assert lesson.step_rank_correlation(-truth, reference) == pytest.approx(-1.0)
    assert lesson.step_rank_correlation(-truth, reference, within=True) == pytest.approx(-1.0)


def test_cross_family_table_runs_each_method_and_keeps_its_cost(reference):
    def costly(ro):
        return Credit.from_tokens(ro, lesson.truth_step_advantage(ro), "costly", cost=Cost(policy_forwards=7, aux_calls=2))

    methods = [lesson.Method("truth", "mc", "03_vineppo.ipynb", costly, setup="256 vines per prefix"),
               lesson.Method("zero", "episode", "01_reinforce_variance.ipynb",
                             lambda ro: Credit.from_tokens(ro, torch.zeros(ro.mask.shape), "zero"), stand_in=True)]
    df = lesson.cross_family_table(methods, reference, progress=False)
    assert list(df.method) == ["truth", "zero"]
    assert list(df.policy_forwards) == [7, 0] and list(df.aux_calls) == [2, 0]
    assert df.rank_corr.iloc[0] == pytest.approx(1.0) and df.rank_corr.iloc[1] == 0.0
    assert list(df.stand_in) == [False, True] and df.setup.iloc[0] == "256 vines per prefix"
    assert (df.seconds >= 0).all()


def test_cross_family_table_rejects_bad_methods(reference):
    with pytest.raises(ValueError, match="methods"):
        lesson.cross_family_table([], reference, progress=False)
    with pytest.raises(TypeError, match="methods"):
        lesson.cross_family_table([lambda ro: None], reference, progress=False)
    with pytest.raises(TypeError, match="credit"):
        lesson.credit_quality(torch.zeros(3), reference)
