"""Commands that must not run twice: the run-once guard on real processes, and through the
reconnecting layer over the real sshd restarted while the command runs (both transports)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import pytest

from harness.remote.once import INTERRUPTED, Ops, guard
from harness.remote.reconnect import Reconnecting
from harness.remote.transport import HostSpec, connect
from sshd import SshLab
from test_sessions import wait_for

# the module fixture is built once: its tests share one xdist worker
pytestmark = pytest.mark.xdist_group("test_once")


def sh(script: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(["/bin/sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kw)


def test_a_repeat_attaches_to_the_first_run_and_gets_its_output(tmp_path):
    counter = tmp_path / "counter"
    g = guard(f"echo ran >> {counter}; echo out; echo err >&2; sleep 1; exit 3", str(tmp_path / ".harness/ops/s/1"),
              str(tmp_path))
    first = sh(g)
    wait_for(lambda: (tmp_path / ".harness/ops/s/1.pid").exists(), "the first run")
    repeat = sh(g)  # sent again while the first still runs
    for p in (repeat, first):
        out, err = p.communicate(timeout=30)
        assert (p.returncode, out, err) == (3, "out\n", "err\n")
    again = sh(g)  # and after it ended
    assert again.communicate(timeout=30) == ("out\n", "err\n") and again.returncode == 3
    assert counter.read_text() == "ran\n"


def test_a_repeat_says_when_the_first_run_was_killed(tmp_path):
    g = guard("echo started; sleep 30", str(tmp_path / ".harness/ops/s/1"), str(tmp_path))
    first = sh(g)
    wait_for(lambda: (tmp_path / ".harness/ops/s/1.out").exists() and (tmp_path / ".harness/ops/s/1.out").read_text(),
             "the first run's output")
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    out, err = sh(g).communicate(timeout=30)
    assert out == "started\n" and "ended without an exit status" in err


def test_killing_a_repeat_kills_the_first_run(tmp_path):
    g = guard("sleep 30", str(tmp_path / ".harness/ops/s/1"), str(tmp_path))
    first = sh(g)
    wait_for(lambda: (tmp_path / ".harness/ops/s/1.pid").exists(), "the first run")
    repeat = sh(g)
    wait_for(lambda: "sleep" in children(repeat.pid), "the repeat to be waiting for the first run")
    os.killpg(repeat.pid, signal.SIGTERM)  # the repeat timed out
    assert repeat.wait(10) == 143 and first.wait(10) == 143


def children(pid: int) -> list[str]:
    """The command names of `pid`'s children, from /proc."""
    out = []
    for stat in os.listdir("/proc"):
        if stat.isdigit():
            try:
                text = open(f"/proc/{stat}/stat").read()
            except OSError:
                continue
            name, rest = text.split("(", 1)[1].rsplit(")", 1)
            if int(rest.split()[1]) == pid:
                out.append(name)
    return out


def test_no_record_without_the_workdir(tmp_path):
    """A guard never creates a missing workdir: the command runs as it is (and fails on its own)."""
    r = subprocess.run(["/bin/sh", "-c", guard("echo plain", str(tmp_path / "gone/.harness/ops/s/1"),
                                               str(tmp_path / "gone"))], capture_output=True, text=True)
    assert r.stdout == "plain\n" and not (tmp_path / "gone").exists()
    assert INTERRUPTED == 125


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = SshLab(tmp_path_factory.mktemp("once")).start()
    yield lab
    lab.stop()


@pytest.mark.parametrize("kind", ["asyncssh", "paramiko"])
def test_a_command_cut_by_an_sshd_restart_runs_once(lab, tmp_path, kind):
    """The agent's command is running when sshd (listener and sessions) is killed: the layer
    reconnects and sends it again, and gets the first run's output; it ran once."""
    box = lab.servers["box"]
    spec = HostSpec("box", ssh_config=str(lab.ssh_config), transport=kind)
    counter = tmp_path / "counter"
    ops = Ops(str(tmp_path), "s", "p")
    changes: list[str] = []

    async def go():
        link = Reconnecting(await connect(spec), lambda: connect(spec), grace=60,
                            on_change=lambda what, **kw: changes.append(what))
        try:
            task = asyncio.create_task(link.run(ops(f"echo ran >> {counter}; sleep 2; echo done"), timeout=30))
            await asyncio.to_thread(wait_for, lambda: counter.exists(), "the command to start")
            await asyncio.to_thread(box.restart, 0.3)
            return await task
        finally:
            await link.close()
    r = asyncio.run(go())
    assert r.ok and r.stdout == "done\n" and counter.read_text() == "ran\n"
    assert changes == ["down", "up"]


def test_the_guard_leaves_the_user_s_variables_as_they_are(tmp_path):
    # one-letter names are common in people's environments; the guard's own names must not clobber them
    g = guard('echo "$B $C $D $P"', str(tmp_path / ".harness/ops/s/1"), str(tmp_path))
    p = sh(g, env={**os.environ, "B": "b", "C": "c", "D": "d", "P": "p"})
    assert p.communicate(timeout=30) == ("b c d p\n", "") and p.returncode == 0
    assert (tmp_path / ".harness/ops/s/1.rc").read_text() == "0\n"
