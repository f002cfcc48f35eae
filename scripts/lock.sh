#!/usr/bin/env bash
# Regenerate requirements-test.lock: the exact versions `make test`, `make demo` and CI install, and
# requirements-thicket.lock, the same for the Thicket venv of make test (`scripts/lock.sh test` or
# `scripts/lock.sh test-thicket` makes only one of them).
# Resolves perfcast's loose requirements (pyproject.toml, with the [test] extra) to the newest
# releases in a throw-away venv and writes every installed distribution pinned. Run it when a
# dependency changes or `make test-latest` shows the newest releases pass; commit the result.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# lock EXTRA FILE WHAT: pin every distribution `pip install -e '.[EXTRA]'` resolves to
lock() {
  "${PYTHON:-python3}" -m venv "$tmp/$1"
  "$tmp/$1/bin/python" -m pip install -q --upgrade pip
  "$tmp/$1/bin/python" -m pip install -q -e ".[$1]"
  {
    echo "# pip constraints: the exact versions $3 install (scripts/lock.sh made it"
    echo "# on $(date -u +%Y-%m-%d) with $("$tmp/$1/bin/python" -V)). pyproject.toml keeps the loose lower bounds;"
    echo "# $4"
    "$tmp/$1/bin/python" -m pip freeze --exclude-editable --all | grep -vE '^(pip|setuptools|wheel)=='
  } > "$2"
  echo "wrote $2 ($(grep -vc '^#' "$2") pins)"
}

want=" ${*:-test test-thicket} "
if [[ $want == *" test "* ]]; then
  lock test requirements-test.lock "make test / make demo / CI" \
    "make test-latest runs the suite against the newest releases instead."
fi
# Thicket's pins conflict with the main venv's (pandas < 3): its tests have their own venv and lock
if [[ $want == *" test-thicket "* ]]; then
  lock test-thicket requirements-thicket.lock "make test's Thicket venv (.venv-thicket, tests_thicket/)" \
    "make test-thicket runs tests_thicket/ with them."
fi
