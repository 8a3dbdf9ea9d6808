"""Commands over a small pool of persistent `/bin/sh` channels (an exec channel costs ~150 ms;
a command written to a waiting shell costs ~1 ms).

Each shell starts with `exec 3>&2 2>/dev/null; S=$(command -v setsid)`: fd 3 is the channel's
stderr, and the shell's own notes ("Killed", "Terminated") go nowhere. Each command is then
one line framed by a random per-command token T (24 hex digits):

    printf 'T<\\n'; printf 'T<\\n' >&3;
    K=V $S /bin/sh -c 'exec 2>&3 3>&-; printf "T#%s\\n" $$ >&2; [ -z "$2" ] || cd "$2" || exit 1;
                       exec /bin/sh -c "$1"' sh CMD CWD </dev/null;
    printf '\\nT>%d\\n' $?; printf '\\nT>\\n' >&3

With `setsid` the command leads its own process group, whose id (its pid) comes first on
stderr. stdout is what lies between `T<\\n` and `\\nT>STATUS\\n`, stderr between `T<\\n` (less
the pid line) and `\\nT>\\n`. The newline before each end marker is ours, so output without a
trailing newline stays so; marker-like output cannot match a fresh random token. Stray output
of an earlier command's background processes arriving before the start markers is dropped.
On timeout another channel TERMs the group, waits up to procs.KILL_GRACE for it to go, then KILLs it;
the shell is reused if its end markers then arrive, else closed (a new one opens on demand).
A command killed by signal N reports 128+N, as `$?` does.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shlex

import asyncssh

from .. import aio
from ..errors import ConnectionLost, TransportError
from .procs import kill_script
from .transport import ENV_NAME

DRAIN = 2.0  # seconds to wait for a shell's end markers (or a pid) before giving the shell up
PRELUDE = b"exec 3>&2 2>/dev/null; S=$(command -v setsid)\n"
class _Session(asyncssh.SSHClientSession):
    def __init__(self) -> None:
        self.bufs = (bytearray(), bytearray())  # stdout, stderr
        self.wake = asyncio.Event()
        self.closed = False

    def data_received(self, data: bytes, datatype) -> None:
        self.bufs[datatype == asyncssh.EXTENDED_DATA_STDERR].extend(data)
        self.wake.set()

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.wake.set()


class Shell:
    """One persistent `/bin/sh` on a session channel; runs one command at a time."""

    def __init__(self, chan, session: _Session):
        self.chan, self.s = chan, session
        self.pid: int | None = None

    @classmethod
    async def start(cls, conn: asyncssh.SSHClientConnection) -> Shell:
        chan, session = await conn.create_session(_Session, "/bin/sh", encoding=None)
        chan.write(PRELUDE)
        return cls(chan, session)

    @property
    def alive(self) -> bool:
        return not self.s.closed

    def close(self) -> None:
        self.s.closed = True
        self.chan.close()

    def _frame(self, cmd: str, env: dict[str, str], cwd: str | None) -> bytes:
        t = self.tok
        inner = f'exec 2>&3 3>&-; printf "{t}#%s\\n" $$ >&2; [ -z "$2" ] || cd "$2" || exit 1; exec /bin/sh -c "$1"'
        assigns = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
        return (f"printf '{t}<\\n'; printf '{t}<\\n' >&3; {assigns}$S /bin/sh -c {shlex.quote(inner)} sh "
                f"{shlex.quote(cmd)} {shlex.quote(cwd or '')} </dev/null; "
                f"printf '\\n{t}>%d\\n' $?; printf '\\n{t}>\\n' >&3\n").encode()

    def _scan(self) -> bool:
        """Update what is known of the running command; True once both end markers arrived."""
        t, (out, err) = self.tok.encode(), self.s.bufs
        if self.out_at is None and (i := out.find(t + b"<\n")) >= 0:
            self.out_at = self.seen[0] = i + len(t) + 2
        if self.err_at is None and (i := err.find(t + b"<\n")) >= 0:
            self.err_at = self.seen[1] = self.seen[2] = i + len(t) + 2
        if self.err_at is not None and self.pid is None:
            if m := self.pid_re.search(err, self.seen[2]):
                self.pid, self.pid_span = int(m[1]), m.span()
            self.seen[2] = max(self.err_at, len(err) - len(t) - 24)
        if self.out_at is not None and self.status is None:
            if m := self.end_re.search(out, self.seen[0]):
                self.status, self.out_end = int(m[1]), m.start()
            self.seen[0] = max(self.out_at, len(out) - len(t) - 24)
        if self.err_at is not None and self.err_end is None:
            if (i := err.find(b"\n" + t + b">\n", self.seen[1])) >= 0:
                self.err_end = i
            self.seen[1] = max(self.err_at, len(err) - len(t) - 4)
        return self.status is not None and self.err_end is not None

    async def _until(self, cond) -> None:
        while not cond():
            if self.s.closed:
                raise ConnectionError("shell channel closed")
            self.s.wake.clear()
            await self.s.wake.wait()

    def output(self) -> tuple[str, str]:
        out, err = self.s.bufs
        o = out[self.out_at:self.out_end] if self.out_at is not None else b""
        e = bytearray(err[self.err_at:self.err_end]) if self.err_at is not None else bytearray()
        if self.pid is not None and self.pid_span[1] <= (self.err_end or len(err)):
            del e[self.pid_span[0] - self.err_at:self.pid_span[1] - self.err_at]
        return o.decode("utf-8", "replace"), e.decode("utf-8", "replace")

    async def run(self, cmd: str, env: dict[str, str], cwd: str | None, timeout: float | None, kill):
        """(returncode, stdout, stderr, timed_out); `kill(pid)` ends a timed-out command's group."""
        self.tok, self.pid = secrets.token_hex(12), None
        self.out_at = self.err_at = self.status = self.out_end = self.err_end = None
        self.seen = [0, 0, 0]  # where the next search for the stdout end, stderr end, pid starts
        t = re.escape(self.tok.encode())
        self.pid_re, self.end_re = re.compile(t + rb"#(\d+)\n"), re.compile(rb"\n" + t + rb">(\d+)\n")
        for b in self.s.bufs:
            b.clear()
        self.chan.write(self._frame(cmd, env, cwd))
        try:
            await aio.wait_for(self._until(self._scan), timeout)
            return (self.status, *self.output(), False)
        except asyncio.TimeoutError:
            pass
        try:  # timed out: kill its process group, then see whether the shell comes back
            await aio.wait_for(self._until(lambda: self._scan() or self.pid is not None), DRAIN)
            if self.pid is not None:
                await kill(self.pid)
            await aio.wait_for(self._until(self._scan), DRAIN)
        except asyncio.TimeoutError:
            self.close()
        return (None, *self.output(), True)


