"""Exercises with autograders: one per notebook, graded against the lab's own estimators.

Each exercise asks the reader to write the core of one notebook's method as a short function on
plain tensors (the GRPO advantage, GAE's backward loop, ...); ``check(fn, exercise)`` grades it
on cases drawn from a fresh seed each attempt and answers with one hint that names the mistake,
shown on the smallest case that breaks it, never with the lab's answer (see ``grader``).

    >>> from labkit.course.exercises import check, reveal_solution
    >>> def grpo_advantage(scores, group_ids): ...
    >>> check(grpo_advantage, "01")        # one line on success; hint, case, your answer, seed otherwise
    >>> check(grpo_advantage, "01", seed=123456)   # the cases of that attempt again
    >>> reveal_solution(1)                 # prints the lab's reference solution

Layout: ``grader`` (cases, rules, results, the time limit, the registry, ``check``), what several
exercises share beside it (``cases``: random inputs; ``mistakes``: rule tests for known mistakes;
``references``: plain tensors into the lab's estimators), and one module per notebook, named after
it (``ex00_map`` ... ``ex11_your_rollouts``), each registering its exercise when imported.
Reference solutions live apart from the chapters in ``labkit.course.solutions``; this package
does not import them (``reveal_solution`` does, when asked, and prints one).
"""
from labkit.course.exercises.grader import (
    DEFAULT_TIMEOUT,
    EXERCISES,
    Case,
    CheckResult,
    Exercise,
    Rule,
    check,
    get_exercise,
    list_exercises,
)
from labkit.course.exercises.reveal import reveal_solution

# importing a notebook's module registers its exercise; this order is the registry's order
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

__all__ = ["Case", "Rule", "CheckResult", "Exercise", "EXERCISES", "DEFAULT_TIMEOUT", "check", "get_exercise",
           "list_exercises", "reveal_solution"]
