"""Run every benchmark script and print its figures."""
import runpy
from pathlib import Path

HERE = Path(__file__).resolve().parent
for script in ("core_speed.py", "shapley_speed.py", "notebook_budget.py", "slider_latency.py"):
    print(f"\n== {script}")
    runpy.run_path(str(HERE / script), run_name="__main__")
