#!/usr/bin/env bash
# Install (if needed) and run the test suite. Arguments go to pytest.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install.sh || exit 1

# The SSH tests start real sshd instances on 127.0.0.1.
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
    echo "test.sh: installing openssh-server for the SSH tests" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openssh-server openssh-client; } \
        >/tmp/harness-apt.log 2>&1 || { echo "test.sh: error: could not install openssh-server (see /tmp/harness-apt.log)" >&2; tail -20 /tmp/harness-apt.log >&2; exit 1; }
fi

# The report test opens the HTML report in headless Chromium (Debian's package is `chromium`).
if [ ! -x /usr/bin/chromium ]; then
    echo "test.sh: installing chromium for the HTML report test" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } \
        >/tmp/harness-apt.log 2>&1 || { echo "test.sh: error: could not install chromium (see /tmp/harness-apt.log)" >&2; tail -20 /tmp/harness-apt.log >&2; exit 1; }
fi

# The Slurm launcher tests start Debian's munged, slurmctld and slurmd on a slurm.conf of their own.
if ! command -v slurmctld >/dev/null 2>&1 && [ ! -x /usr/sbin/slurmctld ]; then
    echo "test.sh: installing slurm-wlm and munge for the Slurm launcher tests" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq slurm-wlm munge; } \
        >/tmp/harness-apt.log 2>&1 || { echo "test.sh: error: could not install slurm-wlm (see /tmp/harness-apt.log)" >&2; tail -20 /tmp/harness-apt.log >&2; exit 1; }
fi

# The Ray tests start a real Ray head on 127.0.0.1 (the `ray` extra: ray[default] from PyPI).
if [ ! -x .venv/bin/ray ]; then
    echo "test.sh: installing ray[default] for the Ray Jobs tests" >&2
    .venv/bin/python -m pip install -q -e '.[test,ray]' >/tmp/harness-ray.log 2>&1 \
        || { echo "test.sh: error: could not install ray[default] (see /tmp/harness-ray.log)" >&2; tail -20 /tmp/harness-ray.log >&2; exit 1; }
fi

# Four workers on two cores: most tests wait on real processes, sshd and engines, not on the CPU.
# The tests that start Ray or Slurm share one worker (xdist_group "engines"). `-n 0` runs serially.
.venv/bin/python -m pytest -n "${HARNESS_TEST_WORKERS:-4}" --dist loadgroup "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "test.sh: error: pytest collected no tests (exit 5); check the arguments and tests/" >&2
fi
exit "$rc"
