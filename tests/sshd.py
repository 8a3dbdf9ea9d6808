"""A real OpenSSH sshd on 127.0.0.1 for tests: its own host key, client key, authorized_keys,
known_hosts and an ssh_config with an alias per server (and a ProxyJump alias for two)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.engines import free_port

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


def session(spec, body):
    """Open a transport for `spec`, run `await body(t)`, close it; all on a fresh event loop."""
    import asyncio

    from harness.remote.transport import connect

    async def go():
        t = await connect(spec)
        try:
            return await body(t)
        finally:
            await t.close()
    return asyncio.run(go())


def keygen(path: Path) -> str:
    """An ed25519 key pair at `path`; returns the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return Path(f"{path}.pub").read_text().strip()


@dataclass
class Sshd:
    """One sshd. `alias` is its Host name in `ssh_config`; `client_key` logs in as this user."""

    root: Path
    alias: str = "box"
    port: int = 0
    proc: subprocess.Popen | None = None
    host_pub: str = ""
    client_key: Path = field(default=None)  # type: ignore[assignment]
    client_pub: str = ""
    user: str = field(default_factory=lambda: os.environ.get("USER") or __import__("getpass").getuser())

    def start(self, client_pub: str, client_key: Path) -> "Sshd":
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        hostkey = self.root / "host_ed25519"  # kept across a restart: same host, same key
        self.host_pub = Path(f"{hostkey}.pub").read_text().strip() if hostkey.exists() else keygen(hostkey)
        self.client_key, self.client_pub = client_key, client_pub
        keys = self.root / "authorized_keys"
        if not keys.exists():  # a restart keeps what tests added (the phone's key)
            keys.write_text(client_pub + "\n")
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
        cfg = self.root / "sshd_config"
        cfg.write_text("\n".join([
            f"Port {self.port}", "ListenAddress 127.0.0.1", f"HostKey {hostkey}",
            f"PidFile {self.root / 'sshd.pid'}", f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
            "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PubkeyAuthentication yes",
            "PermitRootLogin yes", "StrictModes no", "UsePAM no", "Subsystem sftp internal-sftp",
            "AllowTcpForwarding yes", "MaxSessions 100", "MaxStartups 100:30:200", "LogLevel ERROR", ""]))
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                                     stderr=open(self.root / "sshd.log", "wb"))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # readiness: the port accepts connections
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("sshd did not listen within 10 s")

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} {self.host_pub.split()[0]} {self.host_pub.split()[1]}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)

    def sshd_processes(self) -> list[int]:
        """The listener and every sshd process under it (one or two per connection), not the
        shells and commands those run."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                text = stat.read_text()
            except OSError:
                continue
            fields = text.rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                name = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
            if name.startswith("sshd"):
                out.append(pid)
                todo += children.get(pid, [])
        return out

    def kill(self) -> int:
        """Kill the listener and all its session processes at once (SIGKILL: no goodbye on any
        connection); returns how many sshd processes were killed."""
        pids = self.sshd_processes()
        for pid in pids:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        self.proc.wait(5)
        return len(pids)

    def restart(self, down: float = 0.0) -> int:
        """`kill`, stay down `down` seconds, start again on the same port with the same host key;
        returns how many sshd processes were killed."""
        n = self.kill()
        time.sleep(down)
        self.start(self.client_pub, self.client_key)
        return n


@dataclass
class SshLab:
    """Two sshd instances, a client key, known_hosts and ssh_config: `box` (direct),
    `jump` and `inner` (reached through `jump` with ProxyJump)."""

    root: Path
    servers: dict[str, Sshd] = field(default_factory=dict)

    def start(self) -> "SshLab":
        client_key = self.root / "id_ed25519"
        client_pub = keygen(client_key)
        for alias in ("box", "jump"):
            self.servers[alias] = Sshd(self.root / alias, alias).start(client_pub, client_key)
        self.known_hosts.write_text("".join(s.known_hosts_line() + "\n" for s in self.servers.values()))
        box, jump = self.servers["box"], self.servers["jump"]
        self.ssh_config.write_text("\n".join([
            *(f"Host {s.alias}\n  HostName 127.0.0.1\n  Port {s.port}\n  User {s.user}\n"
              f"  IdentityFile {client_key}\n  UserKnownHostsFile {self.known_hosts}\n"
              f"  StrictHostKeyChecking yes\n" for s in (box, jump)),
            f"Host inner\n  HostName 127.0.0.1\n  Port {box.port}\n  User {box.user}\n  IdentityFile {client_key}\n"
            f"  UserKnownHostsFile {self.known_hosts}\n  StrictHostKeyChecking yes\n  ProxyJump jump\n", ""]))
        return self

    @property
    def known_hosts(self) -> Path:
        return self.root / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def client_key(self) -> Path:
        return self.root / "id_ed25519"

    def stop(self) -> None:
        for s in self.servers.values():
            s.stop()
