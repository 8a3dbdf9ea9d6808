"""The Transport contract: one object per host, subprocess-like commands, files by path.

Every implementation (asyncssh, paramiko, local) passes the same contract test suite
(tests/test_transport_contract.py). Methods are coroutines; a synchronous library runs in a
worker thread behind the same interface.

    t = await connect(HostSpec(host="gpu1"))        # ~/.ssh/config aliases work
    r = await t.run("nvidia-smi -L", timeout=10)    # CommandResult; check=True raises
    data = await t.read("/w/.harness/runs/r1/log", offset=4096)
    await t.write("/w/patch.yaml", b"...")          # atomic: temp file + rename
    await t.close()
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..errors import CommandFailed, CommandTimeout

# What `env` keys (and names to unset) must look like: a shell variable name, exported as is.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class CommandResult:
    """What a command did. `returncode` is None when it timed out (and was killed)."""

    command: str
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, n: int = 20) -> str:
        """The last `n` lines of stdout and stderr together (stderr last), for messages."""
        lines = (self.stdout.rstrip("\n").splitlines() if self.stdout.strip() else []) + \
                (self.stderr.rstrip("\n").splitlines() if self.stderr.strip() else [])
        return "\n".join(lines[-n:])


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime: float
    mode: int
    is_dir: bool = False


@dataclass(frozen=True)
class HostSpec:
    """How to reach a host. `host` may be an alias of `~/.ssh/config` (HostName, User, Port,
    IdentityFile and ProxyJump are honoured); explicit fields override it."""

    host: str
    user: str | None = None
    port: int | None = None
    key: str | None = None  # private key file
    transport: str = "asyncssh"  # asyncssh | paramiko | local
    known_hosts: str | None = None  # default ~/.ssh/known_hosts
    ssh_config: str | None = None  # default ~/.ssh/config
    connect_timeout: float = 15.0
    keepalive: float = 15.0  # seconds between SSH keepalives; 3 unanswered: the connection is dead
    extra: dict = field(default_factory=dict, compare=False)


@runtime_checkable
class Transport(Protocol):
    """One host. Commands run through `/bin/sh -c` in `cwd` (default: the login directory;
    relative paths of files are relative to it too) with `env` added to the environment and
    an empty stdin. A missing `cwd` is a failed result, not an exception. A command that
    leaves a background process holding its stdout is undefined: locally `run` waits for it,
    over SSH it returns and later output may be dropped; detach with output redirected (the
    Launcher does). A command killed by a signal reports 128+N over SSH, -N locally.
    FileStat.mode is the full st_mode; over SFTP, mtime has whole seconds."""

    name: str

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        """Run a command. On timeout (or if the caller cancels) the command's whole process
        group is killed (TERM, then KILL) and the result keeps the partial output
        (`timed_out=True`, `returncode=None`); with `check=True` a failure raises
        CommandFailed / CommandTimeout carrying that result."""
        ...

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        """Bytes of a file from `offset` (to the end, or `size` bytes). FileNotFoundError if absent."""
        ...

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Write a whole file atomically (a temp file beside it, then rename). `mode=None`
        keeps the mode of the file replaced (a patched script stays executable); a new file
        gets the default. A missing parent directory raises FileNotFoundError."""
        ...

    async def stat(self, path: str) -> FileStat | None:
        """The file's size, mtime and mode, or None when it does not exist."""
        ...

    async def close(self) -> None:
        ...


def checked(result: CommandResult, check: bool) -> CommandResult:
    """`result`, or with `check=True` a failure raised as CommandFailed / CommandTimeout."""
    if check and not result.ok:
        raise (CommandTimeout if result.timed_out else CommandFailed)(result)
    return result


async def connect(spec: HostSpec) -> Transport:
    """Open the transport `spec.transport` names (one connection for the whole session)."""
    if spec.transport == "local":
        from .local import LocalTransport

        return LocalTransport()
    if spec.transport == "asyncssh":
        from .ssh import AsyncSSHTransport

        return await AsyncSSHTransport.open(spec)
    if spec.transport == "paramiko":
        from .paramiko_ssh import ParamikoTransport

        return await ParamikoTransport.open(spec)
    from ..errors import BadInput

    raise BadInput(f"unknown transport {spec.transport!r}; use asyncssh, paramiko or local")
