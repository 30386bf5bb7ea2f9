"""The small noisy ToolWorld the loop and inverse-RL tests train on."""

from labkit.envs.toolworld import ToolWorld


def small_world(**kw):
    return ToolWorld(3, max_turns=kw.pop("max_turns", 8), mislead=0.3, noise=0.3, flaky=0.3, **kw)
