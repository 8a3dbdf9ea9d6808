"""AsyncSSHTransport against the real sshd lab: ProxyJump, host keys (unknown, changed, trust),
connection errors, the shell pool's framing, timeouts that kill the process group, and
concurrency. (The shared behaviour is in test_transport_contract.py.)"""

from __future__ import annotations

import asyncio
import base64
import shlex
import socket
import subprocess

import pytest
from sshd import free_port, keygen

from harness.errors import BadInput, CommandTimeout, HostKeyError, TransportError
from harness.remote import procs
from harness.remote.hostkeys import fingerprint, trust
from harness.remote.ssh import AsyncSSHTransport
from harness.remote.transport import HostSpec, connect
from sshd import session


def spec(lab, host="box", known_hosts=None, **kw) -> HostSpec:
    return HostSpec(host=host, transport="asyncssh", ssh_config=str(lab.ssh_config),
                    known_hosts=str(known_hosts or lab.known_hosts), **kw)


def host_fp(lab, alias="box") -> str:
    return fingerprint(base64.b64decode(lab.servers[alias].host_pub.split()[1]))


def alive(pid: int) -> str:
    """A command that succeeds while `pid` runs (a zombie no longer runs: this PID 1 may not reap)."""
    return f"kill -0 {pid} 2>/dev/null && ! grep -q '^[0-9]* ([^)]*) Z' /proc/{pid}/stat"


# --- connecting ---------------------------------------------------------------------------

def test_proxyjump_reaches_box_through_jump(ssh_lab):
    async def body(t):
        assert isinstance(t, AsyncSSHTransport)
        assert [h.get_extra_info("peername")[1] for h in t.hops] == [ssh_lab.servers["jump"].port]
        r = await t.run("echo $SSH_CONNECTION", check=True)
        assert r.stdout.split()[3] == str(ssh_lab.servers["box"].port)
        await t.write("via-jump.txt", b"ok")
        assert await t.read("via-jump.txt") == b"ok"
    session(spec(ssh_lab, "inner"), body)


