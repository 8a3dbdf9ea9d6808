"""`harness replay`: run the real controller again against recorded sessions (fixtures written by
`harness export`, or session directories), on their recorded clock; registered by harness.cli.

Exit codes: 0 every replay reached the same verdicts, tool calls and end as its recording;
1 one diverged or differs (the output says where); 2 bad input."""

from __future__ import annotations

import functools
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import typer


@functools.cache
def _console():
    from ..ui import cli_console

    return cli_console()


class Stepper:
    """--step: each replayed event at its recorded time, with what the agent saw and did; on a
    terminal it waits for Enter after each (c: run on to the end, q: stop here)."""

    def __init__(self, pause: bool):
        self.pause = pause

    def __call__(self, ev: dict, state, seconds: float | None) -> None:
        from ..ui import event_line

        line = event_line(ev) if ev.get("type") != "activity" else None
        if line is None:
            return
        clock = f"+{seconds or 0:7.1f}s "
        _console().print(clock, line, sep="")
        if ev["type"] == "tool" and ev.get("output"):
            body = ev["output"].rstrip().splitlines()
            for ln in body[:12]:
                _console().print(" " * 14 + ln, style="dim", markup=False)
            if len(body) > 12:
                _console().print(" " * 14 + f"… {len(body) - 12} more lines", style="dim")
        if self.pause:
            answer = input("  [Enter] next · c: to the end · q: stop ").strip().lower()
            if answer == "c":
                self.pause = False
            elif answer == "q":
                raise typer.Exit(1)


def _line(o):
    """The verdict on one replay (an Outcome) as rich Text (plain after the mark: a diff may hold anything)."""
    from rich.text import Text

    if o.ok:
        return Text("✓ ", style="green").append(
            f"{o.fixture}: {o.replayed_end}, as recorded — {o.calls} recorded calls over "
            f"{o.virtual_seconds:.0f} s of session replayed in {o.seconds:.1f} s")
    if o.divergence:
        why = f"{o.fixture}: the replay left its recording (recorded end: {o.recorded_end})\n{o.divergence}"
    else:
        why = f"{o.fixture}: recorded {o.recorded_end}, replayed {o.replayed_end}\n" + "\n".join(o.differences)
    return Text("✗ ", style="red").append(why)


def replay(
    fixtures: List[str] = typer.Argument(..., metavar="DIR...", help="Fixture directories (harness export) or session ids."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per replay, in a list."),
    step: bool = typer.Option(False, "--step", help="Show each event as it is replayed; on a terminal, wait for Enter."),
    keep: Optional[Path] = typer.Option(None, "--keep", metavar="DIR",
                                        help="Keep the replayed sessions (journal, attempt logs) in DIR."),
) -> None:
    """Replay recorded sessions against the real controller: same verdicts, tool calls and end?"""
    import asyncio

    from ..replay.run import replay_fixture
    from ..session.store import session_or_directory

    paths = [session_or_directory(f) for f in fixtures]
    scratch = Path(tempfile.mkdtemp(prefix="harness-replay-")) if keep is None else keep
    outcomes = []
    try:
        for i, path in enumerate(paths):
            ui = Stepper(sys.stdin.isatty() and sys.stdout.isatty()) if step else None
            outcomes.append(asyncio.run(replay_fixture(path, scratch / str(i), ui)))
            if not as_json:
                _console().print(_line(outcomes[-1]), soft_wrap=True)
    finally:
        if keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    if as_json:
        typer.echo(json.dumps([{**o.__dict__, "ok": o.ok} for o in outcomes], indent=1))
    raise typer.Exit(0 if all(o.ok for o in outcomes) else 1)


def register(app: typer.Typer) -> None:
    app.command()(replay)
