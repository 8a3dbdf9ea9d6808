"""Following a growing log through a real transport: whole lines, no byte lost or repeated,
truncation and rotation noticed, resumable from a stored cursor."""

import asyncio
import os

import pytest

from harness.remote.follow import Cursor, follow, poll

local = pytest.importorskip("harness.remote.local")


def arun(coro):
    return asyncio.run(coro)


async def collect(t, cur):
    out = b""
    while (chunk := await poll(t, cur)) is not None and chunk.data:
        out += chunk.data
    return out


def test_only_whole_lines_are_delivered_and_nothing_twice(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"one\ntw")

    async def go():
        t = local.LocalTransport()
        cur = Cursor(str(log))
        first = await collect(t, cur)
        with open(log, "ab") as fh:
            fh.write(b"o\nthree\n")
        second = await collect(t, cur)
        await t.close()
        return first, second, cur.offset

    first, second, offset = arun(go())
    assert first == b"one\n" and second == b"two\nthree\n" and offset == len(b"one\ntwo\nthree\n")


def test_resume_from_a_stored_cursor_loses_and_repeats_nothing(tmp_path):
    log = tmp_path / "run.log"
    expected = b"".join(f"line {i} {'x' * (i % 50)}\n".encode() for i in range(5000))

    async def go():
        got = b""
        stored = Cursor(str(log))
        with open(log, "wb") as fh:
            for i in range(0, len(expected), 7919):  # write in odd-sized pieces, reconnect between polls
                fh.write(expected[i:i + 7919])
                fh.flush()
                t = local.LocalTransport()  # a new connection each time, resumed from the stored cursor
                cur = Cursor(stored.path, stored.offset, stored.head)
                got += await collect(t, cur)
                stored = cur
                await t.close()
        return got

    assert arun(go()) == expected


def test_truncation_and_rotation_start_over(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"old run line 1\nold run line 2\n")

    async def go():
        t = local.LocalTransport()
        cur = Cursor(str(log))
        await collect(t, cur)
        log.write_bytes(b"new\n")  # truncated and rewritten: smaller than the offset
        c1 = await poll(t, cur)
        os.rename(log, tmp_path / "run.log.1")  # rotated: a new file of the same length or longer
        log.write_bytes(b"rotated file, line 1 is longer\n")
        c2 = await poll(t, cur)
        await t.close()
        return c1, c2

    c1, c2 = arun(go())
    assert c1.reset == "truncated" and c1.data == b"new\n"
    assert c2.reset == "rotated" and c2.data == b"rotated file, line 1 is longer\n"


def test_follow_yields_chunks_from_several_files_until_stopped(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_bytes(b"a1\n")
    b.write_bytes(b"b1\n")

    async def go():
        t = local.LocalTransport()
        stop = asyncio.Event()
        seen = []
        async for chunk in follow(t, [Cursor(str(a)), Cursor(str(b))], interval=0.05, stop=stop):
            seen.append((os.path.basename(chunk.path), chunk.data))
            if len(seen) == 2:
                with open(a, "ab") as fh:
                    fh.write(b"a2\n")
            if len(seen) == 3:
                stop.set()
        await t.close()
        return seen

    assert arun(asyncio.wait_for(go(), 20)) == [("a.log", b"a1\n"), ("b.log", b"b1\n"), ("a.log", b"a2\n")]


def _session_pids(daemon_pid: int) -> list[int]:
    """The per-connection sshd processes: children of the listening daemon."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                fields = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == daemon_pid and fields[0] != "Z":
                out.append(int(d))
    return out


@pytest.mark.parametrize("kind", ["asyncssh", "paramiko"])
def test_follow_survives_20_killed_ssh_sessions_byte_for_byte(ssh_lab, tmp_path, kind):
    pytest.importorskip({"asyncssh": "harness.remote.ssh", "paramiko": "harness.remote.paramiko_ssh"}[kind])
    from harness.remote.follow import follow_host
    from harness.remote.transport import HostSpec

    spec = HostSpec("box", transport=kind, ssh_config=str(ssh_lab.ssh_config), known_hosts=str(ssh_lab.known_hosts))
    daemon = ssh_lab.servers["box"].proc.pid
    log = tmp_path / "grow.log"
    log.write_bytes(b"")

    async def go():
        stop, got, kills = asyncio.Event(), bytearray(), 0
        writer_done = asyncio.Event()

        async def writer():  # a run writing over time, until 20 sessions were killed under the reader
            i = 0
            with open(log, "ab") as fh:
                while i < 4000 or kills < 20:
                    fh.write(f"step {i} {'y' * (i % 97)}\n".encode())
                    i += 1
                    if i % 20 == 0:
                        fh.flush()
                        await asyncio.sleep(0.002)  # pacing the writer, not synchronisation
                writer_done.set()
                # a last line after the flag, so that a chunk always comes after it and the reader's
                # check below sees everything there (the last chunk could otherwise come while the
                # writer slept, before the flag, and none after it: the reader waited forever)
                fh.write(b"end\n")

        async def reader():
            nonlocal kills
            cur = Cursor(str(log))
            async for chunk in follow_host(spec, [cur], interval=0.02, stop=stop, backoff=(0.01, 0.2)):
                assert chunk.offset == len(got)  # contiguous: nothing lost, nothing repeated
                got.extend(chunk.data)
                if kills < 20 and chunk.data:
                    for pid in _session_pids(daemon):
                        os.kill(pid, 9)  # the session process dies: the connection drops
                    kills += 1
                if writer_done.is_set() and len(got) == log.stat().st_size:
                    stop.set()

        await asyncio.gather(writer(), reader())
        return bytes(got), kills

    got, kills = arun(asyncio.wait_for(go(), 120))
    assert kills == 20
    assert got == log.read_bytes() and len(got) > 100_000


def test_follow_hosts_merges_two_hosts_and_survives_an_sshd_restart(ssh_lab, tmp_path):
    pytest.importorskip("harness.remote.ssh")
    from harness.remote.follow import follow_hosts
    from harness.remote.transport import HostSpec

    specs = [HostSpec(alias, ssh_config=str(ssh_lab.ssh_config), known_hosts=str(ssh_lab.known_hosts))
             for alias in ("box", "jump")]
    logs = [tmp_path / "box.log", tmp_path / "jump.log"]
    for p in logs:
        p.write_bytes(b"first\n")
    box = ssh_lab.servers["box"]

    async def go():
        stop, seen = asyncio.Event(), []
        async for spec, chunk in follow_hosts([(specs[0], [Cursor(str(logs[0]))]), (specs[1], [Cursor(str(logs[1]))])],
                                              interval=0.02, stop=stop, backoff=(0.02, 0.2)):
            seen.append((spec.host, chunk.data))
            if len(seen) == 2:  # both hosts delivered: restart box's sshd (daemon and sessions die)
                for pid in _session_pids(box.proc.pid):
                    os.kill(pid, 9)
                box.stop()
                box.start(open(f"{ssh_lab.client_key}.pub").read().strip(), ssh_lab.client_key)  # same port, same key
                with open(logs[0], "ab") as fh:
                    fh.write(b"after restart\n")
            if len(seen) == 3:
                stop.set()
        return seen

    seen = arun(asyncio.wait_for(go(), 60))
    assert sorted(seen[:2]) == [("box", b"first\n"), ("jump", b"first\n")]
    assert seen[2] == ("box", b"after restart\n")
