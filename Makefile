# perfcast — fresh-machine entry points (see README.md)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.perfcast-installed
LOCK   := requirements-test.lock
LATEST ?= .venv-latest
# Thicket (perfcast.io.from_thicket / to_thicket) caps pandas below 3: its tests (tests_thicket/)
# run in their own venv, pinned by their own lock
TKVENV  ?= .venv-thicket
TKSTAMP := $(TKVENV)/.perfcast-installed
TKLOCK  := requirements-thicket.lock
# Extra-P 4.2.5, the peer tool, in its own venv (it pins numpy<2): the tests that compare with it
# and the accuracy benchmarks run it there
EXVENV  := bench/.venv-extrap
EXSTAMP := $(EXVENV)/.perfcast-installed
EXLOCK  := requirements-extrap.lock

.PHONY: setup sysdeps test test-thicket test-latest demo dist lock bench clean

# Python environment: the package and its test dependencies at the locked versions (reproducible:
# every machine tests what CI tested), in a project-local venv
$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(LOCK) -e '.[test]'
	touch $(STAMP)

# System packages (Open MPI, valgrind, perf, Slurm, munge, Chromium): installs what is missing
sysdeps:
	bash scripts/install-system-deps.sh

setup: sysdeps $(STAMP)

$(TKSTAMP): pyproject.toml $(TKLOCK)
	$(PYTHON) -m venv $(TKVENV)
	$(TKVENV)/bin/python -m pip install -q --upgrade pip
	$(TKVENV)/bin/python -m pip install -q -c $(TKLOCK) -e '.[test-thicket]'
	touch $(TKSTAMP)

$(EXSTAMP): $(EXLOCK)
	$(PYTHON) -m venv $(EXVENV)
	$(EXVENV)/bin/python -m pip install -q --upgrade pip
	$(EXVENV)/bin/python -m pip install -q -r $(EXLOCK)
	touch $(EXSTAMP)

# The one test command: the suite in the main venv, then tests_thicket/ in the Thicket venv (both
# run even when the first fails; either failing fails make test). pytest's exit 5 means "no tests
# collected": not a failure of the main suite itself, but tests_thicket/ must always run
test: setup $(TKSTAMP) $(EXSTAMP)
	$(PY) -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; rc=0; fi; \
	$(TKVENV)/bin/python -m pytest -q -p no:cacheprovider tests_thicket; tk=$$?; \
	if [ $$tk -ne 0 ]; then echo "make test: tests_thicket/ FAILED in $(TKVENV)"; fi; \
	if [ $$rc -ne 0 ]; then exit $$rc; fi; exit $$tk

# tests_thicket/ alone (Thicket and Hatchet objects in memory)
test-thicket: $(TKSTAMP)
	$(TKVENV)/bin/python -m pytest -q -p no:cacheprovider tests_thicket

# The same suite against the newest releases of every dependency (no lock), in its own venv: a new
# numpy, pandas or scipy that breaks perfcast shows up here as a clear failure, with the versions
# printed first
test-latest: sysdeps
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install -q --upgrade pip
	$(LATEST)/bin/python -m pip install -q --upgrade --upgrade-strategy eager -e '.[test]'
	@echo "test-latest: newest releases:" $$($(LATEST)/bin/python -m pip freeze --exclude-editable | grep -iE '^(numpy|scipy|pandas|pyarrow|pycubexr|caliper-reader)==' | tr '\n' ' ')
	$(LATEST)/bin/python -m pytest -q -p no:cacheprovider; rc=$$?; if [ $$rc -ne 0 ]; then echo "test-latest: the suite FAILS with the newest releases above (make test uses $(LOCK))"; fi; exit $$rc

demo: setup
	bash scripts/demo.sh

# Two wheels for an installation without a checkout: perfcast (no data in it) and perfcast-data
# (the default benchmark tables from ../shared/data, parsed; perfcast.datapkg)
dist: $(STAMP)
	rm -f dist/perfcast-*.whl dist/perfcast_data-*.whl
	$(PY) -m pip wheel -q --no-deps -w dist .
	$(PY) -m perfcast data wheel -o dist

# Re-pin $(LOCK) to the newest releases (after test-latest passes)
lock:
	bash scripts/lock.sh

clean:
	rm -rf demo-out dist .pytest_cache $(LATEST) $(TKVENV) $(EXVENV)
