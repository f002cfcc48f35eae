#!/usr/bin/env bash
# Regenerate requirements-test.lock: the exact versions `make test`, `make demo` and CI install.
# Resolves perfcast's loose requirements (pyproject.toml, with the [test] extra) to the newest
# releases in a throw-away venv and writes every installed distribution pinned. Run it when a
# dependency changes or `make test-latest` shows the newest releases pass; commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${PYTHON:-python3}" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip
"$tmp/venv/bin/python" -m pip install -q -e '.[test]'
{
  echo "# pip constraints: the exact versions make test / make demo / CI install (scripts/lock.sh made it"
  echo "# on $(date -u +%Y-%m-%d) with $("$tmp/venv/bin/python" -V)). pyproject.toml keeps the loose lower bounds;"
  echo "# make test-latest runs the suite against the newest releases instead."
  "$tmp/venv/bin/python" -m pip freeze --exclude-editable --all | grep -vE '^(pip|setuptools|wheel)=='
} > requirements-test.lock
echo "wrote requirements-test.lock ($(grep -vc '^#' requirements-test.lock) pins)"
