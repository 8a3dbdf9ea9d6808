#!/usr/bin/env bash
# Install (if needed) and run the test suite. Arguments go to pytest.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install.sh || exit 1

.venv/bin/python -m pytest "$@"
rc=$?
if [ "$rc" -eq 5 ]; then
    echo "test.sh: error: pytest collected no tests (exit 5); check the arguments and tests/" >&2
fi
exit "$rc"
