"""The course layer: what the notebooks call (the top layer of labkit: it may import every other).

One runner module per notebook, named after it (``nb01_reinforce_variance`` ...
``nb10_benchmark``; a notebook imports its own as ``lesson``), the worlds they share in
``presets``, the heatmap four of them draw (credit per token, each first wrong step outlined) in
``step_heatmaps``, the reasoning-side estimators of notebook 04's cross-family table (run alike
by its lesson and a build script) in ``reasoning_roster``, and ``bands``: the notebook checks (exact numbers as text, learned ones within a
measured band) and the thread setting the test matrix can override.

``exercises`` holds the autograded exercises, three or more per notebook (``check(fn, "01b")``):
the grader and one module per notebook (``ex00_map`` ... ``ex11_your_rollouts``); ``solutions``
their reference solutions, one module per notebook likewise, kept apart from the chapters and
shown to a reader only by ``exercises.reveal_solution("01b")``. Neither is imported here (import them by name), so
``import labkit.course`` stays as light as it was.
"""
from labkit.course.bands import NotebookChecks, tidy, use_threads

__all__ = ["NotebookChecks", "tidy", "use_threads"]
