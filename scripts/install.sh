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

# ensure_venv LOCK NAME LINK: a venv with exactly LOCK's packages under $REVATI_VENV_DIR
# (default ~/.cache/revati), named by the hash of LOCK and the Python version (reused while
# both are unchanged; revati/engines/versions.py, which also makes every other engine
# release's venv on first use), linked as LINK (a real directory of that name, a developer's
# own venv, is left alone).
ensure_venv() {
    local lock=$1 name=$2 link=$3 venv
    venv=$("$PYTHON" -m revati.engines.versions venv "$lock" "$name") || exit 1
    echo "install: $name: $venv"
    if [[ -L "$link" || ! -e "$link" ]]; then
        ln -sfn "$venv" "$link"
    fi
}

ensure_venv "$LOCK" venv .venv
# The engines live in venvs of their own (their pins clash with ours and each other's);
# `revati bench` finds vLLM's interpreter at .venv-vllm/bin/python.
ensure_venv requirements/vllm.lock vllm .venv-vllm
# SGLang (requirements/sglang.lock) and other releases: made the first time a command asks
# for them (revati/engines/versions.py), with a line before and after

# PostgreSQL server binaries for the shared-study test of revati-tune
if ! compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" > /dev/null; then
    echo "install: PostgreSQL server from Debian"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
        > /dev/null
fi

.venv/bin/pip install -q --no-deps --no-build-isolation -e .
echo "install: done ($(.venv/bin/python -c 'import revati, sys; print(sys.executable)'))"
