"""A small TeamTask batch, shared by the world tests."""

import pytest

from labkit.envs import TeamTask


@pytest.fixture(scope="module")
def team():
    t = TeamTask()
    pols = t.scripted_policies()
    return t, pols, t.sample(pols, 1, group_size=2, seed=0)
