"""Many nodes, through real sshd: the head (`box`) and a worker node (`jump`), each its own sshd
with its own port, host key and workdir, reached by their ~/.ssh/config aliases. A failure whose
only trace is in the worker node's log is the verdict's root cause, with the node's name on it;
the spec's cleanup runs on the node too; a node that goes away mid-run is an infrastructure
failure naming it; the recording of a multi-node session replays. Plus the pure parts: spec
validation and the timestamp merge."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

import pytest

from harness.analyze.timeorder import merge, stamp
from harness.errors import SpecError
from harness.replay.run import replay_fixture
from harness.session.journal import Journal
from harness.session.runner import run_spec
from harness.spec import dump_spec, load_spec
from sshd import SshLab
from test_loop import RANK_PY
from test_minichain import processes_of
from names import unique

DRIVER = r"""#!/bin/bash
ts() { date '+%F %T,%3N'; }
echo "$(ts) INFO driver: cluster of 2 nodes up, starting the rollout workers"
sleep 0.5
mkdir -p "$W1/logs"
{ echo "$(ts) ERROR rollout worker 7: collective init failed"
  echo "Traceback (most recent call last):"
  echo '  File "/w1/worker.py", line 12, in init_collective'
  echo "RuntimeError: HCCL function error: HcclCommInitRootInfo, error code is 7 (planted on w1)"; } >> "$W1/logs/worker.log"
sleep 1
echo "$(ts) ERROR driver: a rollout worker died"
echo "Traceback (most recent call last):"
echo '  File "/head/driver.py", line 40, in main'
echo "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."
exit 1
"""

LONG = r"""#!/bin/bash
for i in $(seq 1 600); do echo "$(date '+%F %T') INFO driver: step $i"; sleep 0.1; done
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = SshLab(tmp_path_factory.mktemp("nodes")).start()
    yield lab
    lab.stop()


def cluster(tmp_path: Path, lab: SshLab, script: str, extra: str = "") -> tuple[Path, Path, Path]:
    """A spec for head `box` and node `w1` (alias `jump`); returns it, the head's and the node's workdir."""
    head, w1 = tmp_path / "head", tmp_path / "w1"
    head.mkdir()
    (w1 / "logs").mkdir(parents=True)
    (head / "run.sh").write_text(script)
    spec = tmp_path / "h.yaml"
    spec.write_text(textwrap.dedent(f"""\
        host: box
        ssh_config: {lab.ssh_config}
        workdir: {head}
        launch: {{command: bash run.sh, env: {{W1: "{w1}"}}, settle: 1}}
        nodes:
          - {{host: jump, name: w1, workdir: {w1}, logs: [logs/worker.log]}}
        cleanup: ["touch cleaned-by-harness"]
        budgets: {{infra_retries: 0, relaunches: 0}}
        """) + extra)
    return spec, head, w1


def session(spec: Path, directory: Path):
    return asyncio.run(asyncio.wait_for(run_spec(load_spec(spec), directory, offline=True), 120))


def test_a_failure_only_a_worker_nodes_log_shows_is_the_root_cause_named_by_its_node(lab, tmp_path):
    spec, head, w1 = cluster(tmp_path, lab, DRIVER)
    d = tmp_path / unique("session")
    session(spec, d)
    ev = Journal.read(d / "journal.jsonl")
    assert next(e for e in ev if e["type"] == "session")["nodes"] == ["w1"]
    v = next(e for e in ev if e["type"] == "verdict")
    assert v["outcome"] == "crash" and "HcclCommInitRootInfo" in v["root"]["text"], v
    assert v["root"]["category"] == "distributed_comm_hang", v["root"]
    log = (d / "attempts" / "01.log").read_text()
    assert "(log:w1:worker.log) RuntimeError: HCCL function error" in log
    # the merged log has the node's error before the driver's wrapper: they are in time order
    assert log.index("(planted on w1)") < log.index("ActorDiedError")
    digest = (d / "attempts" / "01.digest.txt").read_text()
    assert "w1:worker.log" in digest, digest
    # the cleanup ran on the head and on the node, each in its own workdir
    assert (head / "cleaned-by-harness").exists() and (w1 / "cleaned-by-harness").exists()
    (d / "spec.yaml").write_text(dump_spec(load_spec(spec)))  # what `harness run` freezes
    outcome = asyncio.run(replay_fixture(d, tmp_path / "replay"))
    assert outcome.ok, (outcome.divergence, outcome.differences)
    # each node's calls are on the tape with its name: a replay without the node would diverge
    rec = (d / "recording.jsonl").read_text()
    assert '"node":"w1"' in rec


