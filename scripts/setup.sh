#!/usr/bin/env bash
# Install everything gradviz and its tests need, from the project's own files:
#   - Debian's chromium (browser tests), when missing and we may install packages;
#   - a virtualenv in .venv with gradviz installed editable. `pip install -e .` compiles the
#     Cython engine and builds the widget bundle from labextension/ (npm ci + esbuild), always
#     from sources, so a stale bundle cannot be used.
# Idempotent: a second run only rebuilds. Called by scripts/tour and scripts/test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '\033[1m[gradviz setup]\033[0m %s\n' "$*" >&2; }

PYTHON=${PYTHON:-python3}
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
  || { log "Python 3.11+ is required (found $("$PYTHON" --version 2>&1))"; exit 1; }
command -v npm >/dev/null || { log "npm (Node.js 20) is required to build the widget"; exit 1; }

if [ "${GRADVIZ_NO_CHROMIUM:-0}" != 1 ] && ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    log "installing Debian's chromium for the browser tests"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    log "chromium is missing: run 'sudo apt-get install chromium' (browser tests need it)"
  fi
fi

if [ ! -x .venv/bin/python ]; then
  log "creating .venv"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# torch==2.13.0 (a test dependency) resolves to the CPU wheel; never ask for an unpinned torch.
log "installing gradviz (compiles the engine, builds the widget bundle), test and docs dependencies"
.venv/bin/python -m pip install -q -e ".[test,viz,docs]"
.venv/bin/python -c 'import gradviz_ext, sys; sys.exit(0 if gradviz_ext.COMPILED else "the compiled engine did not build")'
log "ready: $(.venv/bin/python -c 'import gradviz; c = gradviz.config(); print("gradviz", c["gradviz"], "engine", c["engine"])')"
