# Two entry points (see README): `make lab` and `make test`. Both create or refresh .venv from
# the pinned lock file first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test test-matrix venv notebooks bench clean

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP)

# Served on localhost with Jupyter's token (the URL to open is printed). --allow-root only when
# run as root (containers), where Jupyter refuses to start otherwise.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root,)

# Unit/property tests, widget tests and nbval over every notebook on two workers, then, alone,
# the real-browser checks (skipped where Chromium is absent); ends with a summary of what ran,
# what skipped and why (scripts/run_tests.py).
test: $(STAMP)
	$(PY) scripts/run_tests.py

# nbval over every notebook under other CPU kernels and thread counts, with the same stored
# outputs (scripts/test_matrix.py): MATRIX="default:1 avx2:2 native:4" by default.
MATRIX ?= default:1 avx2:2 native:4
test-matrix: $(STAMP)
	$(PY) scripts/test_matrix.py $(MATRIX)

# Re-execute every notebook once, seeded, and store its outputs (what nbval compares against).
notebooks: $(STAMP)
	$(PY) scripts/execute_notebooks.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV)
