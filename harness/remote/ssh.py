"""AsyncSSHTransport: the Transport contract over one asyncssh connection per host.

The host is resolved through the ssh config (Host alias, HostName, User, Port, IdentityFile,
UserKnownHostsFile, ProxyJump); explicit HostSpec fields win. ProxyJump hops are dialled here,
each checked against known_hosts like the host itself. Host keys are checked strictly: on a
failure the offered key is fetched and compared with known_hosts to say whether it is unknown
(`harness trust HOST`) or CHANGED (refused) — see hostkeys.py. Commands go over a pool of
persistent shells (shellpool.py; `spec.extra["shells"]`, default 4), files over one SFTP client.

    t = await AsyncSSHTransport.open(HostSpec("gpu1"))   # or transport.connect(spec)
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import shlex
import socket
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR

import asyncssh

from .. import aio
from ..errors import ConnectionLost, TransportError
from . import hostkeys
from .shellpool import ShellPool, _reason, gone
from .transport import CommandResult, FileStat, HostSpec, checked

KEEPALIVE_MISSES = 3  # keepalives unanswered before the connection counts as dead
CHUNK = 1 << 16  # bytes asked for at once when reading past the size stat gave


@dataclass
class Target:
    """One host as the ssh config resolves it."""

    alias: str
    host: str
    port: int
    user: str | None
    known_hosts: str
    key_host: str  # the name known_hosts lists it under (HostKeyAlias, else HostName)
    config: list[str]
    jumps: list[str] = field(default_factory=list)  # ProxyJump hops, [user@]host[:port]


def _config_paths(spec: HostSpec) -> list[str]:
    if spec.ssh_config:
        if not Path(spec.ssh_config).is_file():
            raise TransportError(f"ssh config {spec.ssh_config} not found — check the path given for {spec.host}")
        return [spec.ssh_config]
    default = Path("~/.ssh/config").expanduser()
    return [str(default)] if default.is_file() else []


def resolve(spec: HostSpec) -> Target:
    """Where `spec` leads according to its ssh config; explicit fields win."""
    paths = _config_paths(spec)
    try:
        o = asyncssh.SSHClientConnectionOptions(config=paths, host=spec.host, port=spec.port or (),
                                                username=spec.user or (), client_keys=None)
    except (OSError, ValueError, asyncssh.Error) as e:
        raise TransportError(f"cannot read ssh config for {spec.host} ({', '.join(paths) or 'none'}): "
                             f"{_reason(e)}") from None
    known = spec.known_hosts or (o.known_hosts[0] if o.known_hosts else "~/.ssh/known_hosts")  # UserKnownHostsFile
    jumps = [] if not o.tunnel or str(o.tunnel).lower() == "none" else str(o.tunnel).split(",")
    return Target(spec.host, o.host, o.port, spec.user or o.username, str(Path(known).expanduser()),
                  o.host_key_alias or o.host, paths, jumps)


def _hop_spec(spec: HostSpec, hop: str) -> HostSpec:
    user, _, hostport = hop.rpartition("@")
    host, _, port = hostport.partition(":")
    return HostSpec(host, user=user or None, port=int(port) if port else None, known_hosts=spec.known_hosts,
                    ssh_config=spec.ssh_config, connect_timeout=spec.connect_timeout, keepalive=spec.keepalive)


def _known_hosts_arg(path: str):
    return path if Path(path).is_file() else asyncssh.SSHKnownHosts()  # absent: nothing is trusted


async def tunnel_to(spec: HostSpec, t: Target, nodelay: bool = True) -> tuple[object | None, list]:
    """Open `t`'s ProxyJump hops; (the last hop's connection or None, all hop connections).

    With `nodelay` one `true` runs on each hop: sshd sets TCP_NODELAY on a connection only once a
    session runs there, and without it each command through the hop waits ~40 ms (Nagle against
    the client's delayed ACK) for its several small response packets."""
    conns: list = []
    try:
        for i, hop in enumerate(t.jumps):
            conn, more = await dial(_hop_spec(spec, hop), tunnel=conns[-1] if conns else None, follow=i == 0)
            conns += [*more, conn]
            if nodelay:
                with contextlib.suppress(Exception):  # a hop that runs no commands still forwards
                    await aio.wait_for(conn.run("true"), 5)
    except BaseException:
        close_all(conns)
        raise
    return (conns[-1] if conns else None), conns


def close_all(conns: list) -> None:
    for c in reversed(conns):
        c.close()


def connect_error(e: BaseException, t: Target) -> TransportError:
    """One line for a failed connection; a ConnectionLost (weather: retried) unless it is the
    credentials or the config that are wrong."""
    where = f"{t.alias} ({t.user + '@' if t.user else ''}{t.host}:{t.port})"
    if isinstance(e, asyncssh.PermissionDenied):
        return TransportError(f"authentication failed for {where} — check User and IdentityFile (or the "
                              "key given), and that its public key is in the remote authorized_keys")
    if isinstance(e, (FileNotFoundError, asyncssh.KeyImportError)):
        return TransportError(f"cannot load the key for {where}: {_reason(e)} — check IdentityFile")
    if isinstance(e, ConnectionRefusedError):
        return ConnectionLost(f"cannot connect to {where}: connection refused — check that sshd runs "
                              "there and that Port/HostName are right")
    if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
        return ConnectionLost(f"cannot connect to {where}: timed out — check that the host is up and "
                              "reachable (network, VPN, firewall, ProxyJump) or raise connect_timeout")
    if isinstance(e, socket.gaierror):
        return ConnectionLost(f"cannot resolve {t.host} for {t.alias} — check HostName in the ssh config")
    if isinstance(e, (asyncssh.ConnectionLost, ConnectionResetError, asyncssh.DisconnectError)):
        return ConnectionLost(f"cannot connect to {where}: the connection closed during the handshake — "
                              "check that an SSH server listens there and accepts you (its logs, AllowUsers)")
    if isinstance(e, OSError):
        return ConnectionLost(f"cannot connect to {where}: {_reason(e)} — check the host, port and network")
    return TransportError(f"cannot connect to {where}: {_reason(e)} — check the host, port and ssh config")


def dead_link_timeout(conn, keepalive: float) -> None:
    """Let the kernel give up on a connection whose sent bytes stay unacknowledged for
    KEEPALIVE_MISSES keepalive intervals (TCP_USER_TIMEOUT): a cut network then fails the
    connection in a minute, not after TCP's ~15 minutes of retransmissions."""
    sock = conn.get_extra_info("socket")
    if sock is not None and hasattr(socket, "TCP_USER_TIMEOUT"):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(keepalive * KEEPALIVE_MISSES * 1000))


