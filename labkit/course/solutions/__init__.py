"""Reference solutions to the course's exercises that ask for a function (``labkit.course.exercises``).

Kept apart from the chapters on purpose: try the exercise first, then compare. A reader sees one
with ``reveal_solution("01a")`` (``labkit.course.exercises``), which prints its source; nothing a
notebook imports brings this package along. Each solution is written the way a reader would write
it (a loop where a loop is clearer, the formula next to the code), not the way the lab's
vectorised estimators are; ``check(solution, exercise)`` passes for every one, on every seed the
tests try (tests/course/exercises/). One module per notebook, named like its exercise's module
(``ex00_map`` ... ``ex11_your_rollouts``); every solution is
re-exported here for the tests, and ``SOLUTIONS`` finds each by the exercise id its docstring
opens with ("01b · ..."), so a new solution needs no second entry here.
"""
from labkit.course.solutions import (
    ex00_map,
    ex01_reinforce_variance,
    ex02_critics_gae,
    ex03_vineppo,
    ex04_process_rewards,
    ex05_why_agents_harder,
    ex06_gigpo,
    ex07_critical_actions,
    ex08_hindsight_counterfactual,
    ex09_multiagent,
    ex10_benchmark,
    ex11_your_rollouts,
)

_MODULES = (ex00_map, ex01_reinforce_variance, ex02_critics_gae, ex03_vineppo, ex04_process_rewards,
            ex05_why_agents_harder, ex06_gigpo, ex07_critical_actions, ex08_hindsight_counterfactual,
            ex09_multiagent, ex10_benchmark, ex11_your_rollouts)

#: exercise id -> its solution: each module's public functions (its ``__all__``), by the id their
#: docstring opens with (a run-and-interpret exercise has none here: its solution is the lab's own
#: run, ``Reading.measure``)
SOLUTIONS = {fn.__doc__.split()[0]: fn for module in _MODULES for fn in (getattr(module, n) for n in module.__all__)}
SOLUTIONS = dict(sorted(SOLUTIONS.items()))
globals().update({fn.__name__: fn for fn in SOLUTIONS.values()})

__all__ = [fn.__name__ for fn in SOLUTIONS.values()] + ["SOLUTIONS"]
