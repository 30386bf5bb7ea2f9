"""TP-Schedule over a run (arXiv:2605.25381)."""
import pytest
import torch

from labkit.credit import get_estimator
from labkit.learn.temporal_schedule import schedule_progress, temporal_schedule


def test_progress_ramp_hand_case():
    # 10 iterations, ramp from int(0) = 0 to int(8) = 8: p = it / 8, clipped
    assert [schedule_progress(i, 10) for i in (1, 4, 8, 10)] == [0.125, 0.5, 1.0, 1.0]
    assert schedule_progress(1, 10, start=0.5, end=1.0) == 0.0


def test_schedule_stages_widen_to_base():
    from labkit.envs import BifurcationChain
    from labkit.policies import TabularSoftmaxPolicy
    env = BifurcationChain(horizon=8, n_bifurcations=1, seed=0)
    ro = env.sample(TabularSoftmaxPolicy(env.n_states, env.n_actions, seed=0), 8, group_size=4, seed=0)
    sched = temporal_schedule(10)
    shares = [sched.for_iteration(i)(ro).info["share_kept"] for i in range(1, 11)]
    assert shares == sorted(shares) and shares[-1] == 1.0
    assert torch.allclose(sched.for_iteration(10)(ro).token, get_estimator("grpo")(ro).token)
    assert sched.stage_name(1) == "rho=0.866"          # 0.99 * (1 - 1/8)


def test_bad_input_names_argument():
    with pytest.raises(ValueError, match="^end:"):
        temporal_schedule(10, start=0.5, end=0.5)
    with pytest.raises(ValueError, match="^mode:"):
        temporal_schedule(10, mode="cosine")
    with pytest.raises(ValueError, match="^iteration:"):
        schedule_progress(0, 10)


def test_trains_on_chain():
    from labkit.envs import BifurcationChain
    from labkit.envs.chain.learner import ChainLearner
    from labkit.learn.loop import train
    from labkit.policies import TabularSoftmaxPolicy
    env = BifurcationChain(horizon=6, n_bifurcations=1, seed=0)
    learner = ChainLearner(env, TabularSoftmaxPolicy(env.n_states, env.n_actions, seed=0), batch_size=8, group_size=4)
    curve = train(learner, temporal_schedule(4), iterations=4, kind="grpo", eval_every=2, progress=False)
    assert "stage" in curve and curve.stage.dropna().iloc[-1] == 4


def test_chain_comparison_rows():
    from labkit.learn.temporal_schedule import chain_comparison
    table = chain_comparison(horizon=6, n_bifurcations=1, iterations=3, seeds=[0], batch_size=8, group_size=4)
    assert list(table.arm) == ["grpo", "tp_schedule"] and table.final_J.between(0, 1).all()
