"""`harness report`: a session's report from its journal, during or after the session, with the
cumulative diff read from the ledger on the host when the host answers. Registered on
harness.cli's app."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Optional

import typer

from .cli import app
from .errors import BadInput, HarnessError
from .redact import redact
from .remote.transport import connect
from .report import markdown
from .report_html import html
from .session.journal import Journal
from .session.ledger import Ledger
from .session.store import find_session
from .spec import load_spec

DIFF_TIMEOUT = 60.0  # a report must come out even when the host hangs instead of refusing


async def _diff(directory: Path) -> str:
    spec = load_spec(directory / "spec.yaml")
    t = await connect(spec.host_spec())
    try:
        return await Ledger(t, spec.workdir, directory.name, exclude=spec.ledger.exclude).diff()
    finally:
        await t.close()


def cumulative_diff(directory: Path, timeout: float = DIFF_TIMEOUT) -> tuple[str | None, str | None]:
    """(the ledger's diff first attempt -> latest, None), or (None, one line saying why not):
    an unreachable host, a missing ledger or a broken spec never stops the report."""
    try:
        return asyncio.run(asyncio.wait_for(_diff(directory), timeout)), None
    except asyncio.TimeoutError:
        return None, f"the host did not answer within {timeout:.0f} s"
    except (HarnessError, OSError) as e:
        lines = str(e).strip().splitlines() or [type(e).__name__]
        return None, redact(lines[0])[:300]


def write_session_reports(directory: Path) -> Path:
    """report.md and report.html in the session directory (at the end of a session); returns the .md."""
    events = Journal.read(directory / "journal.jsonl")
    diff, why = cumulative_diff(directory)
    (directory / "report.html").write_text(html(events, diff, diff_error=why), encoding="utf-8")
    md = directory / "report.md"
    md.write_text(markdown(events, diff, diff_error=why), encoding="utf-8")
    return md


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}; give a writable path") from None


@app.command()
def report(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest)."),
    html_file: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                             help="Write the self-contained HTML report (for a phone) to FILE."),
    md_file: Optional[Path] = typer.Option(None, "--md", metavar="FILE", help="Write the Markdown report to FILE."),
) -> None:
    """What a session did, from its journal (during or after it): Markdown on stdout, or files."""
    directory = find_session(session)
    events = Journal.read(directory / "journal.jsonl")
    diff, why = cumulative_diff(directory)
    if why:
        sys.stderr.write(f"harness report: the cumulative diff is unavailable: {why}\n")
    if html_file is None and md_file is None:
        sys.stdout.write(markdown(events, diff, diff_error=why))
        return
    for path, render in ((md_file, markdown), (html_file, html)):
        if path is not None:
            _write(path, render(events, diff, diff_error=why))
            typer.echo(f"wrote {path}")
