# akg: `make demo` and `make test` work on a fresh machine (they run `make setup` first).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.akg-installed

.PHONY: setup demo test lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.lock
	$(PY) -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The main job on the embedded default problem: no API key, no GPU. The graph IR and its kernel
# groups, then verified translations: C++ for this CPU, and Triton for an H100 checked through
# Triton's interpreter.
demo: setup
	$(VENV)/bin/akg ir --passes simplify,fuse --trace
	$(VENV)/bin/akg translate --dsl cpp --target cpu -o runs/demo_cpp.py
	$(VENV)/bin/akg translate --dsl triton --target h100 -o runs/demo_triton.py

# PYTEST_ARGS narrows a run (e.g. -m gpu); pytest's "no tests collected" (exit 5) is not a failure.
# The slowest tests are listed: the suite must stay within CI's 25 minutes on 2 cores. Three workers on two
# cores: a worker waits on its subprocesses (compilers, the verifier's sandbox) a quarter of the time, and a
# third one fills it (test_tune + test_agents: 220 s with two, 172 s with three, 195 s with four); worksteal lets
# an idle worker take another's queued tests (the last minutes of a run ran few tests). The Ray tests and
# the host measurements run after the rest, alone (the host measurement first: Ray leaves workers
# behind): another test running beside them would upset them.
ALONE := tests/test_alone_timing.py tests/test_ray.py
test: setup
	$(PY) -m pytest -q -n 3 --dist worksteal --durations=25 $(PYTEST_ARGS) $(addprefix --ignore=,$(ALONE)) tests || [ $$? -eq 5 ]
	$(PY) -m pytest -q --durations=5 $(PYTEST_ARGS) $(ALONE) || [ $$? -eq 5 ]

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