def test_a_node_lost_mid_run_is_an_infrastructure_failure_that_names_it(lab, tmp_path):
    spec, head, w1 = cluster(tmp_path, lab, LONG, "connection: {node_grace: 3}\n")
    (w1 / "logs" / "worker.log").write_text("worker up\n")
    d = tmp_path / unique("session")
    jump = lab.servers["jump"]

    async def go():
        task = asyncio.create_task(run_spec(load_spec(spec), d, offline=True))
        for _ in range(200):  # the run is going: the driver printed
            await asyncio.sleep(0.1)
            if (d / "attempts" / "01.log").exists() and b"step 5" in (d / "attempts" / "01.log").read_bytes():
                break
        await asyncio.to_thread(jump.kill)  # the node's sshd dies with every connection to it
        return await asyncio.wait_for(task, 120)
    try:
        asyncio.run(go())
    finally:
        jump.start(jump.client_pub, jump.client_key)
    ev = Journal.read(d / "journal.jsonl")
    v = next(e for e in ev if e["type"] == "verdict")
    assert v["root"]["signature"] == "harness_node_lost" and v["root"]["class"] == "infra", v
    assert "node w1 (jump) lost" in v["root"]["text"], v["root"]
    assert any(e["type"] == "note" and "node w1 unreachable" in e["text"] for e in ev)
    assert ev[-1]["type"] == "end"
    assert not processes_of(head), "the head's run was stopped"


RANKS = "#!/bin/bash\ncat > rank.py <<'PY'\n" + RANK_PY + r"""PY
cp rank.py "$W1/rank.py"
# rank 1 runs on the worker node, started there the way srun or a Ray job starts a worker: with the
# run's environment (its marker among it), outside the head's process group
ssh -F "$SSH_CONFIG" jump "cd $W1 && HARNESS_RUN_ID=$HARNESS_RUN_ID PATH=$PATH RANK=1 exec python3 rank.py >> logs/worker.log 2>&1" &
RANK=0 exec python3 rank.py
"""


def test_a_hang_s_evidence_holds_each_worker_node_s_processes_and_the_rank_they_wait_for(lab, tmp_path):
    """Two ranks, one on the head waiting in the update's all-reduce, one on the worker node still
    scoring: before the run is stopped, each node's processes are sampled through its own link (py-spy
    found on the PATH the run activated, not the SSH session's), and read together they say the
    head's rank waits for the node's. The loopback lab's two hosts are one machine, so each also sees
    the other's processes: the assertions hold for what the node's own sample adds."""
    spec, head, w1 = cluster(tmp_path, lab, RANKS)
    venv = Path(sys.executable).parent
    spec.write_text(spec.read_text().replace(
        f'env: {{W1: "{w1}"}}, settle: 1',
        f'env: {{W1: "{w1}", SSH_CONFIG: "{lab.ssh_config}", PATH: "{venv}:/usr/bin:/bin"}}, settle: 1, stall: 2'))
    d = tmp_path / unique("session")
    try:
        session(spec, d)
    finally:
        left = processes_of(w1)  # the node's rank: the head's stop reaches it on loopback, by its marker
        for pid in [int(x.split(":")[0]) for x in left]:
            os.kill(pid, 9)
    assert not left, left
    ev = Journal.read(d / "journal.jsonl")
    v = next(e for e in ev if e["type"] == "verdict")
    assert v["outcome"] == "hang", v
    evidence = (d / "attempts" / "01.evidence.txt").read_text()
    summary = evidence.split("\n\n")[0]
    assert "process(es) of the run on the head and 1 worker node(s), sampled for 1 s:" in summary, summary
    on_node = [x for x in summary.splitlines() if " on w1 " in x]
    assert any("in compute_score (" in x for x in on_node), summary  # the node's own sample, its stack read
    assert "waited on: pid " in summary and "in compute_score (" in summary.split("waited on: pid ")[1], summary
    assert "\n== node w1\n" in evidence and "compute_score" in evidence.split("\n== node w1\n")[1]
    rec = (d / "recording.jsonl").read_text()
    assert rec.count("py-spy") >= 2 and '"node":"w1"' in rec  # the evidence command went through the node's link too


