"""The Transport contract over paramiko, which is synchronous: each call runs in a worker thread
(asyncio.to_thread) on one SSHClient per host, plus one per ProxyJump hop.

Commands go to a small pool of persistent `/bin/sh` channels (an exec channel costs an sshd fork
and a round trip). A command is one line written to an idle shell, framed by a random token T:

    printf 'T<\\n'; printf 'T<\\n' >&2;
    $S /bin/sh -c 'printf "TP%d\\n" $$ >&2; cd CWD || exit 1; export K=V; exec /bin/sh -c CMD' </dev/null
    _hx=$?; printf '\\nT%d\\n' $_hx; printf '\\nT%d\\n' $_hx >&2

`$S` is `setsid` (found once per shell), so the command leads its own process group and announces
its pid first on stderr; the shell's own state is never touched. Each stream is what lies between
its start and end markers; exactly the newline printf adds before the end marker is stripped.
On timeout (or cancellation) another channel TERMs the group and KILLs it after KILL_GRACE; the
shell is reused if it then prints its end markers, else closed (a new one opens when needed).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import posixpath
import re
import secrets
import select
import shlex
import socket
import stat as st
import threading
import time

import paramiko

from ..errors import BadInput, ConnectionLost, HostKeyError, TransportError
from . import hostkeys
from .procs import KILL_GRACE, kill_script
from .transport import ENV_NAME, CommandResult, FileStat, HostSpec, checked

POOL_IDLE, MAX_CHANNELS = 8, 8  # shells kept open; concurrent commands (sshd MaxSessions is 10)
_NET = (OSError, EOFError, paramiko.SSHException)
SFTP_WINDOW, SFTP_PACKET = 64 << 20, 256 << 10  # the defaults (2 MiB, 32 KiB) read a backlog at ~20 MB/s
BULK = 1 << 20  # reads larger than this (or to the end of the file) are streamed by a pooled shell
MISSING = 44  # the exit code of a bulk read of a file that does not exist (+1: of a directory)



def _line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


class _QuickAck(socket.socket):
    """ACK every read at once. sshd leaves Nagle on a connection until a session runs there, so
    through a ProxyJump hop each reply sent in pieces waited ~40 ms for our delayed ACK."""

    def recv(self, *args):
        data = super().recv(*args)
        if hasattr(socket, "TCP_QUICKACK"):  # Linux
            self.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        return data


def _tcp(host: str, port: int, timeout: float, keepalive: float) -> socket.socket:
    sock = _QuickAck(fileno=socket.create_connection((host, port), timeout).detach())
    sock.settimeout(timeout)
    if hasattr(socket, "TCP_USER_TIMEOUT"):  # a cut network fails the connection in 3 keepalives, not ~15 min
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(keepalive * 3 * 1000))
    return sock


class _Reject(paramiko.RejectPolicy):
    """A key known_hosts does not list: one line with its fingerprint and `harness trust`."""

    def __init__(self, spec: HostSpec, alias: str, host: str, port: int, known: str):
        self.args = spec, alias, host, port, known

    def missing_host_key(self, client, hostname, key):
        raise _key_error(*self.args, key)


def _key_error(spec: HostSpec, alias: str, host: str, port: int, known: str, key) -> HostKeyError:
    kind, blob = key.get_name(), key.asbytes()
    status = hostkeys.check(known, host, host, port, kind, blob)  # UNKNOWN, CHANGED or REVOKED here
    return hostkeys.host_key_error(status, spec, alias, host, port, kind, blob, known)


def _trust(client: paramiko.SSHClient, host: str, port: int, known: str) -> None:
    """Give paramiko the host's trusted keys (so it asks for their type); known_hosts is parsed as
    the asyncssh transport and `harness trust` parse it: hashed names, patterns, @revoked."""
    trusted, revoked = hostkeys.known_keys(known, host, host, port)
    for kind, blob in trusted:
        if (kind, blob) not in revoked:
            with contextlib.suppress(paramiko.SSHException, ValueError):
                key = paramiko.PKey.from_type_string(kind, blob)
                client.get_host_keys().add(hostkeys.host_pattern(host, port), kind, key)


def _dial(spec: HostSpec, config: paramiko.SSHConfig, token: str, via, clients: list, top: bool):
    """Connect to `token` ([user@]alias[:port]) through `via` (an SSHClient) or its ProxyJump."""
    user, _, alias = token.rpartition("@")
    alias, _, port = alias.partition(":")
    c, key = config.lookup(alias), spec.key if top else None
    user, port = (spec.user or user, spec.port or port) if top else (user, port)
    host, port = c.get("hostname", alias), int(port or c.get("port", 22))
    user = user or c.get("user") or getpass.getuser()
    only = bool(key) or c.get("identitiesonly", "no").lower() == "yes"
    keys = [os.path.expanduser(key)] if key else [k for k in c.get("identityfile", []) if os.path.exists(k)]
    known = os.path.expanduser(spec.known_hosts or c.get("userknownhostsfile", "~/.ssh/known_hosts").split()[0])
    cfg, where = spec.ssh_config or "~/.ssh/config", f"{alias} ({host}:{port})"
    if key and not os.path.exists(keys[0]):
        raise TransportError(f"cannot log in to {where}: key file {key} does not exist; check the path")
    if via is None and c.get("proxyjump", "none").lower() != "none":
        for jump in c["proxyjump"].split(","):
            via = _dial(spec, config, jump.strip(), via, clients, False)
    try:
        client, wait = paramiko.SSHClient(), spec.connect_timeout
        _trust(client, host, port, known)
        client.set_missing_host_key_policy(_Reject(spec, alias, host, port, known))
        clients.append(client)
        sock = (via.get_transport().open_channel("direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=wait)
                if via else _tcp(host, port, wait, spec.keepalive))
        client.connect(host, port, username=user, key_filename=keys, allow_agent=not only, look_for_keys=not only,
                       sock=sock, timeout=wait, banner_timeout=wait, auth_timeout=wait)
    except paramiko.BadHostKeyException as e:
        raise _key_error(spec, alias, host, port, known, e.key) from None
    except paramiko.AuthenticationException as e:
        raise TransportError(f"cannot log in to {where} as {user}: {_line(e)}; check User and IdentityFile "
                             f"({', '.join(keys) or 'agent/default keys'}) in {cfg} and the remote "
                             f"authorized_keys") from None
    except _NET as e:
        raise ConnectionLost(f"cannot connect to {where}{' through its ProxyJump' if via else ''}: {_line(e)}; "
                             f"check that the host is up and its HostName, Port and ProxyJump in {cfg}") from None
    threading.Thread(target=_keepalive, args=(client.get_transport(), spec.keepalive), daemon=True,
                     name=f"harness-keepalive-{alias}").start()
    return client


def _keepalive(transport: paramiko.Transport, interval: float, misses: int = 3) -> None:
    """asyncssh's keepalive for paramiko, whose own (`set_keepalive`) never waits for an answer:
    every `interval` s a `keepalive@openssh.com` request that wants a reply (sshd answers it with
    a failure, which is an answer). Traffic keeps an idle NAT mapping open; no answer within
    `misses` intervals closes the transport, so every call fails as a lost connection at once
    instead of hanging on a dead link."""
    while transport.is_active():
        time.sleep(interval)
        answered = threading.Event()

        def ask():
            with contextlib.suppress(Exception):
                transport.global_request("keepalive@openssh.com", wait=True)
            answered.set()
        threading.Thread(target=ask, daemon=True).start()
        if not answered.wait(interval * misses) and transport.is_active():
            transport.close()
            return


class _Frame:
    """One framed command's stdout/stderr (from its start markers on: late output of an earlier
    command's background processes is dropped), its pid and the two end markers' statuses."""

    def __init__(self, tok: str):
        t, self.n = tok.encode(), len(tok) + 24
        self.bufs, self.begun, self.codes, self.pid = [bytearray(), bytearray()], [False, False], [None, None], None
        self.begin, self.end, self.pid_re = (re.compile(t + rb"<\n"), re.compile(rb"\n" + t + rb"(\d+)\n"),
                                             re.compile(t + rb"P(\d+)\n"))

    def feed(self, i: int, data: bytes) -> None:
        buf = self.bufs[i]
        start = max(0, len(buf) - self.n)  # a marker may straddle two reads
        buf += data
        if not self.begun[i]:
            if not (m := self.begin.search(buf, start)):
                return
            del buf[:m.end()]
            self.begun[i], start = True, 0
        if i == 1 and self.pid is None and (m := self.pid_re.search(buf, start)):
            self.pid = int(m[1])
            del buf[m.start():m.end()]
        if self.codes[i] is None and (m := self.end.search(buf, start)):
            self.codes[i] = int(m[1])
            del buf[m.start():]

    def done(self) -> bool:
        return None not in self.codes


class ParamikoTransport:
    name = "paramiko"

    def __init__(self, spec: HostSpec, clients: list):
        self.spec, self._clients, self._ssh = spec, clients, clients[-1]
        self._idle: list = []
        self._lock, self._sftp_lock, self._sftp = threading.Lock(), threading.Lock(), None
        self._slots = asyncio.Semaphore(MAX_CHANNELS)
        self._closed = False

    @classmethod
    async def open(cls, spec: HostSpec) -> "ParamikoTransport":
        path = os.path.expanduser(spec.ssh_config or "~/.ssh/config")
        config = paramiko.SSHConfig.from_path(path) if os.path.exists(path) else paramiko.SSHConfig()
        clients: list = []
        try:
            await asyncio.to_thread(_dial, spec, config, spec.host, None, clients, True)
            t = cls(spec, clients)
            try:
                await asyncio.to_thread(lambda: t._give(t._shell()))  # warm one shell
            except _NET as e:
                raise ConnectionLost(f"{spec.host}: the connection dropped before a shell opened: {_line(e)}") from None
            return t
        except BaseException:
            for c in reversed(clients):
                c.close()
            raise

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        code, out, err = await self._framed(cmd, timeout, env, cwd)
        return checked(CommandResult(cmd, code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                                     code is None), check)

    async def _framed(self, cmd: str, timeout: float | None, env: dict[str, str] | None = None,
                      cwd: str | None = None) -> tuple[int | None, bytes, bytes]:
        """Run `cmd` in a pooled shell: its exit code (None when it timed out), stdout, stderr."""
        tok, stop = "__hx" + secrets.token_hex(8), threading.Event()
        inner = f'printf "{tok}P%d\\n" $$ >&2; ' + (f"cd {shlex.quote(cwd)} || exit 1; " if cwd else "")
        for k, v in (env or {}).items():
            if not ENV_NAME.match(k):
                raise BadInput(f"environment variable name {k!r} is invalid; use letters, digits and _")
            inner += f"export {k}={shlex.quote(str(v))}; "
        line = (f"printf '{tok}<\\n'; printf '{tok}<\\n' >&2; "
                f"$S /bin/sh -c {shlex.quote(inner + 'exec /bin/sh -c ' + shlex.quote(cmd))} </dev/null; "
                f"_hx=$?; printf '\\n{tok}%d\\n' $_hx; printf '\\n{tok}%d\\n' $_hx >&2\n")
        async with self._slots:
            try:
                return await asyncio.to_thread(self._run_sync, cmd, line, _Frame(tok), timeout, stop)
            except asyncio.CancelledError:
                stop.set()  # the worker kills the command and frees the shell
                raise

    def _lost(self, e: BaseException) -> bool:
        """Whether `e` means the connection is gone (not a refused channel or a file error)."""
        t = self._ssh.get_transport()
        return t is None or not t.is_active() or isinstance(e, (EOFError, ConnectionError, socket.timeout))

    def _shell(self):
        with self._lock:
            while self._idle:
                ch = self._idle.pop()
                if not (ch.closed or ch.eof_received):
                    return ch
                ch.close()
        ch = self._ssh.get_transport().open_session(window_size=SFTP_WINDOW, max_packet_size=SFTP_PACKET,
                                                    timeout=self.spec.connect_timeout)
        ch.exec_command("exec /bin/sh")
        ch.sendall(b"S=$(command -v setsid 2>/dev/null)\n")
        return ch

    def _give(self, ch) -> None:
        with self._lock:
            if len(self._idle) < POOL_IDLE and not self._closed:
                return self._idle.append(ch)
        ch.close()

    def _run_sync(self, cmd: str, line: str, f: _Frame, timeout: float | None,
                  stop) -> tuple[int | None, bytes, bytes]:
        ch = timed_out = None
        try:
            ch = self._shell()
            ch.sendall(line.encode())
            timed_out = not self._pump(ch, f, None if timeout is None else time.monotonic() + timeout, stop)
            if timed_out:
                if f.pid is None:  # announced first thing; may still be on its way
                    self._pump(ch, f, time.monotonic() + 2, None, lambda: f.pid is not None)
                if f.pid is not None:
                    with self._ssh.get_transport().open_session(timeout=self.spec.connect_timeout) as kc:
                        kc.exec_command(kill_script(f.pid))
                        kc.status_event.wait(KILL_GRACE + 10)
            if self._pump(ch, f, time.monotonic() + 1, None):
                self._give(ch)
            else:
                ch.close()
        except _NET as e:
            if ch is not None:
                ch.close()
            if self._lost(e):
                raise ConnectionLost(f"{self.spec.host}: the connection dropped while running {cmd[:200]!r}: "
                                     f"{_line(e)}") from None
            raise TransportError(f"{self.spec.host}: cannot run {cmd!r}: {_line(e)}; check the connection "
                                 f"(and sshd's MaxSessions if channels are refused), then retry") from None
        return None if timed_out else f.codes[0], bytes(f.bufs[0]), bytes(f.bufs[1])

    @staticmethod
    def _pump(ch, f: _Frame, deadline: float | None, stop, until=None) -> bool:
        """Read both streams until `until()` (default: both markers seen), the deadline or `stop`."""
        until = until or f.done
        while not until():
            left = None if deadline is None else deadline - time.monotonic()
            if (left is not None and left <= 0) or (stop is not None and stop.is_set()):
                return False
            if ch.recv_ready():
                f.feed(0, ch.recv(1 << 20))
            elif ch.recv_stderr_ready():
                f.feed(1, ch.recv_stderr(1 << 16))
            elif ch.eof_received or ch.closed:
                raise EOFError("the remote shell exited")
            else:  # data wakes select at once; the 0.25 s cap only bounds how late `stop` is seen
                select.select([ch], [], [], 0.25 if left is None else min(left, 0.25))
        return True

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        if size is not None and size <= BULK:
            return await asyncio.to_thread(self._file, self._read, path, offset, size)
        return await self._bulk(path, offset, size)

    async def _bulk(self, path: str, offset: int, size: int | None) -> bytes:
        """A large read (a backlog after a reconnect) streamed by `tail` through a pooled shell:
        paramiko's SFTP parses every 32 KiB reply in Python (33 MB/s on loopback, prefetched), a
        shell's data arrives in wide packets; a new exec channel would cost sshd's session set-up."""
        q = shlex.quote(path)
        cmd = (f"[ -e {q} ] || exit {MISSING}; [ -d {q} ] && exit {MISSING + 1}; tail -c +{offset + 1} {q}"
               + (f" | head -c {size}" if size else ""))
        code, out, err = await self._framed(cmd, None)
        if code in (MISSING, MISSING + 1):
            raise (FileNotFoundError if code == MISSING else IsADirectoryError)(path)
        if code or err.strip():
            raise TransportError(f"{self.spec.host}: read {path} failed: {_line(err.decode('utf-8', 'replace'))} "
                                 f"(exit {code}); check the path and its permissions")
        return out

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        await asyncio.to_thread(self._file, self._write, path, bytes(data), mode)

    async def stat(self, path: str) -> FileStat | None:
        return await asyncio.to_thread(self._file, self._stat, path)

    def _file(self, op, path: str, *args):
        with self._sftp_lock:  # paramiko's SFTPClient loses replies when threads share it
            try:
                if self._sftp is None:
                    self._sftp = paramiko.SFTPClient.from_transport(  # a wide window: reads of a backlog at speed
                        self._ssh.get_transport(), window_size=SFTP_WINDOW, max_packet_size=SFTP_PACKET)
                return op(self._sftp, path, *args)
            except FileNotFoundError:
                raise
            except _NET as e:
                if self._lost(e):
                    self._sftp = None
                    raise ConnectionLost(f"{self.spec.host}: {op.__name__[1:]} {path}: the connection dropped "
                                         f"({_line(e)})") from None
                raise TransportError(f"{self.spec.host}: {op.__name__[1:]} {path} failed: {_line(e)}; "
                                     f"check the path, its permissions and the connection") from None

    @staticmethod
    def _read(sftp, path: str, offset: int, size: int) -> bytes:
        with sftp.open(path, "rb") as fh:
            fh.seek(offset)
            if size > 1 << 18:  # request all chunks at once
                size = min(size, max(0, fh.stat().st_size - offset))
                if size > 1 << 18:
                    fh.prefetch(offset + size)
            return fh.read(size)

    @staticmethod
    def _write(sftp, path: str, data: bytes, mode: int | None) -> None:
        tmp = posixpath.join(posixpath.dirname(path), f".{posixpath.basename(path)}.{secrets.token_hex(4)}.tmp")
        if mode is None:  # a replaced file keeps its permissions
            with contextlib.suppress(FileNotFoundError):
                mode = st.S_IMODE(sftp.stat(path).st_mode)
        try:
            with sftp.open(tmp, "wb") as fh:
                fh.set_pipelined(True)
                fh.write(data)
            if mode is not None:
                sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, path)
        except BaseException:
            with contextlib.suppress(*_NET):
                sftp.remove(tmp)
            raise

    @staticmethod
    def _stat(sftp, path: str) -> FileStat | None:
        with contextlib.suppress(FileNotFoundError):
            a = sftp.stat(path)
            return FileStat(a.st_size or 0, float(a.st_mtime or 0), a.st_mode or 0, st.S_ISDIR(a.st_mode or 0))
        return None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            idle, self._idle = self._idle, []
        await asyncio.to_thread(lambda: [x.close() for x in [*idle, self._sftp, *reversed(self._clients)] if x])
