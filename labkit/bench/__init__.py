"""The survey's benchmark protocol as code: tasks with exact truth in three families, every
applicable estimator scored with the same metrics and cost record, results as validated JSON +
CSV records. Run it with ``python -m labkit.bench --suite quick --out DIR``."""
from labkit.bench.records import (append_record, cell_key, load_schema, make_record, read_records,
                                  validate_record, write_csv)
from labkit.bench.suite import (FAMILIES, SUITES, Instance, Task, applies, chain_task, estimator_names, iter_cells,
                                lm_task, run_cell, score, suite_tasks, team_task, toolworld_task)
from labkit.bench.run import run_suite
from labkit.bench.leaderboard import leaderboard
from labkit.bench.metrics import gradient_metrics, luck_weight, trajectory_lengths

__all__ = ["FAMILIES", "SUITES", "Instance", "Task", "append_record", "applies", "cell_key", "estimator_names",
           "iter_cells", "load_schema", "make_record", "read_records", "run_cell", "run_suite", "score",
           "suite_tasks", "validate_record", "write_csv", "leaderboard", "gradient_metrics", "luck_weight",
           "trajectory_lengths", "lm_task", "chain_task", "toolworld_task", "team_task"]
