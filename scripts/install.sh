#!/usr/bin/env bash
# Install everything Revati needs into a venv, once per lock file, and link it as .venv.
#
# The venv lives outside the checkout ($REVATI_VENV_DIR, default ~/.cache/revati) under the
# hash of requirements/lock.txt, so fresh clones (CI) reuse it while the lock is unchanged.
# Then the package itself is installed in editable mode, which compiles the native shim.
#   scripts/install.sh            install or reuse, then build the shim
#   scripts/install.sh --relock   rewrite requirements/lock.txt from the current .venv
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
LOCK=requirements/lock.txt

if [[ "${1:-}" == "--relock" ]]; then
    {
        sed -n '1,3p' "$LOCK"
        grep -E '^(setuptools|wheel)==' "$LOCK"
        .venv/bin/pip freeze --exclude-editable | grep -vE '^(-e|setuptools==|wheel==)'
    } > "$LOCK.new"
    mv "$LOCK.new" "$LOCK"
    echo "relocked $(grep -c '==' "$LOCK") packages"
    exit 0
fi

HASH=$( (cat "$LOCK"; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
VENV_DIR=${REVATI_VENV_DIR:-$HOME/.cache/revati}
VENV="$VENV_DIR/venv-$HASH"

if [[ -f "$VENV/.revati-lock" && "$(cat "$VENV/.revati-lock")" == "$HASH" ]]; then
    echo "install: reusing $VENV"
else
    echo "install: creating $VENV from $LOCK (torch's CUDA build is several GB: minutes)"
    rm -rf "$VENV"
    mkdir -p "$VENV_DIR"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q --no-deps -r "$LOCK"
    echo "$HASH" > "$VENV/.revati-lock"
fi

# .venv: a link to the cached venv (a real .venv directory of a developer is left alone)
if [[ -L .venv || ! -e .venv ]]; then
    ln -sfn "$VENV" .venv
fi

# The engines live in venvs of their own (their pins clash with ours); `revati bench`
# finds vLLM's interpreter at .venv-vllm/bin/python.
ENGINE_LOCK=requirements/vllm.lock
EHASH=$( (cat "$ENGINE_LOCK"; "$PYTHON" -c 'import sys; print(sys.version)') | sha256sum | cut -c1-16)
EVENV="$VENV_DIR/vllm-$EHASH"
if [[ -f "$EVENV/.revati-lock" && "$(cat "$EVENV/.revati-lock")" == "$EHASH" ]]; then
    echo "install: reusing $EVENV"
else
    echo "install: creating $EVENV from $ENGINE_LOCK (vLLM and its CUDA libraries: minutes)"
    rm -rf "$EVENV"
    "$PYTHON" -m venv "$EVENV"
    "$EVENV/bin/pip" install -q --upgrade pip
    "$EVENV/bin/pip" install -q --no-deps -r "$ENGINE_LOCK"
    echo "$EHASH" > "$EVENV/.revati-lock"
fi
if [[ -L .venv-vllm || ! -e .venv-vllm ]]; then
    ln -sfn "$EVENV" .venv-vllm
fi

# PostgreSQL server binaries for the shared-study test of revati-tune
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
    echo "install: PostgreSQL server from Debian"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
        > /dev/null
fi

.venv/bin/pip install -q --no-deps --no-build-isolation -e .
echo "install: done ($(.venv/bin/python -c 'import revati, sys; print(sys.executable)'))"
