"""Sessions for people: continue, status, sessions, stop, logs, attach, phone, nightly; registered by
harness.cli."""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Optional

import typer

from ..errors import BadInput


@functools.cache
def _console():
    from ..ui import cli_console

    return cli_console()


def _unfinished_or_named(name: str | None) -> Path:
    """The named session, else the most recently active one that has not ended (else the most
    recently active one); never one that failed to start."""
    from ..session.journal import Journal
    from ..session.status import is_default_target
    from ..session.store import find_session

    if name:
        return find_session(name)
    def unfinished(d: Path) -> bool:
        return is_default_target(d) and not any(e["type"] == "end" for e in Journal.read(d / "journal.jsonl")[-1:])
    try:
        return find_session(None, unfinished)
    except BadInput:
        return find_session(None, is_default_target)


def continue_(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest unfinished one)."),
    fg: bool = typer.Option(False, "--fg", help="Stay in the foreground."),
    offline: bool = typer.Option(False, "--offline", help="Declared fixes only."),
) -> None:
    """Resume a session in the background and return at once (a run still alive is re-attached)."""
    from ..session.detach import start_background
    from ..session.status import status

    directory = _unfinished_or_named(session)
    before = status(directory)
    if before["ended"] == "passed":
        typer.echo(f"session {directory.name} passed already (attempt {before['attempt']}); nothing to continue; "
                   f"`harness report {directory.name}` tells its story")
        return
    fresh = (before["ended"] or "").startswith("budget:")
    if fg:
        from .loop import run_session_fg
        run_session_fg(directory, offline)
        return
    pid = start_background(directory, offline)
    where = f"attempt {before['attempt']}, " + (f"ended {before['ended']}" if before["ended"] else before["doing"])
    extra = f"; a fresh {before['ended'][7:]} budget of the same size" if fresh else ""
    typer.echo(f"continuing {directory.name} in the background (pid {pid}): {where}{extra}; "
               f"watch: harness status {directory.name}")


def status_(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object."),
) -> None:
    """Where a session stands, in lines that fit a 40-column phone screen."""
    from ..session.status import is_default_target, phone_lines, status
    from ..session.store import find_session

    s = status(find_session(session, is_default_target))
    typer.echo(json.dumps(s) if as_json else "\n".join(phone_lines(s)))


def sessions(
    last: int = typer.Option(10, "-n", "--last", min=1, help="How many of the newest to list."),
    all_: bool = typer.Option(False, "--all", help="List them all."),
) -> None:
    """The newest sessions first (ten by default), one 40-column line each: id, stages passed,
    attempts, state."""
    from ..session.status import session_line, sessions_table
    from ..session.store import sessions_dir

    rows = sessions_table(sessions_dir(), None if all_ else last)
    if not rows:
        typer.echo(f"no sessions in {sessions_dir()}")
    for r in rows:
        typer.echo(session_line(r))
    total = len(list(sessions_dir().glob("*/journal.jsonl"))) if rows else 0
    if total > len(rows):
        typer.echo(f"({total - len(rows)} older: --all)")


def stop(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest)."),
    keep_run: bool = typer.Option(False, "--keep-run", help="Leave the run alive; only the controller stops."),
) -> None:
    """Stop a session's controller; it stops the run it started unless --keep-run."""
    from ..session.detach import holder, request_stop
    from ..session.store import find_session

    directory = find_session(session)
    pid = request_stop(directory, keep_run)
    if pid is None:
        raise BadInput(f"session {directory.name} has no controller running; nothing to stop")
    for _ in range(300):  # the controller stops its run and writes `end`: wait (bounded) for it
        if holder(directory) is None:
            break
        time.sleep(0.1)
    typer.echo(f"stopped {directory.name} (controller pid {pid})" + (", run left alive" if keep_run else ""))


