"""Step-level credit against step-level truth (labkit.scoring.steps), on the tiny LM's reference
rollouts and their Monte Carlo truth: where the first wrong step is, the first-wrong-step hit rate
(overall and per rollout) and the step rank correlation."""
import pytest
import torch

from labkit.credit import get_estimator
from labkit.envs.arithmetic.truth import load_reference, truth_step_advantage
from labkit.scoring import first_error_hit_rate, first_error_hits, first_error_positions, step_rank_correlation

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def reference(lm_env):
    return load_reference(lm_env)[0]


def test_first_error_positions_are_the_wrong_step_and_nothing_else(reference):
    """Every generated position of the first wrong step, on the rollouts that have one; nothing
    on a rollout whose steps are all right, though its padding and its first_error_step are both -1."""
    marks = first_error_positions(reference)
    first = reference.truth["first_error_step"]
    assert marks.shape == reference.mask.shape and marks.dtype == torch.bool
    padded_correct = [b for b in range(len(reference)) if first[b] < 0 and not reference.mask[b].all()]
    assert padded_correct  # the case that matched padding before: present in the shipped rollouts
    for b in range(len(reference)):
        if first[b] < 0:
            assert not marks[b].any(), b
        else:
            want = reference.mask[b] & (reference.step_ids[b] == first[b])
            assert want.any() and torch.equal(marks[b], want), b
    assert not (marks & ~reference.mask).any()
    with pytest.raises(ValueError, match="^rollouts: truth has no 'first_error_step'"):
        first_error_positions(reference.with_(truth={}))
    with pytest.raises(ValueError, match=r"^rollouts.truth\['first_error_step'\]: expected shape"):
        first_error_positions(reference.with_(truth={"first_error_step": first[:, None]}))


def test_first_error_hit_rate_counts_ties_in_expectation(reference):
    truth_rate = first_error_hit_rate(truth_step_advantage(reference), reference)
    assert truth_rate["rollouts"] >= 3
    assert truth_rate["hit_rate"] > truth_rate["chance"]  # the true advantage points at the wrong step
    flat = first_error_hit_rate(torch.where(reference.mask, -1.0, 0.0).double(), reference)
    assert flat["hit_rate"] == pytest.approx(flat["chance"])  # all steps tied: a random pick
    grpo = get_estimator("grpo")(reference.with_(group_ids=torch.zeros(len(reference), dtype=torch.long)))
    assert first_error_hit_rate(grpo.token, reference)["hit_rate"] == pytest.approx(flat["chance"])


def test_first_error_hits_average_to_the_hit_rate(reference):
    """Row by row, the hits average to first_error_hit_rate over the same rollouts, for credit
    that ties (GRPO: every step equal, a hit of 1/steps) and credit that does not (the truth)."""
    truth = truth_step_advantage(reference)
    flat = torch.where(reference.mask, reference.scores[:, None] - 0.5, 0.0)
    for credit in (truth, flat):
        rate = first_error_hit_rate(credit, reference)
        hits = first_error_hits(credit, reference)
        assert len(hits) == rate["rollouts"] > 0
        assert hits.hit.mean() == pytest.approx(rate["hit_rate"])
        assert hits.chance.mean() == pytest.approx(rate["chance"])
        assert (reference.truth["first_error_step"][hits.row.tolist()] >= 0).all()
    assert first_error_hits(flat, reference).hit.tolist() == pytest.approx(
        first_error_hits(flat, reference).chance.tolist())
    with pytest.raises(ValueError, match="^credit"):
        first_error_hits(truth[:, :3], reference)


def test_the_truth_ranks_its_own_steps_perfectly(reference):
    truth = truth_step_advantage(reference)
    assert step_rank_correlation(truth, truth, reference) == pytest.approx(1.0)
    assert step_rank_correlation(truth, truth, reference, within=True) == pytest.approx(1.0)


def test_outcome_credit_has_no_within_rollout_signal(reference):
    truth = truth_step_advantage(reference)
    outcome = reference.scores.double()[:, None].expand(-1, reference.horizon) * reference.mask
    # equal credit on every step of a rollout: nothing to rank inside it
    assert step_rank_correlation(outcome, truth, reference, within=True) == 0.0
    # pooled over rollouts it does rank: failed rollouts hold the negative true advantages
    assert step_rank_correlation(outcome, truth, reference) > 0.2


def test_reversed_truth_ranks_backwards(reference):
    truth = truth_step_advantage(reference)
    assert step_rank_correlation(-truth, truth, reference) == pytest.approx(-1.0)
    assert step_rank_correlation(-truth, truth, reference, within=True) == pytest.approx(-1.0)


def test_step_rank_correlation_refuses_misshaped_input(reference):
    truth = truth_step_advantage(reference)
    with pytest.raises(ValueError, match="^credit"):
        step_rank_correlation(truth[:, :3], truth, reference)
    with pytest.raises(ValueError, match="^truth_adv"):
        step_rank_correlation(truth, truth[:2], reference)
