"""Notebook 06's runners (labkit.course.nb06_gigpo): anchor groups, GiGPO's terms and GRPO-vs-GiGPO
runs, against the DP truth."""
import math

import pandas as pd
import pytest

from labkit.course import nb06_gigpo as lesson
from labkit.course.presets import noisy_world


def test_anchor_statistics_histogram_covers_every_turn():
    env = noisy_world(0.2, 20)
    a = lesson.anchor_statistics(env, env.make_policy(), n_tasks=3, group_size=4, seed=0)
    assert int(a["sizes"].turns.sum()) == int(a["rollouts"].mask.sum())
    assert a["singleton_share"] == pytest.approx(float((a["groups"]["size"] == 1).mean()))
    # one episode per task: only repeats inside an episode can share an anchor
    alone = lesson.anchor_statistics(env, env.make_policy(), n_tasks=3, group_size=1, seed=0)
    assert alone["singleton_share"] > a["singleton_share"]
    # every size from 1 to the largest has a row, so a chart of it never skips one
    assert list(a["sizes"]["size"]) == list(range(1, int(a["groups"]["size"].max()) + 1))


def test_size_histogram_fills_absent_sizes_with_zero_rows():
    hist = lesson.size_histogram(pd.Series([1, 1, 3, 6, 1]))
    assert hist.to_dict("list") == {"size": [1, 2, 3, 4, 5, 6], "groups": [3, 0, 1, 0, 0, 1],
                                    "turns": [3, 0, 3, 0, 0, 6]}
    assert lesson.size_histogram(pd.Series([], dtype=int)).empty
    with pytest.raises(ValueError, match="^sizes: .*\\[0\\]"):
        lesson.size_histogram(pd.Series([2, 0]))


def test_gigpo_terms_vs_truth_gives_one_row_per_credit():
    env = noisy_world(0.2, 20)
    t = lesson.gigpo_terms_vs_truth(env, env.make_policy(), n_tasks=3, group_size=4, seed=0)
    assert list(t["table"].credit) == ["GiGPO step term", "GiGPO episode term", "GiGPO (episode + omega x step)", "GRPO"]
    assert 0 < t["shared_turn_share"] <= 1
    assert t["table"].corr_all_turns.between(-1, 1).all()


def test_success_at_budget_interpolates_and_refuses_to_extrapolate():
    curves = pd.DataFrame({"label": "a", "seed": 0, "env_steps": [0, 100, 200], "success": [0.0, 0.5, 1.0]})
    at = lesson.success_at_budget(curves, 150)
    assert at.success.iloc[0] == pytest.approx(0.75)
    assert math.isnan(lesson.success_at_budget(curves, 250).success.iloc[0])
    with pytest.raises(ValueError, match="budget"):
        lesson.success_at_budget(curves, -1)


def test_grpo_vs_gigpo_runs_and_band():
    env = noisy_world(0.2, 10, n_files=3)
    curves = lesson.grpo_vs_gigpo_runs(env, seeds=(0, 1), iterations=4, eval_every=2, progress=False)
    assert set(curves.label) == {"GRPO", "GiGPO"} and set(curves.seed) == {0, 1}
    band = lesson.env_step_band(curves, points=5)
    assert ((band["min"] <= band["mean"] + 1e-12) & (band["mean"] <= band["max"] + 1e-12)).all()


def test_anchor_answers_are_the_dashboards_numbers_and_reuse_a_known_batch():
    env = noisy_world(noise=0.2, max_turns=10, n_files=4)
    known = lesson.anchor_statistics(env, env.make_policy(), n_tasks=2, group_size=4, seed=0)
    table = lesson.anchor_answers(env, [(4, 0.0), (2, 3.0)], n_tasks=2, known={(4, 0.0): known})
    assert table[["group_size", "strength"]].values.tolist() == [[4, 0.0], [2, 3.0]]
    assert table.singleton_share[0] == known["singleton_share"]
    sharp = lesson.anchor_statistics(env, env.scripted_policy(3.0), n_tasks=2, group_size=2, seed=0)
    assert table.singleton_turn_share[1] == sharp["singleton_turn_share"]
    assert table.turns_per_episode[1] == float(sharp["rollouts"].mask.sum(1).double().mean())
    with pytest.raises(ValueError, match="^settings: "):
        lesson.anchor_answers(env, [])
    with pytest.raises(ValueError, match="^settings: "):
        lesson.anchor_answers(env, [(0, 0.0)])
