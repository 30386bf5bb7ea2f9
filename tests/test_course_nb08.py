"""Notebook 08's runners (labkit.course.nb08_hindsight_counterfactual) at small sizes."""
import pytest
import torch

from labkit.core.credit import Credit
from labkit.course import nb08_hindsight_counterfactual as lesson
from labkit.course.presets import scripted_agent_setup
from labkit.scoring import luck_regression, sign_agreement


@pytest.fixture(scope="module")
def small():
    env, policy = scripted_agent_setup(0.3, n_files=3, max_turns=10)
    truth = env.truth(policy)
    models = lesson.fit_models(env, policy, n_tasks=24, group_size=4, seed=9)
    ro = env.sample(policy, 6, group_size=4, seed=0)
    credits = lesson.all_credits(env, policy, ro, models, truth, n_continuations=2)
    return env, policy, truth, models, ro, credits


def test_all_credits_and_costs(small):
    env, policy, truth, models, ro, credits = small
    assert list(credits) == list(lesson.METHODS)
    for c in credits.values():
        assert isinstance(c, Credit) and c.token.shape == ro.mask.shape
    costs = lesson.cost_table(credits, ro).set_index("method")
    assert costs.loc["GRPO", "env_steps"] == 0
    assert costs.loc["CCPO, re-execution", "env_resets"] > costs.loc["C3, re-execution", "env_resets"] > 0
    with pytest.raises(ValueError, match="methods"):
        lesson.all_credits(env, policy, ro, models, truth, methods=["nope"])


def test_sign_agreement_is_the_course_definition_and_splits_by_outcome(small):
    env, policy, truth, models, ro, credits = small
    skill, _ = truth.skill_luck(ro)
    picked = {k: credits[k] for k in ("GRPO", "HCA, exact h", "CCPO, re-execution")}
    reg = luck_regression(ro, truth, picked).set_index("method")
    split = lesson.sign_by_outcome(ro, truth, picked).set_index("method")
    for name, credit in picked.items():   # one definition: labkit.scoring's, at its default threshold
        want = sign_agreement(credit, skill, ro.mask)
        assert reg.loc[name, "sign_agree"] == pytest.approx(want) and split.loc[name, "sign_agree"] == pytest.approx(want)
    won = ro.truth["success"].bool()
    assert won.any() and not won.all()
    hca = split.loc["HCA, exact h"]
    # (1 - pi/h) * Z with the exact h is A/Q on a won episode (Q > 0 there): always A's sign; on a lost one Z = 0
    assert hca.sign_agree_won == 1.0 and hca.zero_on_lost == 1.0 and hca.sign_agree_lost == 0.0
    assert split.loc["GRPO", "zero_on_lost"] < 1.0
    with pytest.raises(ValueError, match="credits"):
        lesson.sign_by_outcome(ro, truth, {})


def test_critic_ranking_and_transcript(small):
    env, policy, truth, models, ro, credits = small
    df = lesson.critic_ranking(ro, truth, {"p": models["critic_privileged"], "o": models["critic_observation"]})
    assert set(df.columns) >= {"pairwise_acc", "pref_correct", "top1"}
    assert df.pairwise_acc.between(0, 1).all()
    row = int(ro.truth["success"].nonzero()[0])
    t = lesson.transcript_table(ro, truth, credits, row)
    assert len(t) == int(ro.mask[row].sum()) and "GRPO" in t.columns and "CCPO" in t.columns
    fails = env.sample(policy, 2, group_size=2, seed=1)
    fails.truth["success"] = torch.zeros(4, dtype=torch.bool)
    with pytest.raises(ValueError, match="rollouts"):
        lesson.lucky_row(fails, truth)


@pytest.mark.parametrize("noise", [0.0, 0.5, 1.0])
def test_noise_view_extremes(noise):
    v = lesson.noise_view(noise, methods=["GRPO", "HCA, exact h", "CCPO, re-execution"], n_tasks=2, group_size=3,
                          history_tasks=4, show=4, n_continuations=1, n_files=3, max_turns=6)
    assert len(v["rows"]) == 4 and list(v["panels"])[0].startswith("exact advantage")
    for p in v["panels"].values():
        assert p.shape == (4, 6)
    assert len(v["stats"]) == 3


def test_noise_sweep_small():
    df = lesson.noise_sweep((0.0, 0.3), n_tasks=2, group_size=3, history_tasks=4, n_continuations=1,
                            methods=["GRPO", "CCPO, re-execution"], n_files=3, max_turns=6)
    assert list(df.noise) == [0.0, 0.0, 0.3, 0.3] and "luck_share" in df.columns
    with pytest.raises(ValueError, match="noises"):
        lesson.noise_sweep(())


def test_noise_view_depends_on_its_arguments_only():
    """The notebook precomputes the noise slider's eleven levels at build time; that shows the same
    numbers as computing on the move only if a level's result does not depend on what ran before."""
    import pandas as pd

    kw = dict(methods=["GRPO", "HCA, exact h", "C3, re-execution"], n_tasks=2, group_size=3, history_tasks=4,
              show=4, n_continuations=1, n_files=3, max_turns=6)
    first = lesson.noise_view(0.3, **kw)
    torch.manual_seed(123)  # disturb the global generator too
    lesson.noise_view(0.1, **kw)
    again = lesson.noise_view(0.3, **kw)
    assert list(first["panels"]) == list(again["panels"])
    for k in first["panels"]:
        assert torch.equal(first["panels"][k], again["panels"][k])
    pd.testing.assert_frame_equal(first["stats"], again["stats"])
