"""Record and replay, measured: how fast the fixtures of fixtures/sessions/ replay, how much a
recording grows while the controller watches a silent run, and what one recorded entry costs.

    .venv/bin/python bench/replay_bench.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from harness.record import Recorder, read_recording  # noqa: E402
from harness.replay.run import replay_fixture  # noqa: E402
from harness.session.runner import run_spec  # noqa: E402
from test_loop import spec_for  # noqa: E402

SILENT = 20  # seconds the watched run prints nothing


def replays(scratch: Path) -> None:
    total = 0.0
    print("| fixture | recorded calls | session time | replay time |\n|---|---:|---:|---:|")
    for i, fixture in enumerate(sorted((ROOT / "fixtures" / "sessions").iterdir())):
        out = asyncio.run(replay_fixture(fixture, scratch / str(i)))
        assert out.ok, out.divergence or out.differences
        total += out.seconds
        print(f"| {fixture.name} | {out.calls} | {out.virtual_seconds:.1f} s | {out.seconds:.2f} s |")
    print(f"| all | | | {total:.2f} s |\n")


def silent_run(scratch: Path) -> None:
    work = scratch / "work"
    work.mkdir()
    (work / "run.sh").write_text(f'echo "minichain driver pid=$$: config run.sh"\nsleep {SILENT}\n'
                                 '"$PYTHON" -c \'raise ValueError("No valid rounds in trajectory t0")\'\n')
    d = scratch / "silent"
    asyncio.run(run_spec(spec_for(work, launch={"settle": 0.5, "stall": 60}), d, offline=True))
    rec = read_recording(d / "recording.jsonl")
    size = (d / "recording.jsonl").stat().st_size
    kinds = {k: sum(e["k"] == k for e in rec) for k in ("clock", "sleep", "stat", "read", "run")}
    print(f"watching a run silent for {SILENT} s: {len(rec)} entries, {size / 1024:.0f} KiB "
          f"(≈ {size / SILENT * 3600 / 2**20:.1f} MiB per hour of silence); {kinds}")


def entry_cost(scratch: Path, n: int = 100_000) -> None:
    rec = Recorder(scratch / "cost.jsonl")
    t0 = time.perf_counter()
    for i in range(n):
        rec.add("clock", t=1796040000.0 + i * 0.25)
    took = time.perf_counter() - t0
    rec.close()
    print(f"one recorded entry (a clock reading, written and flushed): {took / n * 1e6:.1f} µs")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        replays(Path(tmp))
        entry_cost(Path(tmp))
        silent_run(Path(tmp))
