"""`harness report`: a session's report from its journal, during or after the session, with the
cumulative diff read from the ledger on the host when the host answers. Registered by harness.cli."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import BadInput

def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}; give a writable path") from None


def report(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest)."),
    html_file: Optional[Path] = typer.Option(None, "--html", metavar="FILE",
                                             help="Write the self-contained HTML report (for a phone) to FILE."),
    md_file: Optional[Path] = typer.Option(None, "--md", metavar="FILE", help="Write the Markdown report to FILE."),
    width: Optional[int] = typer.Option(None, "--width", min=20, help="Columns of the screen (default: the "
                                        "terminal's, else $COLUMNS); below 60 the report has no tables."),
) -> None:
    """What a session did, from its journal (during or after it): Markdown on stdout, or files."""
    from ..report import markdown
    from ..report_html import html
    from ..session.journal import Journal
    from ..session.reports import cumulative_diff
    from ..session.store import find_session

    directory = find_session(session)
    events = Journal.read(directory / "journal.jsonl")
    diff, why = cumulative_diff(directory)
    if why:
        sys.stderr.write(f"harness report: the cumulative diff is unavailable: {why}\n")
    if html_file is None and md_file is None:
        sys.stdout.write(markdown(events, diff, diff_error=why, width=width or _columns()))
        return
    for path, render in ((md_file, markdown), (html_file, html)):
        if path is not None:
            _write(path, render(events, diff, diff_error=why))
            typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    app.command()(report)


def _columns() -> int | None:
    """The terminal's width, else $COLUMNS, else None (a file or a pipe gets the tables)."""
    import os

    if sys.stdout.isatty():
        return os.get_terminal_size(sys.stdout.fileno()).columns
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        return None
