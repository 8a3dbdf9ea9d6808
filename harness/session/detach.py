"""The background controller and its lock: one controller per session, surviving the SSH session
(the phone) that started it.

The lock is an flock on `<session>/controller.lock`, whose text says who holds it ("pid since").
The kernel drops an flock when its holder dies, so a lock left by a killed controller is simply
free again: nothing to detect by pid guessing, nothing to clean. `harness continue` takes the
lock itself and hands the locked file to the controller it starts (an inherited descriptor keeps
the same lock), so two `continue`s racing cannot both start one.

    python -m harness.session.detach SESSION_DIR [--offline]    # what `continue` starts
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ..errors import HarnessError

LOCK = "controller.lock"
STOP = "stop.request"  # written by `harness stop` before it signals: "keep-run" or "stop"
LOG = "controller.log"
PROBE_TRIES = 20  # 10 ms apart


class AlreadyRunning(HarnessError):
    def __init__(self, directory: Path, holder: str):
        pid, _, since = holder.partition(" ")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(since))) if since else "?"
        super().__init__(f"session {directory.name} is already running (pid {pid or '?'}, since {when}); "
                         f"`harness status {directory.name}` shows it, `harness stop {directory.name}` stops it")
        self.pid = int(pid) if pid.isdigit() else None


def take_lock(directory: Path) -> int:
    """Lock the session for this process; returns the locked fd. AlreadyRunning if held."""
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    for _ in range(PROBE_TRIES):  # `holder()` takes the lock for an instant: that is not a controller
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            time.sleep(0.01)
    holder = os.pread(fd, 100, 0).decode(errors="replace").strip()
    os.close(fd)
    raise AlreadyRunning(directory, holder)


def mark_holder(fd: int, pid: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{pid} {time.time():.0f}\n".encode(), 0)


def holder(directory: Path) -> int | None:
    """The pid of the controller running the session, or None."""
    try:
        fd = take_lock(directory)
    except AlreadyRunning as e:
        return e.pid
    except FileNotFoundError:
        return None
    os.close(fd)
    return None


def start_background(directory: Path, offline: bool = False) -> int:
    """Start the session's controller detached (own session, no terminal, output to the session
    directory); returns its pid. AlreadyRunning if one runs."""
    fd = take_lock(directory)
    try:
        (directory / STOP).unlink(missing_ok=True)
        with open(directory / LOG, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "harness.session.detach", str(directory),
                                     *(["--offline"] if offline else []), "--lock-fd", str(fd)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, pass_fds=(fd,), close_fds=True)
        mark_holder(fd, proc.pid)
        return proc.pid
    finally:
        os.close(fd)  # the child holds the lock through its inherited copy


def request_stop(directory: Path, keep_run: bool) -> int | None:
    """Ask the running controller to stop (SIGTERM); returns its pid, or None if none runs."""
    pid = holder(directory)
    if pid is None:
        return None
    (directory / STOP).write_text("keep-run\n" if keep_run else "stop\n")
    os.kill(pid, signal.SIGTERM)
    return pid


def _main(argv: list[str]) -> int:
    from ..spec import load_spec
    from .runner import run_spec

    directory = Path(argv[0])
    offline = "--offline" in argv
    fd = int(argv[argv.index("--lock-fd") + 1]) if "--lock-fd" in argv else take_lock(directory)
    mark_holder(fd, os.getpid())
    spec = load_spec(directory / "spec.yaml")

    def on_session(ses):  # `harness stop` signals; the controller ends its session cleanly
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def stop():
            req = (directory / STOP).read_text().strip() if (directory / STOP).exists() else "stop"
            ses.keep_on_stop, ses.stop_detail = req == "keep-run", "stopped by `harness stop`"
            task.cancel()
        loop.add_signal_handler(signal.SIGTERM, stop)

    try:
        from rich.console import Console

        from ..ui import SessionView

        view = SessionView(Console(file=sys.stdout, force_terminal=False, width=160, highlight=False))
        asyncio.run(run_spec(spec, directory, offline=offline, on_session=on_session, ui=view))
    except asyncio.CancelledError:
        pass
    except HarnessError as e:  # the operator's to fix: one line in the controller's log
        print(f"error: {e}", flush=True)
        return 2
    finally:
        from .reports import write_session_reports

        write_session_reports(directory)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
