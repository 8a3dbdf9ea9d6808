"""Record minichain's fault logs into fixtures/logs/ (the logs the golden verdicts are made from).

    .venv/bin/python scripts/record_minichain.py [NN ...]    # all ten faults, or the named ones
    .venv/bin/python scripts/regen_golden.py                 # then refresh their goldens

Each fault runs in a fresh copy at one fixed path (/tmp/minichain-record/minichain, so the
config path printed on the log's first line is the same on every machine) with its patch
applied, exactly as tests/test_minichain_faults.py runs it; a hanging run is killed once its
watchdog says so. Review the log diffs: a recording is a real run, timings and pids change.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_minichain_faults import FAULTS, FAULTS_DIR, HANG_LIMIT, TARGET, run  # noqa: E402

WORK = Path("/tmp/minichain-record/minichain")


def record(name: str) -> Path:
    shutil.rmtree(WORK.parent, ignore_errors=True)
    shutil.copytree(TARGET, WORK, ignore=shutil.ignore_patterns("__pycache__", "faults"))
    subprocess.run(["git", "init", "-q"], cwd=WORK, check=True)
    subprocess.run(["git", "apply", str(FAULTS_DIR / f"{name}.patch")], cwd=WORK, check=True)
    log = ROOT / "fixtures" / "logs" / f"minichain-{name}.log"
    code, took = run(WORK, log, HANG_LIMIT)
    print(f"{log.relative_to(ROOT)}: exit {code if code is not None else 'killed (hang)'} after {took:.1f}s")
    return log


def main(wanted: list[str]) -> None:
    names = [f[0] for f in FAULTS if not wanted or f[0][:2] in wanted]
    if not names:
        sys.exit(f"no fault numbered {' '.join(wanted)}: pick from {' '.join(f[0][:2] for f in FAULTS)}")
    for name in names:
        record(name)
    shutil.rmtree(WORK.parent, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
