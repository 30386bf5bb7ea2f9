"""Exercises with autograders: three or more per notebook, graded against the lab's own estimators and runs.

Each has an id (notebook + letter: "01a", "01b", ...), a kind (``KINDS``) and a path (core or
deep dive). Four kinds:

* implement: write the core of the notebook's method as a short function on plain tensors (the
  GRPO advantage, GAE's backward loop, ...);
* find the bug: the function is given with a planted mistake of the kind people make; fix it;
* run and interpret: run an experiment at the named settings and enter what it measured
  (``Reading``), graded against the lab's own run within a stated tolerance;
* capstone: write a piece of the training machinery (a loss, a loop) and train with it.

``check(fn, exercise)`` grades a function on cases drawn from a fresh seed each attempt and
answers with one hint that names the mistake, shown on the smallest case that breaks it, never
with the lab's answer (see ``grader``); ``check(reading, exercise)`` grades a reading.

    >>> from labkit.course.exercises import check, reveal_solution
    >>> def grpo_advantage(scores, group_ids): ...
    >>> check(grpo_advantage, "01a")       # one line on success; hint, case, your answer, seed otherwise
    >>> check(grpo_advantage, "01a", seed=123456)   # the cases of that attempt again
    >>> reveal_solution("01a")             # prints the lab's reference solution

Layout: ``grader`` (cases, rules, results, the time limit, the registry, ``check``), what several
exercises share beside it (``cases``: random inputs; ``mistakes``: rule tests for known mistakes;
``references``: plain tensors into the lab's estimators), and one module per notebook, named after
it (``ex00_map`` ... ``ex11_your_rollouts``), each registering its exercises when imported;
``reading`` holds the run-and-interpret kind.
Reference solutions live apart from the chapters in ``labkit.course.solutions``; this package
does not import them (``reveal_solution`` does, when asked, and prints one).
"""
from labkit.course.exercises.grader import (
    DEFAULT_TIMEOUT,
    EXERCISES,
    Case,
    CheckResult,
    Exercise,
    KINDS,
    PATHS,
    Rule,
    check,
    get_exercise,
    list_exercises,
    once_passed,
)
from labkit.course.exercises.reading import Misreading, Reading
from labkit.course.exercises.reveal import reveal_solution

# importing a notebook's module registers its exercises; this order is the registry's order
from labkit.course.exercises import (  # noqa: F401
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

__all__ = ["Case", "Rule", "CheckResult", "Exercise", "Reading", "Misreading", "KINDS", "PATHS", "EXERCISES", "DEFAULT_TIMEOUT", "check", "get_exercise",
           "list_exercises", "once_passed", "reveal_solution"]
