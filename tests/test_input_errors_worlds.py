"""Bad input to the environments, the survey loaders and the viz helpers gets a ValueError/TypeError
whose message starts with the offending argument's name (issue 20), and valid input still works."""
import pandas as pd
import pytest
import torch

from labkit import survey, viz
from labkit.envs import BifurcationChain, TeamTask, ToolWorld
from labkit.policies.tabular import TabularSoftmaxPolicy

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tool():
    env = ToolWorld()
    pol = env.scripted_policy()
    return env, pol, env.sample(pol, 2, group_size=2, seed=0), env.truth(pol)


@pytest.fixture(scope="module")
def team():
    t = TeamTask()
    pols = t.scripted_policies()
    return t, pols, t.sample(pols, 1, group_size=2, seed=0)


# --------------------------------------------------------------------------- BifurcationChain
@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(bifurcations="x"), TypeError, r"^bifurcations: expected a list of positions"),
    (dict(bifurcations=[1.5]), TypeError, r"^bifurcations\[0\]: expected an integer"),
    (dict(seed="x"), TypeError, r"^seed: expected an integer"),
    (dict(seed=1.5), TypeError, r"^seed: expected an integer"),
])
def test_chain_constructor(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        BifurcationChain(horizon=5, **kwargs)


def test_chain_bifurcations_as_tensor_or_integral_floats_still_work():
    assert BifurcationChain(horizon=5, bifurcations=torch.tensor([3, 1])).bifurcations == (1, 3)
    assert BifurcationChain(horizon=5, bifurcations=[2.0]).bifurcations == (2,)


def test_chain_sample_policy_and_seed():
    ch = BifurcationChain(horizon=4)
    pol = TabularSoftmaxPolicy(ch.n_states, ch.n_actions)
    for bad in (None, "x"):
        with pytest.raises(TypeError, match=r"^policy: expected a TabularSoftmaxPolicy"):
            ch.sample(bad, 2)
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        ch.sample(pol, 2, seed="x")
    assert ch.sample(pol, 2, seed=3).tokens.shape == (2, 4)


# --------------------------------------------------------------------------- ToolWorld
def test_toolworld_arguments(tool):
    env, pol, ro, _ = tool
    with pytest.raises(TypeError, match=r"^bugs: expected integers"):
        env.sample(pol, 1, group_size=2, bugs=[0.5])
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        env.make_policy(seed="x")
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        env.transcript(None, 0)
    with pytest.raises(ValueError, match=r"^task: must be >= 0"):
        env.prompt(-1)
    with pytest.raises(TypeError, match=r"^task: expected an integer"):
        env.prompt("x")
    assert env.prompt(99).startswith("Task 99")   # task numbers have no upper bound
    assert env.sample(pol, 1, group_size=2, bugs=[1]).truth["bug"].tolist() == [1, 1]


@pytest.mark.parametrize("meth", ["advantage", "value", "q_value", "next_value", "skill_luck"])
def test_tooltruth_refuses_foreign_rollouts(tool, team, meth):
    env, pol, ro, tr = tool
    f = getattr(tr, meth)
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        f(None)
    other = ToolWorld(n_files=env.n_files + 2)
    ro_other = other.sample(other.scripted_policy(), 2, group_size=2, seed=1)
    with pytest.raises(ValueError, match=r"^rollouts: "):
        f(ro_other)
    far = ro.with_(states=torch.where(ro.mask, ro.states + 1000, ro.states))
    with pytest.raises(ValueError, match=r"^rollouts: states disagree"):
        f(far)
    with pytest.raises(ValueError, match=r"^rollouts"):
        f(team[2])
    out = f(ro)   # the rollouts the truth belongs to still score
    assert all(torch.isfinite(x).all() for x in (out if isinstance(out, tuple) else (out,)))


def test_tooltruth_values_unchanged_on_valid_rollouts(tool):
    env, pol, ro, tr = tool
    skill, luck = tr.skill_luck(ro)
    v0 = tr.value(ro)[:, 0]
    ret = ro.rewards.to(torch.float64).sum(1)
    assert torch.allclose(v0 + (skill + luck).sum(1), ret)   # the decomposition still holds


# --------------------------------------------------------------------------- TeamTask
def test_teamtask_arguments(team):
    t, pols, rt = team
    with pytest.raises(TypeError, match=r"^reward_profile: expected a dict"):
        TeamTask(reward_profile="x")
    with pytest.raises(TypeError, match=r"^overrides: unknown TeamTask argument\(s\) \['colour'\]"):
        TeamTask.preset("mixed", colour=1)
    assert TeamTask.preset("mixed", n_types=3).n_types == 3
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        t.coalition_values(None)
    with pytest.raises(TypeError, match=r"^rollouts: expected a Rollouts"):
        t.transcript(None, 0)
    for bad, exc in ((-1, ValueError), (99, ValueError), ("x", TypeError)):
        with pytest.raises(exc, match=r"^task_type: "):
            t.prompt(bad)
    with pytest.raises(TypeError, match=r"^seed: expected an integer"):
        t.make_policies(seed="x")
    assert "type" in t.prompt(1, 3)


# --------------------------------------------------------------------------- survey
def test_survey_loaders(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    for load in (survey.load_methods, survey.load_baselines):
        with pytest.raises(TypeError, match=r"^path: expected a file path"):
            load(3)
        with pytest.raises(ValueError, match=r"^path: .* is a folder"):
            load(tmp_path)
        with pytest.raises(ValueError, match=r"^path: .* is empty"):
            load(empty)
        with pytest.raises(ValueError, match=r"^path: bad.csv: missing column"):
            load(bad)
        with pytest.raises(FileNotFoundError, match=r"^path: .*not found"):
            load(tmp_path / "nope.csv")


def test_survey_lookup_and_filters():
    df = survey.load_methods()
    with pytest.raises(TypeError, match=r"^names: expected a list"):
        survey.lookup(None)
    with pytest.raises(TypeError, match=r"^names: expected method names"):
        survey.lookup([3])
    with pytest.raises(TypeError, match=r"^df: expected a DataFrame"):
        survey.filter_methods(None)
    with pytest.raises(TypeError, match=r"^colour: not a filter of filter_methods"):
        survey.filter_methods(df, colour="x")
    with pytest.raises(TypeError, match=r"^df: expected a DataFrame"):
        survey.taxonomy_counts("x")
    assert len(survey.filter_methods(df)) == len(df)


# --------------------------------------------------------------------------- viz
@pytest.mark.parametrize("args, match", [
    ((5, 1, 1, 3), r"^max: must be larger than min \(5\), got 1 \(slider 'x'\)"),
    ((1, 1, 1, 1), r"^max: must be larger than min"),
    ((0, 1, 0.1, 5.0), r"^value: 5.0 is outside \[0.0, 1.0\]"),
    ((0, 1, 0, 0.5), r"^step: must be positive"),
    ((float("nan"), 1, 0.1, 0.5), r"^min: must be a number"),
    ((0, 1, 0.1, "a"), r"^value: must be a number"),
])
def test_slider_messages_start_with_the_argument(args, match):
    with pytest.raises(ValueError, match=match):
        viz.slider("x", *args)


def test_dropdown_and_chart_messages():
    with pytest.raises(ValueError, match=r"^value: 'c' is not one of the options"):
        viz.dropdown(["a", "b"], "c")
    with pytest.raises(ValueError, match=r"^options: is empty"):
        viz.dropdown([])
    df = pd.DataFrame({"a": [1, 2], "b": [3, 4]})
    for chart in (viz.line_chart, viz.bar_chart):
        with pytest.raises(ValueError, match=r"^df: must be a pandas DataFrame"):
            chart(None, x="a", y="b")
        with pytest.raises(ValueError, match=r"^y: y='zz' is not a column of df"):
            chart(df, x="a", y="zz")
    with pytest.raises(ValueError, match=r"^sort: must be None"):
        viz.bar_chart(df, x="a", y="b", sort="up")
