"""A finished (or running) session's ledger and reports, from its directory alone: the frozen
spec says where the host and the workdir are. Used by the CLI and the background controller."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import HarnessError
from ..redact import redact
from ..report import markdown
from ..report_html import html
from .journal import Journal

DIFF_TIMEOUT = 60.0  # a report must come out even when the host hangs instead of refusing
SAVED_DIFF = "diff.patch"  # the cumulative diff as of the session's last report


async def with_ledger(directory: Path, work):
    """`await work(ledger)` with the session's ledger on its host, the connection closed after."""
    from ..remote.transport import connect
    from ..spec import load_spec
    from .ledger import Ledger

    spec = load_spec(directory / "spec.yaml")
    t = await connect(spec.host_spec())
    try:
        return await work(Ledger(t, spec.workdir, directory.name, exclude=spec.ledger.exclude))
    finally:
        await t.close()


def cumulative_diff(directory: Path, timeout: float = DIFF_TIMEOUT) -> tuple[str | None, str | None]:
    """(the ledger's diff first attempt -> latest, None), or (None, one line saying why not):
    an unreachable host, a missing ledger or a broken spec never stops the report. The diff
    saved with the last report is used while the journal has not grown since (a finished
    session's report needs no connection)."""
    saved = saved_diff(directory)
    if saved is not None:
        return saved, None
    import asyncio

    try:
        return asyncio.run(asyncio.wait_for(with_ledger(directory, lambda led: led.diff()), timeout)), None
    except asyncio.TimeoutError:
        return None, f"the host did not answer within {timeout:.0f} s"
    except (HarnessError, OSError) as e:
        lines = str(e).strip().splitlines() or [type(e).__name__]
        return None, redact(lines[0])[:300]


def saved_diff(directory: Path) -> str | None:
    """The saved cumulative diff when it is at least as new as the journal, else None."""
    try:
        if (directory / SAVED_DIFF).stat().st_mtime_ns >= (directory / "journal.jsonl").stat().st_mtime_ns:
            return (directory / SAVED_DIFF).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        pass
    return None


def write_session_reports(directory: Path) -> Path:
    """report.md and report.html in the session directory (at the end of a session); returns the .md."""
    events = Journal.read(directory / "journal.jsonl")
    diff, why = cumulative_diff(directory)
    if diff is not None:
        _private(directory / SAVED_DIFF, diff)
    _private(directory / "report.html", html(events, diff, diff_error=why))
    md = directory / "report.md"
    _private(md, markdown(events, diff, diff_error=why))
    return md


def _private(path: Path, text: str) -> None:
    """Write `path` as the session's other files are: the user's alone (0600)."""
    with open(path, "w", encoding="utf-8", opener=lambda p, f: os.open(p, f, 0o600)) as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text)
