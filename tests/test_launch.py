"""The Launcher with real transports and real processes: exit codes and logs recorded, env set
and unset, one live run per workdir, runs found again by a new controller, whole trees stopped
(setsid escapees included), CPU activity measured, runs outliving the launching connection."""

import asyncio
import contextlib
import glob
import importlib.util
import os
import random
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness.errors import BadInput
from harness.remote.launch import PROXY_VARS, Launcher, RunActive
from harness.remote.transport import HostSpec, connect

pytest.importorskip("harness.remote.local")
MODULES = {"asyncssh": "harness.remote.ssh", "paramiko": "harness.remote.paramiko_ssh"}


@pytest.fixture(params=["local", "asyncssh", "paramiko"])
def spec(request):
    """How to reach the host: this machine directly, or the loopback sshd of `ssh_lab`."""
    if request.param == "local":
        return HostSpec(host="localhost", transport="local")
    if importlib.util.find_spec(MODULES[request.param]) is None:
        pytest.skip(f"{MODULES[request.param]} is not there yet")
    lab = request.getfixturevalue("ssh_lab")
    return HostSpec(host="box", transport=request.param, ssh_config=str(lab.ssh_config),
                    known_hosts=str(lab.known_hosts))


@pytest.fixture(autouse=True)
def reap(tmp_path):
    """Whatever a failing test leaves running is killed: each run's group, and its marker."""
    yield
    for rd in (tmp_path / ".harness/runs").glob("*"):
        marker = f"HARNESS_RUN_ID={rd.name}".encode()
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int((rd / "pgid").read_text()), signal.SIGKILL)
        for environ in glob.glob("/proc/[0-9]*/environ"):
            with contextlib.suppress(OSError):
                if marker in Path(environ).read_bytes().split(b"\0"):
                    os.kill(int(environ.split("/")[2]), signal.SIGKILL)


def uid(name: str) -> str:
    """A run id of this test alone: the stop of a run signals every process carrying its id, and
    tests run side by side (pytest-xdist)."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def arun(coro):
    return asyncio.run(coro)


async def until(check, timeout=20.0, step=0.05):
    """Poll `check()` (a coroutine function or a function) until it is truthy; bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        value = await value if asyncio.iscoroutine(value) else value
        if value:
            return value
        await asyncio.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s")


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan may wait a while to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(") ", 1)[1].split()[0] != "Z"


def pid_files(workdir, names):
    def read():
        out = {}
        for name in names:
            try:
                out[name] = int((workdir / name).read_text())
            except (FileNotFoundError, ValueError):
                return None
        return out
    return read


async def finish(launcher, handle):
    return await until(lambda: _ended(launcher, handle))


async def _ended(launcher, handle):
    st = await launcher.poll(handle)
    return None if st.alive or st.exit_code is None else st


def test_exit_code_log_and_times_are_recorded(spec, tmp_path):
    cmd, rid = "for i in 1 2 3; do echo line $i; done; echo oops >&2; exit 3", uid("r1")

    async def go():
        t = await connect(spec)
        lo = Launcher(t)
        h = await lo.launch(cmd, workdir=str(tmp_path), run_id=rid)
        st = await finish(lo, h)
        log = await t.read(h.log_path)
        await t.close()
        return h, st, log

    h, st, log = arun(go())
    assert st.exit_code == 3 and st.started and st.ended and st.started <= st.ended
    assert log == b"line 1\nline 2\nline 3\noops\n"
    rd = tmp_path / ".harness/runs" / rid
    assert h.run_dir == str(rd) and h.pid == h.pgid and h.pid > 0
    assert (rd / "cmd").read_text() == cmd + "\n"
    for name in ("pid", "pgid", "started", "exit_code", "ended", "wrapper.sh", "start.sh"):
        assert (rd / name).exists(), name
    assert not list(rd.glob(".*.tmp"))  # every state file was renamed into place


def test_env_is_set_and_proxies_unset(monkeypatch, tmp_path):
    for name in PROXY_VARS:
        monkeypatch.setenv(name, "http://proxy.intranet:3128")
    monkeypatch.setenv("KEEP_ME", "kept")
    cmd = 'echo "proxy=${http_proxy-}${HTTPS_PROXY-}${all_proxy-}" ; echo "keep=$KEEP_ME"; echo "foo=$FOO"; echo "id=$HARNESS_RUN_ID"'
    rid = uid("envrun")

    async def go():
        t = await connect(HostSpec(host="localhost", transport="local"))
        lo = Launcher(t)
        h = await lo.launch(cmd, workdir=str(tmp_path), run_id=rid, env={"FOO": "a b'c $x"}, unset=PROXY_VARS)
        await finish(lo, h)
        return (await t.read(h.log_path)).decode()

    log = arun(go())
    assert log.splitlines() == ["proxy=", "keep=kept", "foo=a b'c $x", f"id={rid}"]


def test_env_names_are_checked(tmp_path):
    async def go():
        lo = Launcher(await connect(HostSpec(host="localhost", transport="local")))
        await lo.launch("true", workdir=str(tmp_path), unset=["A; rm -rf /"])

    with pytest.raises(BadInput):
        arun(go())
    assert not (tmp_path / ".harness").exists()


