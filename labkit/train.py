"""The policy-gradient loop: moved to ``labkit.learn.loop``."""
# transitional: notebooks move to labkit.course in the next step
from labkit.learn.loop import curve_band, summarise, train

__all__ = ["curve_band", "summarise", "train"]
