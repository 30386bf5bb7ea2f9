"""A small ToolWorld batch (notebook 05's setting), shared by the io tests."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def toolworld():
    from labkit.course.presets import noisy_world

    env = noisy_world(0.2, 30)
    return env.sample(env.scripted_policy(3.0), 3, group_size=4, seed=0)
