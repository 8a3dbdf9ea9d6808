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
import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from ..errors import HarnessError

LOCK = "controller.lock"
STOP = "stop.request"  # written by `harness stop` before it signals: "keep-run" or "stop"
LOG = "controller.log"
PROBE_TRIES = 20  # 10 ms apart
START_WAIT = 90.0  # seconds `continue` waits for the controller's start-up checks


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


class StartFailed(HarnessError):
    """The background controller did not pass its start-up checks (its message says why)."""


def start_background(directory: Path, offline: bool = False, wait: float = START_WAIT) -> int:
    """Start the session's controller detached (own session, no terminal, output to the session
    directory) and return its pid once it holds the lock and has passed its start-up checks (spec,
    model key, connection, host key). AlreadyRunning if one runs; StartFailed with the
    controller's own error if it fails them."""
    fd = take_lock(directory)
    ready_r, ready_w = os.pipe()
    try:
        (directory / STOP).unlink(missing_ok=True)
        with open(directory / LOG, "ab", opener=_private) as out:
            proc = subprocess.Popen([sys.executable, "-m", "harness.session.detach", str(directory),
                                     *(["--offline"] if offline else []), "--lock-fd", str(fd),
                                     "--ready-fd", str(ready_w)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, pass_fds=(fd, ready_w), close_fds=True)
        mark_holder(fd, proc.pid)
    finally:
        os.close(fd)  # the child holds the lock through its inherited copy
        os.close(ready_w)
    try:
        answer = _read_answer(ready_r, wait)
    finally:
        os.close(ready_r)
    if answer == "ok":
        return proc.pid
    if answer is None:
        raise StartFailed(f"the controller (pid {proc.pid}) has not finished its start-up checks after {wait:g} s; "
                          f"it goes on: `harness status {directory.name}`, `harness logs {directory.name} --controller`")
    if not answer:
        answer = f"the controller exited before its start-up checks (status {proc.wait()}): " + \
                 (_last_line(directory / LOG) or f"see {directory / LOG}")
    raise StartFailed(answer.removeprefix("error: "))


def _read_answer(fd: int, wait: float) -> str | None:
    """What the controller wrote on its ready pipe ("ok", "error: …", "" if it closed it
    without a word), or None if it said nothing within `wait` seconds."""
    import select

    data, deadline = b"", time.monotonic() + wait
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _private(path, flags):
    return os.open(path, flags, 0o600)


def request_stop(directory: Path, keep_run: bool) -> int | None:
    """Ask the running controller to stop (SIGTERM); returns its pid, or None if none runs."""
    pid = holder(directory)
    if pid is None:
        return None
    (directory / STOP).write_text("keep-run\n" if keep_run else "stop\n")
    os.kill(pid, signal.SIGTERM)
    return pid


def install_stop(ses, directory: Path, on_hangup=None) -> None:
    """Signals end the session cleanly: SIGTERM (`harness stop`, a shutdown) stops it and writes
    `end`; SIGHUP — the terminal of a foreground run went away, as on the night this project
    began with — does not: the session goes on, and `on_hangup()` sends its output elsewhere."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def stop():
        req = (directory / STOP).read_text().strip() if (directory / STOP).exists() else ""
        (directory / STOP).unlink(missing_ok=True)  # consumed: a later signal is not this request
        ses.keep_on_stop = req == "keep-run"
        ses.stop_detail = "stopped by `harness stop`" if req else "stopped by SIGTERM"
        task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    loop.add_signal_handler(signal.SIGHUP, on_hangup or (lambda: None))


def lose_terminal(directory: Path, why: str) -> None:
    """A foreground session's terminal or pipe went away: its output goes on into controller.log."""
    log = os.open(directory / LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for out in (1, 2):
        os.dup2(log, out)
    os.close(log)
    print(f"{why}; session {directory.name} goes on without it", flush=True)


def _main(argv: list[str]) -> int:
    from .runner import run_spec

    directory = Path(argv[0])
    offline = "--offline" in argv
    fd = int(argv[argv.index("--lock-fd") + 1]) if "--lock-fd" in argv else take_lock(directory)
    ready = int(argv[argv.index("--ready-fd") + 1]) if "--ready-fd" in argv else None
    mark_holder(fd, os.getpid())

    def answer(text: str) -> None:  # to the `continue` waiting on the other end, once
        nonlocal ready
        if ready is not None:
            with contextlib.suppress(OSError):
                os.write(ready, (text + "\n").encode())
            os.close(ready)
            ready = None

    try:
        from rich.console import Console

        from ..spec import load_spec
        from ..ui import SessionView

        spec = load_spec(directory / "spec.yaml")
        view = SessionView(Console(file=sys.stdout, force_terminal=False, width=160, highlight=False))
        asyncio.run(run_spec(spec, directory, offline=offline, ui=view, on_ready=lambda: answer("ok"),
                             on_session=lambda ses: install_stop(ses, directory)))
    except asyncio.CancelledError:
        pass
    except HarnessError as e:  # the operator's to fix: one line in the controller's log (and to `continue`)
        print(f"error: {e}", flush=True)
        answer(f"error: {e}")
        return 2
    except Exception:  # a bug: its traceback goes to the controller's log, where `status` points
        traceback.print_exc()
        answer("error: the controller failed: " + (_last_line(directory / LOG) or "see controller.log"))
        return 1
    finally:
        answer("error: the controller ended before its start-up checks passed")
        from .reports import write_session_reports

        with contextlib.suppress(Exception):
            write_session_reports(directory)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