def test_a_node_that_cannot_be_reached_at_start_is_a_one_line_error_naming_it(lab, tmp_path):
    spec, _, _ = cluster(tmp_path, lab, LONG)
    spec.write_text(spec.read_text().replace("host: jump,", "host: jump, port: 9,"))
    d = tmp_path / unique("session")
    with pytest.raises(Exception) as exc:
        session(spec, d)
    assert str(exc.value).startswith("node w1: ") and "\n" not in str(exc.value), exc.value
    assert [e["type"] for e in Journal.read(d / "journal.jsonl")] == ["start_failed"]


def test_nodes_need_distinct_names(tmp_path):
    spec = tmp_path / "h.yaml"
    spec.write_text("host: box\nworkdir: /w\nlaunch: {command: 'true'}\nnodes: [{host: n1}, {host: n2, name: n1}]\n")
    with pytest.raises(SpecError, match="two nodes are called 'n1'"):
        load_spec(spec)
    spec.write_text("host: box\nworkdir: /w\nlaunch: {command: 'true'}\nnodes: [{host: n1, workdir: rel}]\n")
    with pytest.raises(SpecError, match="absolute path on the node"):
        load_spec(spec)


def test_stamps_of_the_stacks_shapes_and_a_merge_that_keeps_blocks_whole():
    same = stamp(b"2026-12-02 19:03:04,500 INFO x")
    assert same == stamp(b"[2026-12-02 19:03:04.5] x") == stamp(b"INFO 12-02 19:03:04.5 [core.py:1] x")
    assert same == stamp(b"I1202 19:03:04.500000 77 socket.cpp:1] x") == stamp(b"(W pid=1) [2026-12-02 19:03:04,5 E 1 2]")
    assert stamp(b"[ERROR] HCCL(9,python):2026-12-02-19:03:04.500.100 [x]") == same
    assert stamp(b"Traceback (most recent call last):") is None and stamp(b"version 1.2.3-4") is None
    assert stamp(b"2026-13-02 19:03:04 not a date") is None
    a = b"2026-12-02 19:03:05 a1\nTraceback (most recent call last):\n  body\n2026-12-02 19:03:08 a2\n"
    b = b"preamble\n2026-12-02 19:03:06 b1\n2026-12-02 19:03:07 b2\n"
    got = [p + ln for p, ln in merge([(b"A ", a), (b"B ", b)])]
    assert got == [b"B preamble\n", b"A 2026-12-02 19:03:05 a1\n", b"A Traceback (most recent call last):\n",
                   b"A   body\n", b"B 2026-12-02 19:03:06 b1\n", b"B 2026-12-02 19:03:07 b2\n",
                   b"A 2026-12-02 19:03:08 a2\n"]
    # one log alone is never reordered, even when its clock goes back
    back = b"2026-12-02 19:03:09 late\n2026-12-02 19:03:01 early\n"
    assert [ln for _, ln in merge([(b"", back)])] == back.splitlines(keepends=True)
