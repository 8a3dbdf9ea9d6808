"""The post-mortem gather on a real host (this machine, directly and over the loopback sshd):
Ray's session logs, raylet, CANN plogs laid out as the engines lay them out; only files written
since the run started that say something went wrong, bounded, and parsed back into sections."""

import asyncio
import os
import time

import pytest

from harness.remote.postmortem import MAX_FILES, gather, sections
from harness.remote.transport import HostSpec, connect


def layout(tmp_path):
    since = time.time() - 5
    logs = tmp_path / "ray" / "session_2026-12-02_14-07-54_1" / "logs"
    logs.mkdir(parents=True)
    (tmp_path / "ray" / "session_latest").symlink_to(logs.parent)
    wid = "399c167521cdc3cd355e55dcbb26e4ba58dbbb2f7358224a05d43c3e"
    (logs / f"worker-{wid}-01000000-4414.err").write_text(
        "Traceback (most recent call last):\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    (logs / f"worker-{wid}-01000000-4414.out").write_text("step 1 done\n")  # healthy: not read
    old = logs / f"worker-{wid}-01000000-17.err"
    old.write_text("RuntimeError: from yesterday's run\n")
    os.utime(old, (since - 86400, since - 86400))
    (logs / "raylet.out").write_text("[2026-12-02 14:08:21,724 I 9190 9190] node_manager.cc:1: started\n"
                                     "[2026-12-02 14:08:30,001 W 9190 9190] node_manager.cc:2: Worker 4414 died "
                                     "unexpectedly, exit_type=SYSTEM_ERROR\n")
    work = tmp_path / "work"
    plogs = work / "logs" / "ascend" / "run-1" / "plog"
    plogs.mkdir(parents=True)
    (plogs / "plog-5150_20261202140830.log").write_text(
        "[INFO] HCCL(5150,python):2026-12-02-14:08:30.1 [init] start\n"
        "[ERROR] HCCL(5150,python):2026-12-02-14:08:31.2 [hccl_comm.cc:9] bind socket failed, port 60000 in use\n")
    for i in range(MAX_FILES + 5):  # more troubled workers than the bound
        (logs / f"worker-{wid}-01000000-{9000 + i}.err").write_text("ValueError: bad\n")
    return since, work


@pytest.mark.parametrize("transport", ["local", "asyncssh"])
def test_gather_reads_what_changed_since_the_run_started_and_is_bounded(tmp_path, transport, request):
    os.chmod(tmp_path, 0o755)
    since, work = layout(tmp_path)
    if transport == "local":
        spec = HostSpec(host="localhost", transport="local")
    else:
        lab = request.getfixturevalue("ssh_lab")
        spec = HostSpec(host="box", transport="asyncssh", ssh_config=str(lab.ssh_config),
                        known_hosts=str(lab.known_hosts))

    async def go():
        t = await connect(spec)
        try:
            return await gather(t, ray_temp=str(tmp_path / "ray"), since=since, workdir=str(work), run_id="run-1")
        finally:
            await t.close()
    found = dict(sections(asyncio.run(go())))
    workers = [k for k in found if k.startswith("worker-")]
    assert len(workers) == MAX_FILES
    assert all(k.endswith(".err") for k in workers) and "worker-17.err" not in found
    assert b"Worker 4414 died" in found["raylet.out"] and b"started" not in found["raylet.out"]
    plog = found["plog-5150_20261202140830"]
    assert b"bind socket failed" in plog and b"[INFO]" not in plog


def test_the_troubled_worker_is_among_the_newest_and_nothing_is_empty(tmp_path):
    since, work = layout(tmp_path)
    newest = next((tmp_path / "ray/session_latest/logs").glob("worker-*-4414.err"))
    os.utime(newest, (time.time() + 5, time.time() + 5))

    async def go():
        t = await connect(HostSpec(host="localhost", transport="local"))
        try:
            return await gather(t, ray_temp=str(tmp_path / "ray"), since=since, workdir=str(work), run_id="x")
        finally:
            await t.close()
    text = asyncio.run(go())
    found = sections(text)
    assert found[0] == ("worker-4414.err", b"Traceback (most recent call last):\ntorch.OutOfMemoryError: "
                                           b"CUDA out of memory.\n\n")
    assert all(data.strip() for _, data in found)
    assert not any(label.startswith("plog") for label, _ in found)  # run x has no plogs of its own


def test_nothing_to_gather_is_empty_and_an_unknown_start_asks_nothing():
    assert sections("") == [] and sections("@@harness-file a\n\n@@harness-file b\nx\n") == [("b", b"x\n")]

    async def go():
        return await gather(None, ray_temp="/nonexistent", since=None, workdir="/", run_id="r")
    assert asyncio.run(go()) == ""