def test_unknown_host_key_names_fingerprint_and_trust_command(ssh_lab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as e:
        session(spec(ssh_lab, known_hosts=empty), lambda t: t.run("true"))
    msg = str(e.value)
    assert "\n" not in msg
    assert "unknown host key for box" in msg and f"127.0.0.1:{ssh_lab.servers['box'].port}" in msg
    assert f"ssh-ed25519 {host_fp(ssh_lab)}" in msg
    assert "harness trust box" in msg


def test_unknown_jump_host_is_named(ssh_lab, tmp_path):
    only_box = tmp_path / "known_hosts"
    only_box.write_text(ssh_lab.servers["box"].known_hosts_line() + "\n")
    with pytest.raises(HostKeyError, match="unknown host key for jump .*harness trust jump"):
        session(spec(ssh_lab, "inner", known_hosts=only_box), lambda t: t.run("true"))


def test_changed_host_key_is_refused(ssh_lab, tmp_path):
    other = keygen(tmp_path / "other").split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{ssh_lab.servers['box'].port} {other[0]} {other[1]}\n")
    with pytest.raises(HostKeyError) as e:
        session(spec(ssh_lab, known_hosts=known), lambda t: t.run("true"))
    msg = str(e.value)
    assert "\n" not in msg and "CHANGED" in msg and "refused" in msg
    assert host_fp(ssh_lab) in msg and "harness trust" not in msg
    before = known.read_text()
    with pytest.raises(HostKeyError, match="CHANGED"):  # trust never replaces a key
        asyncio.run(trust(spec(ssh_lab, known_hosts=known), fingerprint_given=host_fp(ssh_lab)))
    assert known.read_text() == before
    # the message's own removal command works as written; then the new key can be trusted
    remove = msg.split("remove the old line with `", 1)[1].split("`", 1)[0]
    subprocess.run(remove, shell=True, check=True, capture_output=True)
    assert "trusted box" in asyncio.run(trust(spec(ssh_lab, known_hosts=known), fingerprint_given=host_fp(ssh_lab)))


def test_trust_adds_the_key_then_connecting_works(ssh_lab, tmp_path):
    known = tmp_path / "sub" / "known_hosts"  # created, with its directory
    s = spec(ssh_lab, known_hosts=known)
    with pytest.raises(BadInput) as e:  # nobody vouched for the key: it is shown, nothing is written
        asyncio.run(trust(s))
    assert host_fp(ssh_lab) in str(e.value) and f"--fingerprint {host_fp(ssh_lab)}" in str(e.value)
    assert not known.exists()
    with pytest.raises(HostKeyError, match="not the SHA256:AAAA you gave"):
        asyncio.run(trust(s, fingerprint_given="SHA256:AAAA"))
    shown = []
    with pytest.raises(BadInput):
        asyncio.run(trust(s, confirm=lambda line: shown.append(line) or False))  # answered no
    assert shown and host_fp(ssh_lab) in shown[0]
    said = asyncio.run(trust(s, confirm=lambda line: True))
    assert said.startswith("trusted box") and host_fp(ssh_lab) in said
    assert known.read_text() == ssh_lab.servers["box"].known_hosts_line() + "\n"
    assert session(s, lambda t: t.run("echo hi")).stdout == "hi\n"
    assert "already trusted" in asyncio.run(trust(s))
    assert len(known.read_text().splitlines()) == 1


def test_trust_through_proxyjump(ssh_lab, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text(ssh_lab.servers["jump"].known_hosts_line() + "\n")
    s = spec(ssh_lab, "inner", known_hosts=known)
    assert asyncio.run(trust(s, fingerprint_given=host_fp(ssh_lab))).startswith("trusted inner")
    assert session(s, lambda t: t.run("echo in")).stdout == "in\n"


def test_wrong_user_is_a_one_line_transport_error(ssh_lab):
    with pytest.raises(TransportError) as e:
        session(spec(ssh_lab, user="nobody-such"), lambda t: t.run("true"))
    msg = str(e.value)
    assert not isinstance(e.value, HostKeyError) and "\n" not in msg
    assert "authentication failed" in msg and f"nobody-such@127.0.0.1:{ssh_lab.servers['box'].port}" in msg
    assert "IdentityFile" in msg


def test_wrong_key_is_a_transport_error(ssh_lab, tmp_path):
    keygen(tmp_path / "stranger")
    with pytest.raises(TransportError, match="authentication failed for box"):
        session(spec(ssh_lab, key=str(tmp_path / "stranger")), lambda t: t.run("true"))


def test_connection_refused_names_host_and_port(ssh_lab):
    port = free_port()  # nothing listens there
    with pytest.raises(TransportError) as e:
        session(spec(ssh_lab, port=port), lambda t: t.run("true"))
    assert f"127.0.0.1:{port}" in str(e.value) and "refused" in str(e.value) and "\n" not in str(e.value)


def test_connect_timeout_names_host_and_port(ssh_lab):
    with socket.socket() as silent:  # accepts, never speaks SSH
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        with pytest.raises(TransportError, match=f"127.0.0.1:{port}.*timed out"):
            session(spec(ssh_lab, port=port, connect_timeout=0.5), lambda t: t.run("true"))


# --- the shell pool -----------------------------------------------------------------------

def test_framing_keeps_output_exact(ssh_lab):
    async def body(t):
        r = await t.run("printf 'no newline'; printf 'err' >&2")
        assert (r.stdout, r.stderr, r.returncode) == ("no newline", "err", 0)
        r = await t.run("printf '\\n\\n'; echo; exit 7")
        assert (r.stdout, r.returncode) == ("\n\n\n", 7)
        tok = "0123456789abcdef01234567"  # marker-shaped output is just output
        fake = f"\n{tok}>0\n{tok}<\n{tok}#1\n\n{tok}>\n"
        r = await t.run(f"printf %s {shlex.quote(fake)}; printf %s {shlex.quote(fake)} >&2; echo after")
        assert (r.stdout, r.stderr) == (fake + "after\n", fake)
        big = await t.run("head -c 3000000 /dev/zero | tr '\\0' o; head -c 2000000 /dev/zero | tr '\\0' e >&2")
        assert big.stdout == "o" * 3_000_000 and big.stderr == "e" * 2_000_000
        assert (await t.run("cat; echo done")).stdout == "done\n"  # stdin is /dev/null
        assert (await t.run("exit 0; echo never")).stdout == ""
        r = await t.run("echo out; kill -9 $$")  # the wrapper shell's "Killed" is not the command's
        assert (r.stdout, r.stderr, r.returncode) == ("out\n", "", 137)
        odd = "/tmp/dir with 'quotes' $x"
        r = await t.run(f"mkdir -p {shlex.quote(odd)} && cd {shlex.quote(odd)} && pwd")
        r = await t.run('pwd; printf "%s|%s" "$A" "$B"', cwd=odd, env={"A": "x y", "B": "it's $HOME"})
        assert r.stdout == f"{odd}\nx y|it's $HOME"
        assert (await t.run("pwd")).stdout.strip() == (await t.run("echo $HOME")).stdout.strip()
        r = await t.run("true", cwd="/no/such/dir")
        assert r.returncode != 0 and "/no/such/dir" in r.stderr
        with pytest.raises(ValueError):
            await t.run("true", env={"bad name": "x"})
    session(spec(ssh_lab), body)


def test_timeout_kills_the_process_group(ssh_lab):
    async def body(t):
        r = await t.run("echo start; sleep 30 & echo $!; wait", timeout=0.5)
        assert r.timed_out and r.returncode is None and not r.ok
        assert r.stdout.startswith("start\n") and r.stderr == ""
        child = int(r.stdout.split()[1])
        assert (await t.run(alive(child))).returncode != 0
        with pytest.raises(CommandTimeout) as e:
            await t.run("echo partial; sleep 30", timeout=0.3, check=True)
        assert e.value.result.stdout == "partial\n"
        assert (await t.run("echo still")).stdout == "still\n"
    session(spec(ssh_lab), body)


def test_timeout_kills_a_group_that_ignores_term(ssh_lab, monkeypatch):
    monkeypatch.setattr(procs, "KILL_GRACE", 0.3)  # a short grace, read when the kill command is built

    async def body(t):
        r = await t.run("trap '' TERM; sh -c 'trap \"\" TERM; sleep 30' & echo $!; wait", timeout=0.3)
        assert r.timed_out
        assert (await t.run(alive(int(r.stdout.split()[0])))).returncode != 0
        assert (await t.run("echo ok")).stdout == "ok\n"
    session(spec(ssh_lab), body)


def test_cancelled_run_kills_its_command(ssh_lab):
    async def body(t):
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(t.run("echo $$ > cancelled.pid; exec sleep 30"), 0.5)
        await asyncio.gather(*t.pool.tasks)  # the kill it left running
        pid = int((await t.read("cancelled.pid")).decode())
        assert (await t.run(alive(pid))).returncode != 0
        assert (await t.run("echo next")).stdout == "next\n"
    session(spec(ssh_lab), body)


def test_a_dead_shell_is_an_error_then_replaced(ssh_lab):
    async def body(t):
        with pytest.raises(TransportError, match="shell channel closed"):
            await t.run("kill -9 $PPID")
        assert (await t.run("echo back")).stdout == "back\n"
    session(spec(ssh_lab), body)


def test_a_dropped_connection_is_a_transport_error(ssh_lab):
    async def body(t):
        await t.stat("/")
        sshd = (await t.run("ps -o ppid= -p $PPID", check=True)).stdout.strip()  # serves this connection
        with pytest.raises(TransportError):
            await t.run(f"kill {sshd}; sleep 5")
        for op in (t.run("true"), t.read("/etc/hostname"), t.stat("/")):
            with pytest.raises(TransportError):
                await op
    session(spec(ssh_lab), body)


def test_sequential_then_concurrent_runs(ssh_lab):
    async def body(t):
        for _ in range(50):
            assert (await t.run("true")).returncode == 0
        results = await asyncio.gather(*(t.run(f"echo {i}; echo e{i} >&2; exit {i % 3}") for i in range(24)))
        assert [(r.stdout, r.stderr, r.returncode) for r in results] == \
            [(f"{i}\n", f"e{i}\n", i % 3) for i in range(24)]
        assert 1 <= len(t.pool.idle) <= 4
        slow = asyncio.gather(*(t.run("sleep 0.3; echo slow") for _ in range(2)))
        fast = await asyncio.gather(*(t.run(f"echo {i}") for i in range(10)))  # the other two shells
        assert [r.stdout for r in fast] == [f"{i}\n" for i in range(10)]
        assert [r.stdout for r in await slow] == ["slow\n"] * 2
    session(spec(ssh_lab), body)


# --- files --------------------------------------------------------------------------------

def test_files_over_sftp(ssh_lab):
    async def body(t):
        await t.write("sftp-a.txt", b"0123456789")
        assert await t.read("sftp-a.txt", offset=3, size=4) == b"3456"
        assert await t.read("sftp-a.txt", offset=8) == b"89"
        await t.run("chmod 755 sftp-a.txt", check=True)
        await t.write("sftp-a.txt", b"new")  # replaced atomically, mode kept
        st = await t.stat("sftp-a.txt")
        assert (st.size, st.mode & 0o777, st.is_dir) == (3, 0o755, False)
        await t.write("sftp-b.txt", b"x", mode=0o600)
        assert (await t.stat("sftp-b.txt")).mode & 0o777 == 0o600
        assert (await t.run("ls -a | grep -c '\\.tmp$' || true")).stdout.strip() == "0"
        assert (await t.stat("/tmp")).is_dir and await t.stat("no-such-file") is None
        with pytest.raises(FileNotFoundError):
            await t.read("no-such-file")
        with pytest.raises(FileNotFoundError):
            await t.write("no-such-dir/f", b"x")
    session(spec(ssh_lab), body)


def test_close_releases_everything(ssh_lab):
    async def body():
        t = await connect(spec(ssh_lab))
        await asyncio.gather(t.run("true"), t.stat("/"))
        await t.close()
        with pytest.raises(TransportError):
            await t.run("true")
    asyncio.run(body())


def test_a_channel_asked_for_as_the_connection_drops_is_a_dropped_connection(ssh_lab):
    """sshd restarted while a shell or SFTP is being opened: asyncssh refuses the channel (`SSH connection
    closed`) before it marks the connection closed. That is the connection gone — weather, retried
    after a reconnect — not a server that refuses SFTP or has too many sessions."""
    from harness.errors import ConnectionLost

    async def body(_):
        for op in (lambda t: t.sftp(), lambda t: t.run("true")):
            t = await connect(spec(ssh_lab))
            # the TCP link lost under the connection, as asyncio reports it when sshd restarts: asyncssh
            # drops its transport at once and finishes closing in a later turn of the loop
            t.conn.connection_lost(ConnectionResetError("Connection reset by peer"))
            with pytest.raises(ConnectionLost):
                await op(t)
            await t.close()
    session(spec(ssh_lab), body)
