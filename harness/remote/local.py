"""LocalTransport: the Transport contract on this machine (tests, single-host runs).
Commands run as `/bin/sh -c cmd` in a session of their own, so a timeout kills the whole process
group (TERM, a short grace, KILL). Relative paths and the default cwd are the login (home)
directory, as over SSH/SFTP. Blocking file I/O runs in a worker thread."""

import asyncio
import contextlib
import os
import secrets
import signal
from stat import S_ISDIR

from .. import aio
from .transport import CommandResult, FileStat, checked

GRACE = 0.5  # seconds between TERM and KILL on timeout
DRAIN = 1.0  # seconds to collect output still buffered in the pipes after a kill


def _abs(path: str) -> str:
    return os.path.join(os.path.expanduser("~"), path)  # absolute paths stay as they are


def _killpg(proc, sig: int) -> None:
    """Signal the command's process group. Once the command itself has been reaped, its number
    is free again unless members of its group live on: a process that has that pid now is
    another's (pid_max is often 32768; under load numbers come round within minutes), and so is
    its group."""
    if proc.returncode is not None and os.path.exists(f"/proc/{proc.pid}"):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


async def _pump(stream: asyncio.StreamReader, buf: bytearray) -> None:
    while chunk := await stream.read(1 << 16):
        buf += chunk


class LocalTransport:
    name = "local"

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        workdir = _abs(cwd or "")
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", cmd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=workdir, env={**os.environ, **(env or {})},
                start_new_session=True)
        except OSError as e:  # the cwd is missing or not a directory: a failed command, as `cd` would be
            if e.filename != workdir:
                raise
            return checked(CommandResult(cmd, 1, "", f"cd: {workdir}: {e.strerror}\n"), check)
        out, err = bytearray(), bytearray()
        pumps = asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
        done = asyncio.gather(pumps, proc.wait())
        timed_out = finished = False
        try:
            await aio.wait_for(asyncio.shield(done), timeout)
            finished = True
        except asyncio.TimeoutError:  # TERM the group, a grace, KILL what is left, collect the output
            timed_out = True
            for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, DRAIN)):
                _killpg(proc, sig)
                with contextlib.suppress(asyncio.TimeoutError):  # a setsid'd grandchild may hold a pipe
                    await aio.wait_for(asyncio.shield(done), wait)
        finally:
            if not (finished or timed_out):  # cancelled from outside: leave nothing running
                _killpg(proc, signal.SIGKILL)
            if not pumps.done():  # a pipe is still held open (by a setsid'd grandchild): let go of it
                pumps.cancel()
                done.add_done_callback(lambda f: f.cancelled() or f.exception())
                proc._transport.close()  # asyncio's Process has no public way to close its pipes
        result = CommandResult(cmd, None if timed_out else proc.returncode,
                               out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), timed_out)
        return checked(result, check)

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        def _read() -> bytes:
            with open(_abs(path), "rb") as f:
                f.seek(offset)
                return f.read(-1 if size is None else size)
        return await asyncio.to_thread(_read)

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        def _write() -> None:
            target = _abs(path)
            parent, name = os.path.split(target)
            if not os.path.isdir(parent):
                raise FileNotFoundError(2, "no such directory", parent)
            keep = mode
            if keep is None and os.path.exists(target):  # a replaced executable stays executable
                keep = os.stat(target).st_mode & 0o7777
            tmp = os.path.join(parent, f".{name}.{secrets.token_hex(4)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    if keep is not None:
                        os.fchmod(f.fileno(), keep)
                    os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        await asyncio.to_thread(_write)

    async def stat(self, path: str) -> FileStat | None:
        try:
            st = await asyncio.to_thread(os.stat, _abs(path))
        except (FileNotFoundError, NotADirectoryError):
            return None
        return FileStat(st.st_size, st.st_mtime, st.st_mode, S_ISDIR(st.st_mode))

    async def close(self) -> None:
        pass