async def dial(spec: HostSpec, *, tunnel=None, follow: bool = True) -> tuple[asyncssh.SSHClientConnection, list]:
    """Connect to `spec` (through `tunnel`, else its ProxyJump hops when `follow`):
    (connection, hop connections to close after it)."""
    t = resolve(spec)
    hops: list = []
    if tunnel is None and follow:
        tunnel, hops = await tunnel_to(spec, t)
    try:
        conn = await asyncssh.connect(
            spec.host, spec.port or (), tunnel=tunnel, config=t.config, username=t.user or (),
            client_keys=[spec.key] if spec.key else (), known_hosts=_known_hosts_arg(t.known_hosts),
            connect_timeout=spec.connect_timeout, keepalive_interval=spec.keepalive,
            keepalive_count_max=KEEPALIVE_MISSES)
    except (asyncssh.HostKeyNotVerifiable, asyncssh.KeyExchangeFailed) as e:
        try:
            raise await hostkeys.diagnose(e, spec, t, tunnel) from None
        finally:
            close_all(hops)
    except (OSError, asyncio.TimeoutError, asyncssh.Error, ValueError) as e:
        close_all(hops)
        raise connect_error(e, t) from None
    dead_link_timeout(conn, spec.keepalive)
    return conn, hops


class AsyncSSHTransport:
    """One host over asyncssh: a shell pool for commands, one SFTP client for files."""

    name = "asyncssh"

    def __init__(self, spec: HostSpec, conn: asyncssh.SSHClientConnection, hops: list):
        self.spec, self.conn, self.hops = spec, conn, hops
        self.label = spec.host
        self.pool = ShellPool(conn, self.label, int(spec.extra.get("shells", 4)))
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_lock = asyncio.Lock()

    @classmethod
    async def open(cls, spec: HostSpec) -> AsyncSSHTransport:
        conn, hops = await dial(spec)
        return cls(spec, conn, hops)

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        rc, out, err, timed_out = await self.pool.run(cmd, env=env, cwd=cwd, timeout=timeout)
        return checked(CommandResult(cmd, rc, out, err, timed_out), check)

    async def sftp(self) -> asyncssh.SFTPClient:
        if self._sftp is not None:
            return self._sftp
        async with self._sftp_lock:
            if self._sftp is None:
                try:
                    self._sftp = await self.conn.start_sftp_client()
                except (OSError, asyncssh.Error) as e:
                    if self.lost(e):
                        raise ConnectionLost(f"{self.label}: the connection dropped: {_reason(e)}") from None
                    raise TransportError(f"{self.label}: cannot start SFTP: {_reason(e)} "
                                         "(check `Subsystem sftp` in the remote sshd_config)") from None
            return self._sftp

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        sftp = await self.sftp()
        try:
            async with sftp.open(path, "rb") as f:
                if size is not None:
                    return await f.read(size, offset) if size > 0 else b""
                end = (await f.stat()).size or 0
                data = await f.read(end - offset, offset) if end > offset else b""  # in parallel
                while more := await f.read(CHUNK, offset + len(data)):  # it grew, or is in /proc
                    data += more
                return data
        except (OSError, asyncssh.Error) as e:
            raise await self._error(e, "read", path) from None

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        sftp = await self.sftp()
        parent, name = os.path.split(path)
        tmp = os.path.join(parent, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            if mode is None and (old := await self.stat(path)) is not None:
                mode = old.mode & 0o7777  # keep the mode of the file being replaced
            attrs = asyncssh.SFTPAttrs(permissions=mode) if mode is not None else asyncssh.SFTPAttrs()
            async with sftp.open(tmp, "xb", attrs) as f:
                await f.write(data)
                if mode is not None:
                    await f.chmod(mode)  # the open's permissions pass through the umask
                with contextlib.suppress(asyncssh.SFTPOpUnsupported):
                    await f.fsync()
            try:
                await sftp.posix_rename(tmp, path)
            except asyncssh.SFTPOpUnsupported:
                await self.run(f"mv -f -- {shlex.quote(tmp)} {shlex.quote(path)}", check=True)
        except BaseException as e:
            with contextlib.suppress(Exception):
                await sftp.remove(tmp)
            if isinstance(e, (OSError, asyncssh.Error)):
                raise await self._error(e, "write", path) from None
            raise

    async def stat(self, path: str) -> FileStat | None:
        sftp = await self.sftp()
        try:
            a = await sftp.stat(path)
        except asyncssh.SFTPNoSuchFile:
            return None
        except (OSError, asyncssh.Error) as e:
            raise await self._error(e, "stat", path) from None
        return FileStat(a.size or 0, float(a.mtime or 0), a.permissions or 0, S_ISDIR(a.permissions or 0))

    def lost(self, e: BaseException) -> bool:
        """Whether `e` means the connection is gone (rather than the file or the server refusing)."""
        return gone(self.conn, e)

    async def _error(self, e: BaseException, op: str, path: str) -> Exception:
        if self.lost(e):
            return ConnectionLost(f"{self.label}: {op} {path}: the connection dropped ({_reason(e)})")
        if isinstance(e, asyncssh.SFTPFailure):  # SFTP v3 says only "Failure" for a directory
            with contextlib.suppress(Exception):
                if (st := await self.stat(path)) and st.is_dir:
                    return IsADirectoryError(errno.EISDIR, "Is a directory", path)
        if isinstance(e, asyncssh.SFTPNoSuchFile):
            return FileNotFoundError(errno.ENOENT, _reason(e), path)
        if isinstance(e, asyncssh.SFTPPermissionDenied):
            return PermissionError(errno.EACCES, _reason(e), path)
        return TransportError(f"{self.label}: {op} {path} failed: {_reason(e)}")

    async def close(self) -> None:
        if self.pool.tasks:  # kills of cancelled commands still under way
            await asyncio.wait(self.pool.tasks, timeout=10)
        self.pool.close()
        if self._sftp is not None:
            self._sftp.exit()
            self._sftp = None
        for c in [self.conn, *reversed(self.hops)]:
            c.close()
            with contextlib.suppress(Exception):
                await c.wait_closed()

