"""A night's weather, through real processes: the loopback sshd is restarted — listener and every
session process killed at once, down for a moment, back on the same port — at seeded random
moments while `harness run` sessions go on over it, on both SSH transports. Each session must end
exactly as an undisturbed one does (same verdicts and fingerprints, same end), with no journal
event lost or written twice, no run launched twice, nothing of the run left alive, and its
recording (dropped connections and reconnections included) must replay. Then the network is cut
for longer than the grace: the session ends `unreachable`, says so, notifies, and leaves the run
as it was; once the network is back, `continue` re-attaches to that run."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from harness.agent.scripted import ScriptedModel, ScriptedServer
from harness.demo import SCRIPT
from harness.record import read_recording
from harness.session.journal import Journal
from netproxy import Relay
from sshd import SshLab
from test_crash import KEY_ENV, check_journal, story, workdir
from test_minichain import PROXY_VARS, processes_of
from test_notify import Endpoint
from test_sessions import HARNESS, wait_for

RESTARTS = 24  # over both transports
# the module fixture is built once: its tests share one xdist worker
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_faults")]


def ssh_spec(root: Path, lab: SshLab, url: str, transport: str, *, port: int | None = None, extra: str = "") -> Path:
    box = lab.servers["box"]
    path = root / "h.yaml"
    path.write_text(
        f"host: 127.0.0.1\nport: {port or box.port}\nuser: {box.user}\nkey: {lab.client_key}\n"
        f"known_hosts: {lab.known_hosts}\ntransport: {transport}\nworkdir: {workdir(root)}\nplaybooks: [minichain]\n"
        f"launch: {{command: bash run.sh, env: {{PYTHON: {os.sys.executable}}}, unset: {sorted(PROXY_VARS)}, settle: 1}}\n"
        f"model: {{base_url: '{url}', name: scripted, api_key_env: {KEY_ENV}}}\n{extra}")
    if port:  # through the relay: its port is the host's, as far as known_hosts goes
        lab.known_hosts.write_text(lab.known_hosts.read_text() + f"[127.0.0.1]:{port} {box.host_pub}\n")
    return path


def env(home: Path) -> dict:
    return {k: v for k, v in os.environ.items() if k not in PROXY_VARS} | {"HARNESS_HOME": str(home), KEY_ENV: "k"}


def start(spec: Path, home: Path) -> subprocess.Popen:
    return subprocess.Popen([str(HARNESS), "run", str(spec)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env(home))


def st_launch(d: Path) -> float:
    return next(e["t"] for e in Journal.read(d / "journal.jsonl") if e["type"] == "launch")


def only_session(home: Path) -> Path:
    return wait_for(lambda: next((home / "sessions").glob("*/journal.jsonl"), None), "the session").parent


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = SshLab(tmp_path_factory.mktemp("weather")).start()
    yield lab
    lab.stop()


def test_sshd_restarts_at_random_moments_change_nothing(lab, tmp_path):
    rng = random.Random(int(os.environ.get("HARNESS_FAULT_SEED", "20261201")))
    box = lab.servers["box"]
    restarts, per_transport, seen = [], RESTARTS // 2, Counter()
    with ScriptedServer(ScriptedModel.from_file(SCRIPT)) as server:
        ref_home = tmp_path / "ref" / "home"
        ref = start(ssh_spec(tmp_path / "ref", lab, server.url, "asyncssh"), ref_home)
        assert ref.wait(300) == 0, ref.communicate()
        reference = story(Journal.read(only_session(ref_home) / "journal.jsonl"))
        assert [v[1] for v in reference] == ["crash", "crash", "pass"]
        n = 0
        for transport in ("asyncssh", "paramiko"):
            done = 0
            while done < per_transport:
                n += 1
                root = tmp_path / f"s{n}"
                home = root / "home"
                proc = start(ssh_spec(root, lab, server.url, transport), home)
                # from its first event on (a host down when a session starts fails its start-up checks, at once)
                wait_for(lambda: list((home / "sessions").glob("*/journal.jsonl"))
                         and Journal.read(next((home / "sessions").glob("*/journal.jsonl"))), "the session to start")
                here = rng.randint(1, 3)  # restarts in this session
                while done < per_transport and here and proc.poll() is None:
                    here -= 1
                    time.sleep(rng.uniform(0.1, 2.5))
                    if proc.poll() is not None:
                        break  # the session ended before this restart
                    restarts.append(box.restart(down=rng.uniform(0.0, 1.5)))
                    done += 1
                out, err = proc.communicate(timeout=300)
                assert proc.returncode == 0, f"{transport} session {n}: {out[-3000:]}{err[-2000:]}"
                d = only_session(home)
                events = Journal.read(d / "journal.jsonl")
                check_journal(events)  # nothing lost or twice, one launch and one verdict per attempt
                assert events[-1]["reason"] == "passed" and story(events) == reference, (transport, n)
                downs = Counter(e["type"] for e in events)
                assert downs["unreachable"] == downs["reachable"]  # every outage ended
                runs = sorted(p.name for p in (root / "minichain" / ".harness" / "runs").iterdir())
                assert runs == [f"{d.name}-{a}" for a in (1, 2, 3)]  # no second launch, not even a claim
                assert processes_of(root / "minichain") == []
                r = subprocess.run([str(HARNESS), "replay", str(d), "--json"], capture_output=True, text=True,
                                   env=env(home), timeout=120)
                assert r.returncode == 0, r.stdout[-3000:] + r.stderr
                seen["outages"] += downs["unreachable"]
                seen["seconds down"] += sum(e["after"] for e in events if e["type"] == "reachable")
                for e in read_recording(d / "recording.jsonl"):
                    if (e.get("error") or {}).get("type") == "ConnectionLost":
                        seen[f"{e['k']} calls cut"] += 1
                    seen["reconnections"] += e["k"] == "connect" and "error" not in e
                seen["sessions"] += 1
                verdicts = [e for e in events if e["type"] == "verdict"]
                assert all(0 <= v["accel_seconds"] <= v["run_seconds"] + 1e-6 for v in verdicts)
                seen["accel seconds not counted"] += sum(v["run_seconds"] - v["accel_seconds"] for v in verdicts)
    assert len(restarts) == RESTARTS and all(k >= 1 for k in restarts)
    # every restart dropped the connection under a session (two in one outage count once)
    assert seen["outages"] >= RESTARTS // 2 and seen["reconnections"] == seen["outages"], seen
    # while the link was down the runs' accelerator time was not counted (no more than the outages,
    # whose lengths the journal rounds to the millisecond: half of one per outage)
    assert 0 < seen["accel seconds not counted"] <= seen["seconds down"] + 0.0005 * seen["outages"] + 1e-6, seen
    print("\nfault test:", {k: round(v, 1) for k, v in seen.items()})


def test_a_network_cut_past_the_grace_ends_unreachable_and_leaves_the_run(lab, tmp_path):
    box = lab.servers["box"]
    relay = Relay(box.port)
    work = tmp_path / "work"
    work.mkdir()
    (work / "run.sh").write_text("echo 'minichain driver pid=1: config x, seed 0'\nexec sleep 300\n")
    home = tmp_path / "home"
    try:
        with Endpoint() as sink, ScriptedServer(ScriptedModel([])) as server:
            spec = ssh_spec(tmp_path, lab, server.url, "asyncssh", port=relay.port,
                            extra=f"connection: {{keepalive: 0.5, grace: 4}}\nnotify: ['json://127.0.0.1:{sink.port}/']\n")
            spec.write_text(spec.read_text().replace(f"workdir: {tmp_path / 'minichain'}", f"workdir: {work}"))
            proc = start(spec, home)
            d = only_session(home)
            wait_for(lambda: any(e["type"] == "launch" for e in Journal.read(d / "journal.jsonl")), "the launch")
            relay.cut.set()
            st = wait_for(lambda: (lambda s: s if s["unreachable_since"] else None)(json.loads(subprocess.run(
                [str(HARNESS), "status", d.name, "--json"], capture_output=True, text=True, env=env(home)).stdout)),
                "status to say the host is unreachable", 60)
            assert st["running"] and st["unreachable_since"] >= st_launch(d)
            line = subprocess.run([str(HARNESS), "status", d.name], capture_output=True, text=True, env=env(home)).stdout
            assert "unreachable since " in line
            out, err = proc.communicate(timeout=120)
            events = Journal.read(d / "journal.jsonl")
            end = events[-1]
            assert proc.returncode == 1 and end["type"] == "end" and end["reason"] == "unreachable", out + err
            assert "left as it was on the host" in end["detail"] and end["left_run"]["pid"]
            assert [e["type"] for e in events].count("unreachable") == 1 and "reachable" not in [e["type"] for e in events]
            assert processes_of(work)  # the run goes on, as the end says
            status = json.loads(subprocess.run([str(HARNESS), "status", d.name, "--json"], capture_output=True,
                                               text=True, env=env(home)).stdout)
            assert status["ended"] == "unreachable" and "connection.grace" in status["error"]
            wait_for(lambda: sink.got, "the notification")
            assert sink.titles() == [f"harness {d.name}: host unreachable"]
            relay.cut.clear()  # the network is back: continue re-attaches to the run it left
            c = subprocess.run([str(HARNESS), "continue", d.name, "--offline"], capture_output=True, text=True,
                               env=env(home), timeout=120)
            assert c.returncode == 0, c.stdout + c.stderr
            wait_for(lambda: any("re-attached to run" in e.get("text", "") for e in Journal.read(d / "journal.jsonl")),
                     "the re-attach")
            assert [e["type"] for e in Journal.read(d / "journal.jsonl")].count("launch") == 1
            assert subprocess.run([str(HARNESS), "stop", d.name], env=env(home), capture_output=True).returncode == 0
            wait_for(lambda: not processes_of(work), "the run to be stopped")
        # the whole story — the outage, the unreachable end, the continue — replays
        r = subprocess.run([str(HARNESS), "replay", str(d)], capture_output=True, text=True, env=env(home), timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        relay.close()


@pytest.mark.parametrize("kind", ["asyncssh", "paramiko"])
def test_keepalives_hold_an_idle_connection_through_a_nat(lab, tmp_path, kind):
    """A NAT that forgets a mapping after 1.5 s without traffic: with keepalives every 0.3 s an idle
    connection lives through 4 s of silence; without them (30 s) the same silence kills it."""
    import asyncio

    from harness.errors import ConnectionLost
    from harness.remote.transport import HostSpec, connect

    box = lab.servers["box"]
    relay = Relay(box.port, idle_timeout=1.5)
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{relay.port} {box.host_pub}\n")

    async def idle(keepalive: float):
        t = await connect(HostSpec("127.0.0.1", port=relay.port, user=box.user, key=str(lab.client_key),
                                   known_hosts=str(known), transport=kind, keepalive=keepalive))
        try:
            assert (await t.run("echo before")).stdout == "before\n"
            await asyncio.sleep(4)  # nothing to say for a while (a graph compilation, say)
            return (await t.run("echo after", timeout=10)).stdout
        finally:
            await t.close()
    try:
        assert asyncio.run(idle(0.3)) == "after\n"
        assert relay.accepted == 1 and relay.idle_closed == 0
        with pytest.raises(ConnectionLost):
            asyncio.run(idle(30))
        assert relay.idle_closed == 1
    finally:
        relay.close()
