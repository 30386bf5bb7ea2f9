"""The survey's benchmark protocol as code: tasks with exact truth in three families, every
applicable estimator scored with the same metrics and cost record, results as validated JSON +
CSV records. Run it with ``python -m labkit.bench --suite quick --out DIR``."""
from labkit.bench.records import (append_record, cell_key, load_schema, make_record, read_records,
                                  validate_record, write_csv)
from labkit.bench.suite import (FAMILIES, SUITES, Instance, Task, applies, estimator_names, iter_cells, run_cell,
                                score, suite_tasks)
from labkit.bench.run import run_suite

__all__ = ["FAMILIES", "SUITES", "Instance", "Task", "append_record", "applies", "cell_key", "estimator_names",
           "iter_cells", "load_schema", "make_record", "read_records", "run_cell", "run_suite", "score",
           "suite_tasks", "validate_record", "write_csv"]