def test_second_launch_is_refused_while_one_is_alive(spec, tmp_path):
    first, second = uid("first"), uid("second")

    async def go():
        t = await connect(spec)
        lo = Launcher(t)
        h = await lo.launch("sleep 300", workdir=str(tmp_path), run_id=first)
        try:
            with pytest.raises(RunActive) as info:
                await lo.launch("true", workdir=str(tmp_path), run_id=second)
        finally:
            await lo.stop(h, grace=2)
        again = await lo.launch("true", workdir=str(tmp_path), run_id=uid("third"))  # allowed once stopped
        await finish(lo, again)
        await t.close()
        return h, info.value

    h, err = arun(go())
    assert err.run_id == first and err.pid == h.pid
    assert first in str(err) and str(h.pid) in str(err) and "\n" not in str(err)
    assert not (tmp_path / ".harness/runs" / second).exists()


def test_stale_pid_without_exit_code_does_not_block(tmp_path):
    """A supervisor that was killed leaves a pid and no exit_code; a dead pid is not a live run."""
    stale = tmp_path / ".harness/runs/stale"
    stale.mkdir(parents=True)
    (stale / "pid").write_text("999999999\n")
    (stale / "boot_id").write_text(open("/proc/sys/kernel/random/boot_id").read())

    async def go():
        lo = Launcher(await connect(HostSpec(host="localhost", transport="local")))
        assert not (await lo.poll(await lo.find(str(tmp_path), "stale"))).alive
        h = await lo.launch("exit 0", workdir=str(tmp_path))
        return await finish(lo, h)

    assert arun(go()).exit_code == 0


def test_a_run_that_just_ended_stays_alive_until_its_supervisor_wrote_the_code(tmp_path):
    """Between the run's exit and the supervisor's `put exit_code` a poll used to see a dead run
    with no code (a Slurm test caught it under load). The supervisor here takes a second over it;
    a live process that is not the supervisor (its pid reused) never keeps a dead run alive."""
    boot = open("/proc/sys/kernel/random/boot_id").read()
    rds = {}
    for name in ("ending", "reused"):
        rd = rds[name] = tmp_path / f".harness/runs/{name}"
        rd.mkdir(parents=True)
        (rd / "pid").write_text("999999999\n")
        (rd / "boot_id").write_text(boot)
        (rd / "wrapper.sh").write_text("sleep 1.5\nprintf '7\\n' > exit_code\n")
    sup = subprocess.Popen(["sh", "wrapper.sh"], cwd=rds["ending"])
    other = subprocess.Popen(["sleep", "30"])
    (rds["ending"] / "sup").write_text(f"{sup.pid}\n")
    (rds["reused"] / "sup").write_text(f"{other.pid}\n")

    async def go():
        lo = Launcher(await connect(HostSpec(host="localhost", transport="local")))
        first = await lo.poll(await lo.find(str(tmp_path), "ending"))
        reused = await lo.poll(await lo.find(str(tmp_path), "reused"))
        sup.wait(10)
        return first, reused, await lo.poll(await lo.find(str(tmp_path), "ending"))

    try:
        first, reused, last = arun(go())
    finally:
        other.kill()
        other.wait()
    assert (first.alive, first.exit_code) == (True, None)
    assert (reused.alive, reused.exit_code) == (False, None)
    assert (last.alive, last.exit_code) == (False, 7)


def test_a_poll_never_sees_a_dead_run_without_its_code(tmp_path):
    """A supervisor that writes exit_code and exits while a poll reads the run's state: every poll
    that calls the run dead has its code (reading the files before asking whether it was alive
    once gave alive=False, exit_code=None: a Slurm test failed on it in CI). Supervisors end at
    random moments under a stream of polls; 40 endings."""
    boot = open("/proc/sys/kernel/random/boot_id").read()
    rng = random.Random(7)

    async def one(lo, i):
        rd = tmp_path / f".harness/runs/r{i}"
        rd.mkdir(parents=True)
        (rd / "pid").write_text("999999999\n")
        (rd / "boot_id").write_text(boot)
        (rd / "wrapper.sh").write_text(f"sleep {rng.uniform(0.05, 0.3):.3f}\n"
                                       "printf '1\\n' > ended; printf '9\\n' > .x; mv -f .x exit_code\n")
        sup = subprocess.Popen(["sh", "wrapper.sh"], cwd=rd)
        (rd / "sup").write_text(f"{sup.pid}\n")
        h = await lo.find(str(tmp_path), f"r{i}")
        try:
            for _ in range(2000):
                st = await lo.poll(h)
                if not st.alive:
                    return st
        finally:
            sup.wait(10)
        raise AssertionError(f"r{i} never ended")

    async def go():
        lo = Launcher(await connect(HostSpec(host="localhost", transport="local")))
        return [await one(lo, i) for i in range(40)]

    assert [st.exit_code for st in arun(go())] == [9] * 40


