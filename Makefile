# perfcast — fresh-machine entry points (see README.md)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.perfcast-installed

.PHONY: setup sysdeps test demo bench clean

# Python environment: the package and its test dependencies, in a project-local venv
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# System packages (Open MPI, valgrind, perf, Slurm, munge, Chromium): installs what is missing
sysdeps:
	bash scripts/install-system-deps.sh

setup: sysdeps $(STAMP)

# pytest's exit 5 means "no tests collected": not a failure of the suite itself
test: setup
	$(PY) -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; exit 0; fi; exit $$rc

demo: setup
	bash scripts/demo.sh

clean:
	rm -rf demo-out .pytest_cache
