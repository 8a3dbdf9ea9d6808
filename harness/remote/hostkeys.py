"""Host keys: fingerprints, known_hosts lookups, the one-line errors, and `trust`.

Keys are passed as `(key_type, blob)` — the type name (`ssh-ed25519`) and the public key
blob as sent on the wire — so any SSH library can use these helpers (asyncssh: `key.get_algorithm()`,
`key.public_data`; paramiko: `key.get_name()`, `key.asbytes()`). Lookups read OpenSSH
known_hosts files (hashed entries, patterns, `[host]:port`, `@revoked`) through asyncssh.

    await trust(HostSpec("gpu1"))      # fetch the key, append it to known_hosts; a changed key is refused
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import shlex
from pathlib import Path

from ..errors import HostKeyError, TransportError
from .transport import HostSpec

KNOWN, UNKNOWN, CHANGED, REVOKED = "known", "unknown", "changed", "revoked"


def fingerprint(blob: bytes) -> str:
    """OpenSSH's `SHA256:...` fingerprint of a public key blob."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def host_pattern(host: str, port: int) -> str:
    """How known_hosts names a host: `host`, or `[host]:port` off port 22."""
    return host if port == 22 else f"[{host}]:{port}"


def known_hosts_line(host: str, port: int, key_type: str, blob: bytes) -> str:
    return f"{host_pattern(host, port)} {key_type} {base64.b64encode(blob).decode()}"


def known_keys(path: str | os.PathLike, host: str, addr: str, port: int) -> tuple[list, list]:
    """The `(trusted, revoked)` keys known_hosts lists for host/addr/port, as `(type, blob)`."""
    import asyncssh

    if not Path(path).is_file():
        return [], []
    try:
        found = asyncssh.match_known_hosts(str(path), host, addr, None if port == 22 else port)
    except (ValueError, asyncssh.KeyImportError) as e:
        raise HostKeyError(f"cannot read known_hosts {path}: {e}") from None
    trusted, revoked = ([(k.get_algorithm(), bytes(k.public_data)) for k in keys] for keys in (found[0], found[2]))
    return trusted, revoked


def check(path: str | os.PathLike, host: str, addr: str, port: int, key_type: str, blob: bytes) -> str:
    """KNOWN, UNKNOWN (no entry for the host), CHANGED (entries, none this key) or REVOKED."""
    trusted, revoked = known_keys(path, host, addr, port)
    if any(b == blob for _, b in revoked):
        return REVOKED
    if any(b == blob for _, b in trusted):
        return KNOWN
    return CHANGED if trusted else UNKNOWN


def trust_command(spec: HostSpec, alias: str | None = None) -> str:
    """The command that trusts `alias` (default: the spec's host) with the spec's files."""
    cmd = f"harness trust {alias or spec.host}"
    if spec.ssh_config:
        cmd += f" --ssh-config {spec.ssh_config}"
    if spec.known_hosts:
        cmd += f" --known-hosts {spec.known_hosts}"
    return cmd


def host_key_error(status: str, spec: HostSpec, alias: str, host: str, port: int, key_type: str,
                   blob: bytes, known_hosts: str) -> HostKeyError:
    """The one-line HostKeyError for an UNKNOWN, CHANGED or REVOKED key of `alias`."""
    where = f"{alias} ({host}:{port})"
    fp = f"{key_type} {fingerprint(blob)}"
    if status == UNKNOWN:
        return HostKeyError(f"unknown host key for {where}: {fp} is not in {known_hosts}; "
                            f"if that fingerprint is right, run: {trust_command(spec, alias)}")
    if status == REVOKED:
        return HostKeyError(f"host key for {where} is REVOKED in {known_hosts}: {fp}; refused")
    remove = f"ssh-keygen -R {shlex.quote(host_pattern(host, port))} -f {shlex.quote(str(known_hosts))}"
    return HostKeyError(f"host key for {where} has CHANGED: it now offers {fp}, which does not match "
                        f"{known_hosts}; refused (possible man-in-the-middle) — if the host was "
                        f"reinstalled and you checked the new key, remove the old line with `{remove}`")


def append_known_host(path: str | os.PathLike, host: str, port: int, key_type: str, blob: bytes) -> str:
    """Append a key line to known_hosts (creating the file, and ~/.ssh 0700); returns the line."""
    p = Path(path)
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    line = known_hosts_line(host, port, key_type, blob)
    prefix = "\n" if p.is_file() and p.stat().st_size and not p.read_bytes().endswith(b"\n") else ""
    with open(p, "a", encoding="utf-8") as f:
        f.write(f"{prefix}{line}\n")
    return line