def test_a_new_controller_finds_the_run_by_id(spec, tmp_path):
    again = uid("again")

    async def go():
        t1 = await connect(spec)
        h = await Launcher(t1).launch("sleep 300", workdir=str(tmp_path), run_id=again, log_name="train.log")
        await t1.close()
        t2 = await connect(spec)  # a new controller: new transport, new Launcher
        lo = Launcher(t2)
        found = await lo.find(str(tmp_path), again)
        missing = await lo.find(str(tmp_path), "never")
        st = await lo.poll(found)
        await lo.stop(found, grace=2)
        ended = await finish(lo, found)
        await t2.close()
        return h, found, missing, st, ended

    h, found, missing, st, ended = arun(go())
    assert found == h and found.log_path.endswith(f"/{again}/train.log")
    assert missing is None
    assert st.alive and st.exit_code is None
    assert ended.exit_code == 128 + 15


def test_run_survives_the_launching_transport_closing(spec, tmp_path):
    async def go():
        t1 = await connect(spec)
        h = await Launcher(t1).launch("sleep 300", workdir=str(tmp_path))
        await t1.close()
        t2 = await connect(spec)
        lo = Launcher(t2)
        st = await lo.poll(h)
        await lo.stop(h, grace=2)
        await t2.close()
        return h, st

    h, st = arun(go())
    assert st.alive and st.exit_code is None


TREE = """
sh -c 'echo $$ > child; sleep 300 & echo $! > grandchild; wait' &
sh -c 'trap "" TERM; echo $$ > stubborn; while :; do sleep 1; done' &
setsid sh -c 'echo $$ > escapee; sleep 300 & echo $! > escapee_child; wait' &
wait
"""
TREE_PIDS = ["child", "grandchild", "stubborn", "escapee", "escapee_child"]


def test_stop_kills_the_whole_tree_including_setsid_escapees(spec, tmp_path):
    async def go():
        t = await connect(spec)
        lo = Launcher(t)
        h = await lo.launch(TREE, workdir=str(tmp_path), run_id=uid("tree"))
        pids = await until(pid_files(tmp_path, TREE_PIDS))
        assert all(running(p) for p in pids.values())
        escapee_sid = os.getsid(pids["escapee"])
        report = await lo.stop(h, grace=1, cleanup=["touch cleaned"])
        st = await lo.poll(h)
        await t.close()
        return h, pids, escapee_sid, report, st

    h, pids, escapee_sid, report, st = arun(go())
    assert escapee_sid != h.pgid  # it really had left the run's session
    assert [p for p in [h.pid, *pids.values()] if running(p)] == []
    assert report.ok and report.survivors == []
    assert {h.pid, pids["escapee"], pids["escapee_child"]} <= set(report.terminated)
    assert pids["stubborn"] in report.killed  # it ignored TERM
    assert (tmp_path / "cleaned").exists() and report.cleanup[0].ok
    assert not st.alive and st.exit_code == 128 + 15 and st.ended


def test_a_stop_after_the_run_ended_spares_the_group_that_got_its_number(tmp_path):
    """pid_max is often 32768: once a run's group has ended its number comes round to another
    group within minutes on a busy host. Stopping (or sweeping) the ended run must not signal
    that group; it did (another test's minichain run was TERMed that way under pytest-xdist)."""
    import subprocess
    import sys

    from dataclasses import replace

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        async def go():
            t = await connect(HostSpec(host="localhost", transport="local"))
            lo = Launcher(t)
            h = await lo.launch("echo done", workdir=str(tmp_path), run_id=uid("ended"))
            await finish(lo, h)
            reused = replace(h, pgid=stranger.pid)  # the ended run's group number, now the stranger's
            report = await lo.stop(reused, grace=1)
            await t.close()
            return report
        report = arun(go())
        assert running(stranger.pid), "a stop signalled a group that is no longer the run's"
        assert stranger.pid not in report.terminated + report.killed and report.ok
    finally:
        stranger.kill()
        stranger.wait()


def test_cpu_activity_tells_busy_from_sleeping(spec, tmp_path):
    async def measure(lo, cmd, run_id):
        h = await lo.launch(cmd, workdir=str(tmp_path), run_id=run_id)
        try:
            return await lo.cpu_activity(h, interval=0.5)
        finally:
            await lo.stop(h, grace=2)

    async def go():
        t = await connect(spec)
        lo = Launcher(t)
        busy = await measure(lo, "while :; do :; done", uid("busy"))
        idle = await measure(lo, "sleep 300", uid("idle"))
        await t.close()
        return busy, idle

    busy, idle = arun(go())
    assert busy["cpu_seconds"] > 0.1 and busy["processes"] >= 1
    assert idle["cpu_seconds"] < 0.05 and idle["processes"] >= 1


def test_missing_workdir_is_a_clear_error(tmp_path):
    async def go():
        lo = Launcher(await connect(HostSpec(host="localhost", transport="local")))
        await lo.launch("true", workdir=str(tmp_path / "nope"))

    with pytest.raises(BadInput, match="does not exist"):
        arun(go())
