#!/usr/bin/env bash
# System packages perfcast's collection, examples and tests use (Debian 12).
# Installs only what is missing; needs root (or sudo) the first time. Safe to run repeatedly.
set -euo pipefail
pkgs=(openmpi-bin libopenmpi-dev gfortran valgrind linux-perf slurm-wlm munge chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-system-deps: need root to install: ${missing[*]}" >&2; exit 1; fi
fi
echo "install-system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
