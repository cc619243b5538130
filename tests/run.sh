#!/usr/bin/env bash
# The test command (README command 2, and all that .ci/run runs). On a fresh Debian/Ubuntu machine
# as root it installs what the tests need (Docker engine, debootstrap, Chromium, Slurm and munge, a venv
# with the toolkit and its extras), starts dockerd when none is running, then runs pytest.
# Under CI=true a real part that cannot start fails the run; nothing is skipped for it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PYTHONUNBUFFERED=1

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v debootstrap >/dev/null || need_apt+=(debootstrap)
command -v patch >/dev/null || need_apt+=(patch)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v ssh >/dev/null || need_apt+=(openssh-client)
command -v git >/dev/null || need_apt+=(git)
command -v slurmctld >/dev/null || need_apt+=(slurm-wlm)  # tests/slurm start a one-node cluster
command -v munged >/dev/null || need_apt+=(munge)
# the model pair's encyclopedic text (toolkit/pair/corpus.py, tests/pair)
[ -e /usr/share/dictd/gcide.dict.dz ] || need_apt+=(dict-gcide)
[ -e /usr/share/dictd/wn.dict.dz ] || need_apt+=(dict-wn)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "tests/run.sh: installing ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  else
    echo "tests/run.sh: missing ${need_apt[*]} and not root: install them first" >&2
    [ "${CI:-}" = true ] && exit 1
  fi
fi

# Python environment: every extra plus test-only tools, exactly as locked (requirements/dev.txt, with
# hashes; docs/install.md), then the toolkit itself from this checkout.
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
quiet() { "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }  # pipefail: pip's own status
quiet .venv/bin/python -m pip install -q --require-hashes -r requirements/dev.txt
quiet .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
export PATH="$ROOT/.venv/bin:$PATH"

# Docker engine: start one when none answers.
if ! docker info >/dev/null 2>&1; then
  if command -v dockerd >/dev/null && [ "$(id -u)" = 0 ]; then
    echo "tests/run.sh: starting dockerd"
    mkdir -p /var/log
    (setsid dockerd --iptables=false --ip6tables=false --bridge=none >/var/log/toolkit-dockerd.log 2>&1 &)
    for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  fi
fi
if ! docker info >/dev/null 2>&1; then
  echo "tests/run.sh: no Docker engine answers" >&2
  [ "${CI:-}" = true ] && { tail -20 /var/log/toolkit-dockerd.log 2>/dev/null || true; exit 1; }
fi

# Two test processes (pytest-xdist, locked with the rest): each takes whole groups of tests, the Docker engine's
# and the Slurm cluster's tests in one group each (tests/conftest.py says how they are grouped and ordered).
# TOOLKIT_TEST_WORKERS=0 runs everything in this one process.
exec python -m pytest -n "${TOOLKIT_TEST_WORKERS:-2}" --dist loadgroup --no-loadscope-reorder "$@"
