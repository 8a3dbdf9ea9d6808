"""ParamikoTransport against the real sshd lab: ProxyJump, strict host keys, one-line connection
errors, killing a timed-out (or cancelled) command's whole process group, concurrent shells.
The generic behaviour (output framing, files, ...) is in test_transport_contract.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

import pytest

from harness.errors import HostKeyError, TransportError
from harness.remote import procs
from harness.remote.transport import HostSpec, connect
from sshd import free_port, keygen
from sshd import session

# alive = kill -0 succeeds and it is not a zombie (this machine's init reaps orphans late)
ALIVE = ('for p in {pids}; do if kill -0 "$p" 2>/dev/null && '
         '! grep -q "^State:[[:space:]]*Z" /proc/"$p"/status 2>/dev/null; then echo "alive $p"; fi; done')


def spec(lab, host: str = "box", **kw) -> HostSpec:
    kw.setdefault("known_hosts", str(lab.known_hosts))
    kw.setdefault("ssh_config", str(lab.ssh_config))
    return HostSpec(host=host, transport="paramiko", **kw)


def connect_error(s: HostSpec) -> Exception:
    with pytest.raises(TransportError) as info:
        asyncio.run(connect(s))
    assert "\n" not in str(info.value)
    return info.value


def fingerprint(pub: Path) -> str:
    return subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout.split()[1]


# --- ProxyJump ---------------------------------------------------------------------------------

def test_proxyjump_reaches_inner_through_jump(ssh_lab, tmp_path):
    async def body(t):
        first_hop = t._clients[0].get_transport().getpeername()[1]
        await t.write(str(tmp_path / "via-jump"), b"through jump")
        return first_hop, await t.run("cat via-jump; printf end", cwd=str(tmp_path)), await t.stat(str(tmp_path))

    first_hop, r, st = session(spec(ssh_lab, "inner"), body)
    assert first_hop == ssh_lab.servers["jump"].port
    assert (r.returncode, r.stdout) == (0, "through jumpend")
    assert st is not None and st.is_dir


def test_proxyjump_is_required_not_decorative(ssh_lab, tmp_path):
    """The same target through a jump host that is down fails, naming that jump host."""
    dead = free_port()
    cfg = tmp_path / "ssh_config"
    cfg.write_text(ssh_lab.ssh_config.read_text() + f"\nHost deadjump\n  HostName 127.0.0.1\n  Port {dead}\n"
                   f"Host via-dead\n  HostName 127.0.0.1\n  Port {ssh_lab.servers['box'].port}\n"
                   f"  IdentityFile {ssh_lab.client_key}\n  ProxyJump deadjump\n")
    err = connect_error(spec(ssh_lab, "via-dead", ssh_config=str(cfg)))
    assert not isinstance(err, HostKeyError)
    assert f"deadjump (127.0.0.1:{dead})" in str(err)


def test_inner_commands_are_not_slowed_by_delayed_acks(ssh_lab):
    """Through a jump host each reply used to wait ~40 ms (Nagle vs delayed ACK)."""
    async def body(t):
        times = []
        for _ in range(15):
            start = time.perf_counter()
            assert (await t.run("true")).ok
            times.append(time.perf_counter() - start)
        return sorted(times)[len(times) // 2]

    assert session(spec(ssh_lab, "inner"), body) < 0.035


# --- host keys ---------------------------------------------------------------------------------

def test_unknown_host_key_names_fingerprint_and_trust_command(ssh_lab, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    with pytest.raises(HostKeyError) as info:
        asyncio.run(connect(spec(ssh_lab, known_hosts=str(known))))
    msg, box = str(info.value), ssh_lab.servers["box"]
    assert "\n" not in msg and "unknown" in msg
    assert f"box (127.0.0.1:{box.port})" in msg
    assert f"ssh-ed25519 {fingerprint(box.root / 'host_ed25519.pub')}" in msg
    assert "harness trust box" in msg


def test_unknown_jump_host_key_names_the_jump_host(ssh_lab, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(ssh_lab.servers["box"].known_hosts_line() + "\n")  # box known, jump not
    with pytest.raises(HostKeyError) as info:
        asyncio.run(connect(spec(ssh_lab, "inner", known_hosts=str(known))))
    assert "harness trust jump" in str(info.value)
    assert fingerprint(ssh_lab.servers["jump"].root / "host_ed25519.pub") in str(info.value)


def test_changed_host_key_is_refused(ssh_lab, tmp_path):
    other = keygen(tmp_path / "impostor").split()
    box = ssh_lab.servers["box"]
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{box.port} {other[0]} {other[1]}\n")
    with pytest.raises(HostKeyError) as info:
        asyncio.run(connect(spec(ssh_lab, known_hosts=str(known))))
    msg = str(info.value)
    assert "\n" not in msg and "CHANGED" in msg and "refused" in msg
    assert fingerprint(box.root / "host_ed25519.pub") in msg  # what the server offers now


def test_hashed_known_hosts_work_and_revoked_keys_are_refused(ssh_lab, tmp_path):
    hashed = tmp_path / "hashed"
    hashed.write_text(ssh_lab.known_hosts.read_text())
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(hashed)], check=True, capture_output=True)
    assert "127.0.0.1" not in hashed.read_text()
    assert session(spec(ssh_lab, "inner", known_hosts=str(hashed)), lambda t: t.run("echo ok")).stdout == "ok\n"

    kind, blob = ssh_lab.servers["box"].host_pub.split()[:2]
    revoked = tmp_path / "revoked"
    revoked.write_text(f"@revoked * {kind} {blob}\n" + ssh_lab.known_hosts.read_text())
    with pytest.raises(HostKeyError, match="REVOKED"):
        asyncio.run(connect(spec(ssh_lab, known_hosts=str(revoked))))


# --- connection and authentication failures -----------------------------------------------------

def test_wrong_key_is_a_transport_error(ssh_lab, tmp_path):
    keygen(tmp_path / "stranger")
    err = connect_error(spec(ssh_lab, key=str(tmp_path / "stranger")))
    assert not isinstance(err, HostKeyError)
    assert f"box (127.0.0.1:{ssh_lab.servers['box'].port})" in str(err) and "IdentityFile" in str(err)


def test_wrong_user_is_a_transport_error(ssh_lab):
    err = connect_error(spec(ssh_lab, user="no-such-user-here"))
    assert not isinstance(err, HostKeyError) and "no-such-user-here" in str(err)


def test_missing_key_file_is_a_transport_error(ssh_lab, tmp_path):
    err = connect_error(spec(ssh_lab, key=str(tmp_path / "absent")))
    assert str(tmp_path / "absent") in str(err)


def test_closed_port_names_host_and_port(ssh_lab):
    port = free_port()
    err = connect_error(spec(ssh_lab, host="127.0.0.1", port=port))
    assert f"127.0.0.1:{port}" in str(err) and "check" in str(err)


# --- timeouts and cancellation -------------------------------------------------------------------

def test_timeout_kills_the_remote_process_group(ssh_lab):
    async def body(t):
        r = await t.run("echo $$; sleep 30 & echo $!; echo started >&2; wait", timeout=1)
        pids = r.stdout.split()
        return r, pids, await t.run(ALIVE.format(pids=" ".join(pids))), await t.run("echo still usable")

    r, pids, alive, after = session(spec(ssh_lab), body)
    assert (r.timed_out, r.returncode) == (True, None)
    assert len(pids) == 2 and "started" in r.stderr  # partial output kept, pid marker stripped
    assert alive.ok and alive.stdout == ""
    assert after.stdout == "still usable\n"


def test_timeout_escalates_to_kill_when_term_is_ignored(ssh_lab, monkeypatch):
    monkeypatch.setattr(procs, "KILL_GRACE", 0.3)  # a short grace, read when the kill command is built

    async def body(t):
        r = await t.run("trap '' TERM; echo $$; sleep 30 & echo $!; wait; wait", timeout=0.5)
        return r, await t.run(ALIVE.format(pids=" ".join(r.stdout.split())))

    r, alive = session(spec(ssh_lab, "inner"), body)
    assert r.timed_out and len(r.stdout.split()) == 2
    assert alive.stdout == ""


def test_cancelled_run_kills_its_command(ssh_lab, tmp_path):
    pidfile = tmp_path / "pid"
    t = asyncio.run(connect(spec(ssh_lab)))

    async def cancel():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(t.run(f"echo $$ > {pidfile}; exec sleep 300"), 1)

    start = time.monotonic()
    asyncio.run(cancel())  # returns once the worker thread (which does the killing) has finished
    assert time.monotonic() - start < 30  # not after the command ended by itself
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)
        assert "Z" in Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        pass
    asyncio.run(t.close())


# --- the shell pool ------------------------------------------------------------------------------

def test_concurrent_runs_use_separate_shells(ssh_lab, tmp_path):
    """A reader blocked on a fifo is released by a writer running at the same time."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    async def body(t):
        return await asyncio.gather(t.run(f"cat {fifo}", timeout=20), t.run(f"echo hello > {fifo}", timeout=20))

    reader, writer = session(spec(ssh_lab), body)
    assert (reader.stdout, reader.ok, writer.ok) == ("hello\n", True, True)


def test_shell_state_and_stdin_do_not_leak(ssh_lab, tmp_path):
    async def body(t):
        first = await t.run("cd /; export LEAK=1; cat; printf 'no newline'", cwd=str(tmp_path), env={"A": "x y"})
        return first, await t.run('pwd; echo "[$LEAK][$A]"')

    first, second = session(spec(ssh_lab), body)
    assert (first.returncode, first.stdout) == (0, "no newline")
    assert second.stdout.splitlines()[1] == "[][]"
    assert second.stdout.splitlines()[0] != "/"