class ShellPool:
    """Up to `size` shells on one connection, opened on demand; a `run` waits for a free one."""

    def __init__(self, conn: asyncssh.SSHClientConnection, label: str, size: int = 4):
        self.conn, self.label = conn, label
        self.idle: list[Shell] = []
        self.sem = asyncio.Semaphore(size)
        self.tasks: set[asyncio.Task] = set()

    async def kill(self, pid: int) -> None:
        try:
            await self.conn.run(kill_script(pid), check=False)
        except (OSError, asyncssh.Error):
            pass  # the connection is gone; so is what it ran

    async def run(self, cmd: str, *, env: dict[str, str] | None = None, cwd: str | None = None,
                  timeout: float | None = None) -> tuple:
        for k in env or {}:
            if not ENV_NAME.match(k):
                raise ValueError(f"environment variable name {k!r} is not a valid shell name")
        async with self.sem:
            shell = None
            while self.idle and not (shell := self.idle.pop()).alive:
                shell = None
            if shell is None:
                try:
                    shell = await Shell.start(self.conn)
                except (OSError, asyncssh.Error) as e:
                    if gone(self.conn, e):
                        raise ConnectionLost(f"{self.label}: the connection dropped: {_reason(e)}") from None
                    raise TransportError(f"{self.label}: cannot open a shell channel: {_reason(e)} "
                                         "(check the connection and sshd's MaxSessions)") from None
            try:
                result = await shell.run(cmd, env or {}, cwd, timeout, self.kill)
            except ConnectionError:
                shell.close()
                raise ConnectionLost(f"{self.label}: the shell channel closed while running {cmd[:200]!r} "
                                     "(the connection dropped or the shell was killed)") from None
            except BaseException:  # cancelled: leave nothing running
                shell.close()
                if shell.pid is not None:
                    task = asyncio.get_running_loop().create_task(self.kill(shell.pid))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
                raise
            if shell.alive:
                self.idle.append(shell)
            return result

    def close(self) -> None:
        for shell in self.idle:
            shell.close()
        self.idle.clear()


def _reason(e: BaseException) -> str:
    return " ".join((getattr(e, "reason", "") or str(e) or type(e).__name__).split())


def gone(conn: asyncssh.SSHClientConnection, e: BaseException) -> bool:
    """Whether `e` means the connection is gone, not the server refusing what was asked: closed, lost,
    reset — or a channel (a shell's, SFTP's) asked for on a connection whose transport already went,
    before asyncssh marks it closed (`ChannelOpenError(OPEN_CONNECT_FAILED, 'SSH connection closed')`,
    asyncssh connection.py add_channel and channel.py _cleanup: an sshd restarted at that moment)."""
    return conn.is_closed() or isinstance(e, (asyncssh.ConnectionLost, asyncssh.DisconnectError, BrokenPipeError,
                                              ConnectionResetError)) \
        or (isinstance(e, asyncssh.ChannelOpenError) and e.code == asyncssh.OPEN_CONNECT_FAILED
            and e.reason == "SSH connection closed")
