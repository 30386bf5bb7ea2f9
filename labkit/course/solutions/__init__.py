"""Reference solutions to the course's exercises that ask for a function (``labkit.course.exercises``).

Kept apart from the chapters on purpose: try the exercise first, then compare. A reader sees one
with ``reveal_solution("01a")`` (``labkit.course.exercises``), which prints its source; nothing a
notebook imports brings this package along. Each solution is written the way a reader would write
it (a loop where a loop is clearer, the formula next to the code), not the way the lab's
vectorised estimators are; ``check(solution, exercise)`` passes for every one, on every seed the
tests try (tests/course/exercises/). One module per notebook, named like its exercise's module
(``ex00_map`` ... ``ex11_your_rollouts``); every solution is re-exported here for the tests.
"""
from labkit.course.solutions.ex00_map import reward_to_go
from labkit.course.solutions.ex01_reinforce_variance import grpo_advantage
from labkit.course.solutions.ex02_critics_gae import gae
from labkit.course.solutions.ex03_vineppo import grpo_loop, vineppo_advantage
from labkit.course.solutions.ex04_process_rewards import pure_min_form
from labkit.course.solutions.ex05_why_agents_harder import turn_returns
from labkit.course.solutions.ex06_gigpo import gigpo_step_term
from labkit.course.solutions.ex07_critical_actions import carl_select
from labkit.course.solutions.ex08_hindsight_counterfactual import hca_credit
from labkit.course.solutions.ex09_multiagent import mixer_credit
from labkit.course.solutions.ex10_benchmark import rank_correlation
from labkit.course.solutions.ex11_your_rollouts import no_gradient_rows

__all__ = ["reward_to_go", "grpo_advantage", "gae", "vineppo_advantage", "grpo_loop", "pure_min_form", "turn_returns", "gigpo_step_term",
           "carl_select", "hca_credit", "mixer_credit", "rank_correlation", "no_gradient_rows", "SOLUTIONS"]

#: exercise id -> its solution (a run-and-interpret exercise has none here: its solution is the
#: lab's own run, ``Reading.measure``)
SOLUTIONS = {"00a": reward_to_go, "01a": grpo_advantage, "02a": gae, "03a": vineppo_advantage, "03c": grpo_loop, "04a": pure_min_form,
             "05a": turn_returns, "06a": gigpo_step_term, "07a": carl_select, "08a": hca_credit, "09a": mixer_credit,
             "10a": rank_correlation, "11a": no_gradient_rows}
