# Two entry points (see README): `make lab` and `make test`. Both create or refresh .venv from
# the pinned lock file first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test test-matrix test-other-end test-verl test-trl test-frameworks-newest wheel venv notebooks site bench clean

# PyTorch's CPU-only wheel index. On Linux x86_64 a plain `pip install torch` fetches the CUDA
# build (several GB of GPU libraries a CPU course never uses), so torch is installed from here
# first; where the index cannot be reached pip falls back to the lock's torch from the default
# index. Someone who wants their GPU: `make lab TORCH_INDEX=` (empty: skip this step).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
CPU_TORCH   := $(if $(TORCH_INDEX),$(if $(filter Linux-x86_64,$(shell uname -s)-$(shell uname -m)),yes,),)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
ifeq ($(CPU_TORCH),yes)
	$(PY) -m pip install --quiet --timeout 15 --retries 0 --index-url $(TORCH_INDEX) \
		"$$(grep -m1 '^torch==' requirements.lock)" \
		|| echo "(PyTorch's CPU index was not reachable: torch comes from the default index)"
endif
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
# outputs (scripts/run_matrix.py): MATRIX="default:1 avx2:2 native:4" by default.
MATRIX ?= default:1 avx2:2 native:4
test-matrix: $(STAMP)
	$(PY) scripts/run_matrix.py $(MATRIX)

# labkit as a wheel in a second environment at the other end of pyproject.toml's ranges (Python
# 3.12, the lower ends in requirements-oldest.txt), running the unit tests there (not nbval).
test-other-end: $(STAMP)
	$(PY) scripts/run_other_end.py

# labkit's estimators inside verl (labkit.bridges.verl): builds .venv-verl from requirements-verl.txt
# (verl pins transformers < 5.11, so it gets its own environment), runs the parity tests against
# verl's own functions there, then prints labkit / verl speed ratios (benchmarks/verl_speed.py).
test-verl: $(STAMP)
	$(PY) scripts/run_verl.py

# TRL's files as a real GRPOTrainer run writes them (trl 1.16.0, the tiny LM, seconds): builds
# .venv-trl from requirements-trl.txt, runs scripts/build_trl_run.py there, then
# tests/io/test_trl.py on what it wrote (scripts/run_trl.py).
test-trl: $(STAMP)
	$(PY) scripts/run_trl.py

# The same two checks with the newest TRL and verl releases instead of the pins (.venv-trl-newest,
# .venv-verl-newest): an early warning that a release changed what it writes. Not in CI.
test-frameworks-newest: $(STAMP)
	$(PY) scripts/run_trl.py --newest; trl=$$?; $(PY) scripts/run_verl.py --newest --no-bench; verl=$$?; \
		test $$trl -eq 0 -a $$verl -eq 0

# dist/labkit-<version>-py3-none-any.whl, carrying data/ (setup.py): what a Colab notebook's first
# cell installs when it is uploaded next to the notebook (README, "Other ways to run it").
wheel: $(STAMP)
	rm -rf dist && $(PY) -m pip wheel --quiet --no-deps -w dist .

# Re-execute every notebook once, seeded, and store its outputs (what nbval compares against).
notebooks: $(STAMP)
	$(PY) scripts/execute_notebooks.py

# The course as static HTML in site/ from the stored outputs, no kernel, no network: one page per
# notebook (charts as the pictures stored by `make notebooks`, math as MathML converted from its
# TeX), an index giving each notebook's question, time and prerequisites (data/course/outline.csv,
# labkit.course.timing), the workshop plans and notebooks/guide/*.md as pages.
site: $(STAMP)
	$(PY) scripts/render_site.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .venv-other-end .venv-verl .venv-trl .venv-trl-newest .venv-verl-newest site
