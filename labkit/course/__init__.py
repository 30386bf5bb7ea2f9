"""The course layer: what the notebooks call.

``bands`` holds the notebook checks (exact numbers as text, learned ones within a measured
band) and the thread setting the test matrix can override.
"""
from labkit.course.bands import NotebookChecks, tidy, use_threads

__all__ = ["NotebookChecks", "tidy", "use_threads"]