def logs(
    session: Optional[str] = typer.Argument(None, help="Session id (default: the latest)."),
    follow: bool = typer.Option(False, "-f", "--follow", help="Keep printing as the run writes."),
    controller: bool = typer.Option(False, "--controller", help="The controller's own log instead."),
) -> None:
    """The latest attempt's run log (as the controller copied it)."""
    from ..session.detach import LOG, holder
    from ..session.store import find_session

    directory = find_session(session)
    path = directory / LOG if controller else _latest_log(directory)
    if path is None or not path.is_file():
        what = "controller log (it never ran in the background)" if controller else "attempt log yet"
        raise BadInput(f"session {directory.name} has no {what}")
    with open(path, "rb") as fh:
        while True:
            data = fh.read()
            if data:
                typer.echo(data.decode(errors="replace"), nl=False)
            if not follow or (holder(directory) is None and not data):
                return
            time.sleep(0.5)
            newer = _latest_log(directory)
            if not controller and newer != path:
                path = newer
                fh = open(path, "rb")  # noqa: SIM115 (the next attempt's log)


def _latest_log(directory: Path) -> Path | None:
    found = sorted((directory / "attempts").glob("[0-9][0-9].log")) if (directory / "attempts").is_dir() else []
    return found[-1] if found else None


def attach(session: Optional[str] = typer.Argument(None, help="Session id (default: the latest).")) -> None:
    """Follow a session's events live until it ends (Ctrl-C leaves it running)."""
    from ..session.detach import holder
    from ..session.journal import Journal
    from ..session.store import find_session

    from ..ui import event_line

    directory = find_session(session)
    seen = 0
    while True:
        events = Journal.read(directory / "journal.jsonl")
        for ev in events[seen:]:
            if (line := event_line(ev)) is not None:
                _console().print(line)
        seen = len(events)
        if events and events[-1]["type"] == "end" and holder(directory) is None:
            return
        time.sleep(0.5)


def phone(ctx: typer.Context) -> None:
    """The forced command of a phone's key: continue, status, stop, report, logs, sessions only,
    with their own flags and a session id (nothing that names a file)."""
    import os

    from ..session.phone import load_env, phone_args

    args = phone_args(os.environ.get("SSH_ORIGINAL_COMMAND", ""))
    load_env()  # the model's key for `continue`, from ~/.config/harness/env (0600)
    os.environ.setdefault("COLUMNS", "40")  # a phone's screen: `report` drops its tables
    # the allowed command, in this process (a second interpreter would double the phone's wait)
    rc = ctx.find_root().command.main(args, prog_name="harness", standalone_mode=False)
    if isinstance(rc, int) and rc:
        raise typer.Exit(rc)


def nightly(
    specs: list[Path] = typer.Argument(..., metavar="SPEC...", help="Run specs; one fresh session each."),
    offline: bool = typer.Option(False, "--offline", help="Declared fixes only."),
) -> None:
    """Unattended: a fresh session per spec, one after another; exit 0 all passed, 1 one did not
    pass, 2 one could not run. A spec whose previous nightly session still runs is skipped (2)."""
    import asyncio
    import hashlib
    import os

    from ..errors import HarnessError
    from ..session.reports import write_session_reports
    from ..session.detach import AlreadyRunning, mark_holder, take_lock
    from ..session.runner import run_spec
    from ..session.store import home, new_session
    from ..spec import dump_spec, load_spec
    from ..ui import SessionView
    from .loop import check_playbook

    worst = 0
    for path in specs:
        lock_dir = home() / "nightly" / hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
        lock_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = take_lock(lock_dir)
        except AlreadyRunning:
            typer.echo(f"{path}: a nightly session of this spec is still running; skipped")
            worst = 2
            continue
        try:
            mark_holder(fd, os.getpid())
            spec = load_spec(path)
            check_playbook(spec)
            directory = new_session(dump_spec(spec))
            from rich.console import Console

            with SessionView(Console(highlight=False, force_terminal=False, width=160)) as view:
                ses = asyncio.run(run_spec(spec, directory, offline=offline, ui=view))
            report = write_session_reports(directory)
            typer.echo(f"{path}: session {directory.name} {ses.state.ended['reason']}; report: {report}")
            worst = max(worst, 0 if ses.state.passed else 1)
        except HarnessError as e:
            typer.echo(f"{path}: could not run: {e}")
            worst = 2
        finally:
            os.close(fd)
    raise typer.Exit(worst)


def register(app: typer.Typer) -> None:
    app.command("continue")(continue_)
    app.command("status")(status_)
    app.command("sessions")(sessions)
    app.command("stop")(stop)
    app.command("logs")(logs)
    app.command("attach")(attach)
    app.command("phone")(phone)
    app.command("nightly")(nightly)
