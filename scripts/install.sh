#!/usr/bin/env bash
# Create .venv in the repo and install harness into it (editable, with test extras).
# Idempotent: reinstalls only when pyproject.toml or setup.py changed (HARNESS_REINSTALL=1 forces).
# On success says what it did, where, and the next command; on failure one line saying what
# failed, then the tail of the log.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
VENV=.venv
LOG=$(mktemp -t harness-install.XXXXXX)
trap 'rm -f "$LOG"' EXIT

die() {
    echo "install.sh: error: $1 (log tail below)" >&2
    tail -n 20 "$LOG" | sed 's/^/  | /' >&2
    exit 1
}

quiet() { "$@" >>"$LOG" 2>&1; }

command -v "$PY" >/dev/null || { echo "install.sh: error: $PY not found on PATH" >&2; exit 1; }
quiet "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || die "$PY is older than 3.10 (harness needs >= 3.10)"

apt_install_venv() {
    # Debian's python3 ships venv/ensurepip separately; refresh the index only if needed.
    command -v apt-get >/dev/null || return 1
    local ver pkgs
    ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    pkgs="python3-venv python${ver}-venv"
    export DEBIAN_FRONTEND=noninteractive
    quiet apt-get install -y -q $pkgs \
        || { quiet apt-get update -q && quiet apt-get install -y -q $pkgs; }
}

make_venv() {
    [ -x "$VENV/bin/python" ] && quiet "$VENV/bin/python" -c 'import pip' && return 0
    rm -rf "$VENV"
    quiet "$PY" -m venv "$VENV" && return 0
    rm -rf "$VENV"
    apt_install_venv || die "'$PY -m venv' failed and python3-venv could not be installed"
    quiet "$PY" -m venv "$VENV" || die "'$PY -m venv $VENV' failed even after installing python3-venv"
}

make_venv

STAMP="$VENV/.harness-install-stamp"
WANT=$(cat pyproject.toml setup.py | "$VENV/bin/python" -c \
    'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
done_msg() {  # $1: what happened
    local version
    version=$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("harness"))')
    echo "install.sh: harness $version $1 $PWD/$VENV (editable, with the test extras; $("$VENV/bin/python" -V))"
    echo "install.sh: next: $VENV/bin/harness demo   (tests: bash scripts/test.sh)"
}

if [ -z "${HARNESS_REINSTALL:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
    && [ -x "$VENV/bin/harness" ]; then
    done_msg "is already installed in"
    exit 0
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
quiet "$VENV/bin/python" -m pip install -q --upgrade pip || die "upgrading pip failed"
quiet "$VENV/bin/python" -m pip install -q -e '.[test]' || die "pip install -e '.[test]' failed"
echo "$WANT" >"$STAMP"
done_msg "installed into"
