#!/usr/bin/env bash
# Install everything gradviz and its tests need, from the project's own files:
#   - Debian's chromium (browser tests), when missing and we may install packages;
#   - a virtualenv in .venv with gradviz installed editable. `pip install -e .` compiles the
#     Cython engine, builds the widget bundle from labextension/ (npm ci + esbuild) and the
#     JupyterLab extension from labextension/jupyterlab/, and copies that extension into
#     .venv/share/jupyter/labextensions/gradviz-jupyterlab/ (setup.py's data files).
# Idempotent, and quick the second time: scripts/build_state.py compares the sources with what
# was built (stamps in .venv, the bundle's own fingerprint) and only the steps that are out of
# date run; the widget check is the one the widget makes, so a stale bundle cannot be used.
# Called by scripts/tour and scripts/test.
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

if ! .venv/bin/python -c '' 2>/dev/null; then
  log "creating .venv"
  rm -rf .venv
  "$PYTHON" -m venv .venv
fi

# Rebuild only what changed (Note [Rebuild only what changed] in scripts/build_state.py): a
# full install, or just the engine, or just the widget bundle, or nothing.
plan=$("$PYTHON" scripts/build_state.py plan)
if [[ " $plan " == *" install "* ]]; then
  log "$("$PYTHON" scripts/build_state.py describe install)"
  .venv/bin/python -m pip install -q --upgrade pip
  # torch==2.13.0 (a test dependency) resolves to the CPU wheel; never ask for an unpinned torch.
  .venv/bin/python -m pip install -q -e ".[test,viz,docs]"
  "$PYTHON" scripts/build_state.py record install
  "$PYTHON" scripts/build_state.py record engine
else
  if [[ " $plan " == *" engine "* ]]; then
    log "$("$PYTHON" scripts/build_state.py describe engine)"
    .venv/bin/python setup.py -q build_ext --inplace
    "$PYTHON" scripts/build_state.py record engine
  fi
  if [[ " $plan " == *" widget "* ]]; then
    log "$("$PYTHON" scripts/build_state.py describe widget)"
    if [ ! -f labextension/node_modules/.package-lock.json ] \
        || [ labextension/node_modules/.package-lock.json -ot labextension/package-lock.json ]; then
      npm --prefix labextension ci --no-audit --no-fund --silent
    fi
    npm --prefix labextension run --silent build
    # The JupyterLab extension, then the copy `pip install` makes (setup.py data_files).
    if [ ! -f labextension/jupyterlab/node_modules/.package-lock.json ] \
        || [ labextension/jupyterlab/node_modules/.package-lock.json -ot labextension/jupyterlab/package-lock.json ]; then
      npm --prefix labextension/jupyterlab ci --no-audit --no-fund --silent
    fi
    npm --prefix labextension/jupyterlab run --silent build
  fi
  [ -z "$plan" ] && log "up to date: the engine and the widget match their sources, nothing to rebuild"
fi

# The JupyterLab extension goes where `pip install .` puts it (setup.py's data files); an
# editable install copies no data files (Note [Installing the JupyterLab extension] in
# setup.py), so copy the built files there whenever that copy differs from them.
if ! "$PYTHON" -c 'import sys; sys.path.insert(0, "scripts"); import build_state, pathlib
sys.exit(0 if build_state.lab_installed(pathlib.Path(".").resolve()) else 1)'; then
  log "installing the JupyterLab extension into .venv/share/jupyter/labextensions/gradviz-jupyterlab"
  rm -rf .venv/share/jupyter/labextensions/gradviz-jupyterlab
  mkdir -p .venv/share/jupyter/labextensions
  cp -R gradviz/labextension .venv/share/jupyter/labextensions/gradviz-jupyterlab
fi

# The Jupyter Server extension's switch (gradviz_jupyter: kernel websockets without Nagle's
# delay) goes where `pip install .` puts it, for the same reason.
server_config=.venv/etc/jupyter/jupyter_server_config.d/gradviz_jupyter.json
if ! cmp -s jupyter-config/jupyter_server_config.d/gradviz_jupyter.json "$server_config"; then
  log "enabling the gradviz_jupyter server extension in .venv/etc/jupyter/jupyter_server_config.d"
  mkdir -p "$(dirname "$server_config")"
  cp jupyter-config/jupyter_server_config.d/gradviz_jupyter.json "$server_config"
fi

# Whatever ran, check the result the way gradviz itself will use it.
leftover=$("$PYTHON" scripts/build_state.py plan --after-build)
if [ -n "$leftover" ]; then
  log "still out of date after setup: $leftover"
  exit 1
fi
ready=$(.venv/bin/python -c 'import gradviz, gradviz_ext, sys
if not gradviz_ext.COMPILED:
    sys.exit("the compiled engine did not build")
c = gradviz.config(); print("gradviz", c["gradviz"], "engine", c["engine"])')
log "ready: $ready"