async def fetch_host_key(spec: HostSpec, t, algs=(), tunnel=None) -> tuple[str, bytes, str]:
    """(key type, blob, address) of the key target `t` (ssh.resolve) offers, through `tunnel`
    or its ProxyJump hops; `algs` limits the key types asked for."""
    import asyncssh

    from .ssh import close_all, connect_error, tunnel_to

    conns: list = []
    if tunnel is None:
        tunnel, conns = await tunnel_to(spec, t, nodelay=False)
    try:
        key = await asyncio.wait_for(asyncssh.get_server_host_key(
            t.host, t.port, tunnel=tunnel, config=[], server_host_key_algs=algs or ()), spec.connect_timeout)
    except (OSError, asyncio.TimeoutError, asyncssh.Error) as e:
        raise connect_error(e, t) from None
    finally:
        close_all(conns)
    if key is None:
        raise HostKeyError(f"{t.alias} ({t.host}:{t.port}) presented no host key")
    addr = t.host
    if tunnel is None:
        with contextlib.suppress(OSError):
            addr = (await asyncio.get_running_loop().getaddrinfo(t.host, t.port))[0][4][0]
    return key.get_algorithm(), bytes(key.public_data), addr


async def offered_key(spec: HostSpec, t, tunnel=None) -> tuple[str, bytes, str]:
    """The key target `t` offers, of a type known_hosts lists for it when it has one (so a
    changed key is compared like with like): (key type, blob, address)."""
    import asyncssh

    algs: list[str] = []
    for key_type, blob in known_keys(t.known_hosts, t.key_host, t.host, t.port)[0]:
        key = asyncssh.import_public_key(f"{key_type} {base64.b64encode(blob).decode()}")
        algs += [a.decode() for a in key.sig_algorithms if a.decode() not in algs]
    try:
        return await fetch_host_key(spec, t, algs, tunnel)
    except TransportError:  # the server offers none of the known types (any more)
        if not algs:
            raise
        return await fetch_host_key(spec, t, (), tunnel)


async def diagnose(e: Exception, spec: HostSpec, t, tunnel) -> TransportError:
    """Why the handshake with target `t` failed: an unknown, CHANGED or REVOKED host key (or
    something else), found by fetching the key it offers and comparing it with known_hosts."""
    import asyncssh

    from .ssh import connect_error

    key_type, blob, addr = await offered_key(spec, t, tunnel)
    status = check(t.known_hosts, t.key_host, addr, t.port, key_type, blob)
    if status != KNOWN:
        return host_key_error(status, spec, t.alias, t.host, t.port, key_type, blob, t.known_hosts)
    if isinstance(e, asyncssh.HostKeyNotVerifiable):
        return HostKeyError(f"host key for {t.alias} ({t.host}:{t.port}) {key_type} "
                            f"{fingerprint(blob)} was refused: {' '.join(str(e).split())}")
    return connect_error(e, t)


async def trust(host: str | HostSpec, *, ssh_config: str | None = None, known_hosts: str | None = None,
                fingerprint_given: str | None = None, confirm=None) -> str:
    """Fetch `host`'s key (through its ProxyJump hosts, which must be trusted already) and add it
    to known_hosts once it is vouched for: it matches `fingerprint_given` (`SHA256:…`), or
    `confirm(line)` — shown the host and the fingerprint — says yes. Returns what was done, one
    line. A CHANGED or REVOKED key raises HostKeyError; an unconfirmed one BadInput."""
    from ..errors import BadInput
    from .ssh import resolve

    spec = host if isinstance(host, HostSpec) else HostSpec(host, ssh_config=ssh_config, known_hosts=known_hosts)
    target = resolve(spec)
    key_type, blob, addr = await offered_key(spec, target)
    status = check(target.known_hosts, target.key_host, addr, target.port, key_type, blob)
    fp = f"{key_type} {fingerprint(blob)}"
    where = f"{spec.host} ({target.host}:{target.port})"
    if status == KNOWN:
        return f"{where} is already trusted: {fp}"
    if status != UNKNOWN:
        raise host_key_error(status, spec, spec.host, target.host, target.port, key_type, blob,
                             target.known_hosts)
    if fingerprint_given is not None:
        want = fingerprint_given.strip()
        want = want if want.startswith("SHA256:") else "SHA256:" + want
        if want.rstrip("=") != fingerprint(blob):
            raise HostKeyError(f"{where} offers {fp}, not the {want} you gave; nothing trusted (check the "
                               f"fingerprint on the host: ssh-keygen -lf /etc/ssh/ssh_host_{key_type.split('-')[-1]}_key.pub)")
    elif confirm is None or not confirm(f"{where} offers {fp}"):
        raise BadInput(f"{where} offers {fp}; nothing trusted — check that fingerprint on the host "
                       f"(ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub), then run `harness trust {spec.host} "
                       f"--fingerprint {fingerprint(blob)}`")
    append_known_host(target.known_hosts, target.key_host, target.port, key_type, blob)
    return f"trusted {where} {fp}: added to {target.known_hosts}"
