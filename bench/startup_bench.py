"""How fast the everyday commands answer: the median wall time of each, as a new process, the
way a user (or a phone over SSH) runs them.

    .venv/bin/python bench/startup_bench.py [-n 9]

The sessions are a copy of the recorded all-faults session (fixtures/sessions/all-faults) with
a run log and a saved cumulative diff, as a finished session has them. `analyze` reads a small
fixture log. The disk memo of the playbooks' literals (harness/memo.py) is warm except in the
`analyze (cold memo)` row. The baseline is `python -c pass` with the same interpreter.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HARNESS = str(Path(sys.executable).with_name("harness"))
SID = "20261202-060000-abcd"
SMALL_LOG = ROOT / "fixtures" / "logs" / "pangu-fp16-loss-nan.log"


def finished_session(home: Path) -> None:
    d = home / "sessions" / SID
    (d / "attempts").mkdir(parents=True)
    for name in ("journal.jsonl", "spec.yaml"):
        shutil.copy(ROOT / "fixtures" / "sessions" / "all-faults" / name, d / name)
    shutil.copy(SMALL_LOG, d / "attempts" / "01.log")
    time.sleep(0.01)
    patch = ROOT / "fixtures" / "targets" / "minichain" / "faults" / "03-token-margin-2048.patch"
    (d / "diff.patch").write_text(patch.read_text())  # what the session's last report saved


def timed(cmd: list[str], env: dict, n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t)
        if r.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.decode()[-300:]}")
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=9, help="runs per command")
    n = ap.parse_args().n
    scratch = Path(tempfile.mkdtemp(prefix="harness-startup-"))
    try:
        env = {**os.environ, "HARNESS_HOME": str(scratch / "home"), "HARNESS_CACHE": str(scratch / "cache")}
        finished_session(scratch / "home")
        rows = [("python -c pass", [sys.executable, "-c", "pass"], {})]
        cold = [HARNESS, "analyze", str(SMALL_LOG)]
        rows += [("analyze (cold memo)", cold, {"HARNESS_CACHE": str(scratch / "cold")})]
        subprocess.run(cold, env=env, stdout=subprocess.DEVNULL, check=False)  # warm the memo
        for name, args, extra in [("--help", ["--help"], {}), ("status", ["status"], {}),
                                  ("sessions", ["sessions"], {}), ("logs", ["logs", SID], {}),
                                  ("phone (status)", ["phone"], {"SSH_ORIGINAL_COMMAND": "status"}),
                                  ("report (finished)", ["report", SID], {}),
                                  ("analyze small log", ["analyze", str(SMALL_LOG)], {})]:
            rows.append((name, [HARNESS, *args], extra))
        print(f"{n} runs each; {os.cpu_count()} cores; Python {sys.version.split()[0]}\n")
        print("| command | median | min |\n|---|---:|---:|")
        for name, cmd, extra in rows:
            if name == "analyze (cold memo)":
                med, mn = _cold(cmd, {**env, **extra}, scratch / "cold", n)
            else:
                med, mn = timed(cmd, {**env, **extra}, n)
            print(f"| `{name}` | {med * 1000:.0f} ms | {mn * 1000:.0f} ms |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _cold(cmd: list[str], env: dict, cache: Path, n: int) -> tuple[float, float]:
    """(median, min) with the memo emptied before every run."""
    times = []
    for _ in range(n):
        shutil.rmtree(cache, ignore_errors=True)
        times.append(timed(cmd, env, 1)[0])
    return statistics.median(times), min(times)


if __name__ == "__main__":
    main()
