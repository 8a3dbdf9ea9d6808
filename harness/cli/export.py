"""`harness export SESSION DIR [--scrub]`: a session as a fixture directory (harness/export.py);
registered by harness.cli."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from ..errors import BadInput


def export(
    session: str = typer.Argument(..., metavar="SESSION", help="Session id, or a session directory."),
    directory: Path = typer.Argument(..., metavar="DIR", help="The fixture directory to write (new, or empty)."),
    scrub: bool = typer.Option(False, "--scrub", help="Replace secrets, host and user names, IPs and home "
                               "paths with stable placeholders (do this before the fixture leaves this machine)."),
    words: list[str] = typer.Option([], "--scrub-word", metavar="WORD",
                                    help="One more word to hide, whole-word (a project or cluster name; repeatable)."),
) -> None:
    """Write a session's recording, spec and journal as a fixture `harness replay` can run."""
    from ..export import export_session
    from ..session.store import session_or_directory

    if words and not scrub:
        raise BadInput("--scrub-word only means something with --scrub; add --scrub")
    m = export_session(session_or_directory(session), directory, scrub=scrub, words=words)
    hidden = ", ".join(f"{n} {kind}" for kind, n in m["placeholders"].items() if n) or "nothing found to hide"
    what = f"scrubbed ({hidden})" if scrub else "NOT scrubbed"
    typer.echo(f"exported session {m['session']} to {directory}: {m['entries']} recorded calls, "
               f"{m['events']} journal events; {what}")
    if not scrub:
        sys.stderr.write(f"warning: {directory} is not scrubbed and may hold secrets, host and user names; "
                         f"keep it private, or export again with --scrub before sharing it\n")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
