"""Watch one attempt: follow the run's log into the analyzer until the chain passes, a failure
has settled, the run exits, or a silent run is found idle. Waiting is the controller's job,
never the model's; while it waits it only polls (one stat + one read per tick).

A silent run is not called hung on silence alone: after `launch.stall` seconds without a line,
or once the playbook's stage timeout has passed, the run's processes are asked whether they
still use CPU (graph compilation on Ascend can print nothing for twenty minutes). A job its
scheduler has not started yet (Ray's PENDING, a Slurm job waiting for resources) is not silent:
the wait is noted, and only the session's budgets bound it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..analyze import Analyzer
from ..analyze.findings import Finding
from ..analyze.timeorder import merge
from ..analyze.verdict import SILENCE, ended, silence, silent_stage
from ..chain import STAGES
from ..errors import HostUnreachable
from ..remote.follow import Cursor, poll
from ..remote.launch import RunHandle
from ..remote.postmortem import gather, relabel, sections

TICK = 0.25  # seconds between looks at the log
CATCH_UP = 64 << 20  # bytes of one log read in one look while it is behind (a backlog after a drop)
STATUS_EVERY = 1.0  # seconds between looks at whether the run is alive
BUSY_CPU = 0.05  # CPU seconds per second of wall time that count as "still working"
QUIET = 2.0  # seconds without a line after which an open error block is complete


@dataclass
class Watch:
    """What the watcher saw; `reason` says why it stopped watching."""

    verdict: dict
    reason: str  # passed | failed | exited | hung | budget:<which>
    exit_code: int | None = None
    evidence: str = ""  # for a hang: where the run's processes wait (remote/evidence.py)
    postmortem: str = ""  # a failed run's files on the host (remote/postmortem.py), fed to the analyzer


class Logs:
    """The run's own log, the spec's `launch.logs` and each worker node's `logs`, read into one
    analyzer. Lines of the other logs get a Ray-style `(log:NAME) ` prefix (`(log:NODE:NAME) ` on
    a worker node): the analyzer keeps each file's tracebacks apart (a prefix is a process to it)
    and the attempt's local copy shows where a line came from. What one look brings from several
    logs is put in timestamp order (analyze/timeorder.py). A worker node that stays out of reach
    is lost: a line saying so joins the log and the node is read no more in this attempt."""

    def __init__(self, ses, handle: RunHandle, an: Analyzer, on_stage, on_data):
        self.ses, self.an, self.on_stage, self.on_data = ses, an, on_stage, on_data
        self.nodes = getattr(ses, "nodes", [])
        extra = [p if p.startswith("/") else f"{handle.workdir}/{p}" for p in ses.spec.launch.logs]
        # (transport, cursor, prefix, node or None for the head)
        self.sources = [(ses.transport, Cursor(handle.log_path), b"", None)] + \
                       [(ses.transport, Cursor(p), f"(log:{_name(p)}) ".encode(), None) for p in extra] + \
                       [(n.t, Cursor(p if p.startswith("/") else f"{n.workdir}/{p}"),
                         f"(log:{n.label}:{_name(p)}) ".encode(), n) for n in self.nodes for p in n.node.logs]

    async def read(self, final: bool = False) -> bool:
        """Feed what is new (at the end, the final partial lines too); True if anything came."""
        got: dict[int, list[bytes]] = {}
        lost: list[bytes] = []
        for i, (t, cur, prefix, node) in enumerate(self.sources):
            if node is not None and node.lost:
                continue
            try:
                taken = 0
                while (chunk := await poll(t, cur)) and chunk.data:
                    got.setdefault(i, []).append(chunk.data)
                    taken += len(chunk.data)
                    if not final and (not chunk.more or taken >= CATCH_UP):
                        break
                if final and await t.stat(cur.path):
                    if rest := await t.read(cur.path, cur.offset):
                        cur.offset += len(rest)
                        got.setdefault(i, []).append(rest + b"\n")
            except HostUnreachable as e:
                if node is None:  # the head: the session's to decide (it waits out its grace)
                    raise
                lost.append(node.lose(e))
                self.ses.note(lost[-1].decode().strip())
        batch = [(self.sources[i][2], b"".join(parts)) for i, parts in got.items()] + [(b"", ln) for ln in lost]
        if batch:
            self._feed(batch)
        return bool(batch)

    async def postmortem(self, handle: RunHandle) -> str:
        """Feed the failed run's evidence on the head and on each worker node (Ray's worker and
        raylet logs, the OOM killer, CANN plogs; remote/postmortem.py) as logs of their own, in
        timestamp order, before the verdict: a worker's own error is a cause where the driver
        printed only that the actor died."""
        self.ses.activity("the run failed: reading its workers' logs on the host")
        spec = self.ses.spec
        text = await gather(self.ses.transport, ray_temp=spec.launch.ray.temp_dir, since=handle.started,
                            workdir=handle.workdir, run_id=handle.run_id)
        if engine := await self.ses.launcher.postmortem(handle):  # e.g. a Ray job's dead actors
            text = f"{text.rstrip()}\n{engine}" if text.strip() else engine
        for n in [n for n in self.nodes if not n.lost]:
            try:
                more = await gather(n.t, ray_temp=n.node.ray_temp_dir or spec.launch.ray.temp_dir,
                                    since=handle.started, workdir=n.workdir, run_id=handle.run_id)
            except HostUnreachable as e:
                self._feed([(b"", n.lose(e))])
                continue
            text = text.rstrip() + "\n" + relabel(more, n.label) if text.strip() else relabel(more, n.label)
        found = sections(text)
        if found:  # each file is whole: its last error block is complete
            self._feed([(f"(log:{label}) ".encode(), data if data.endswith(b"\n") else data + b"\n")
                        for label, data in found])
            self.stages(self.an.quiet())
        return text

    def _feed(self, batch: list[tuple[bytes, bytes]]) -> None:
        """(prefix, data) of one or more logs, merged in timestamp order, into the analyzer."""
        if len(batch) == 1 and not batch[0][0]:
            data = batch[0][1]  # the run's own log alone: as it came
        else:
            data = b"".join(prefix + ln for prefix, ln in merge(batch))
        self.on_data(data)
        self.stages(self.an.feed(data, ts=self.ses.clock()))

    def stages(self, events) -> None:
        """Announce the stages reached; the actor update only once one was healthy (the verdict
        counts an update with a NaN loss as failed, so no view may show it passed)."""
        for ev in events:
            if ev.kind == "stage" and ev.stage < len(STAGES):
                self.on_stage(ev.stage)
        if self.an.healthy_updates and len(STAGES) in self.an.reached:
            self.on_stage(len(STAGES))

    def finish(self) -> None:
        self.stages(self.an.finish())


async def watch(ses, handle: RunHandle, an: Analyzer, on_stage, on_data) -> Watch:
    """Follow the run's logs until there is something to decide. `ses` gives the transport,
    launcher, spec, clock and sleep; `on_stage(no)` and `on_data(bytes)` are called as lines come."""
    spec, clock = ses.spec, ses.clock
    logs = Logs(ses, handle, an, on_stage, on_data)
    started = last_data = last_status = clock()
    first_error: float | None = None
    quiet_checked = 0.0
    queued: float | None = None  # since when a scheduler holds the job back
    while True:
        now = clock()
        if await logs.read():
            last_data = now
        if now - last_data >= QUIET and an.blocks.open:
            logs.stages(an.quiet())
        v = an.verdict(now)
        if v["outcome"] == "pass" and an.healthy_updates >= spec.passing.actor_updates:
            return Watch(v, "passed")
        if v["root_cause"] is not None and v["root_cause"]["signature"] != SILENCE:  # silence: ask the CPU first
            first_error = first_error or now
            if now - first_error >= spec.launch.settle:
                evidence = await _evidence(ses, handle) if v["outcome"] == "hang" else ""
                found = await logs.postmortem(handle)
                return Watch(an.verdict(now) if found else v, "failed", evidence=evidence, postmortem=found)
        if now - last_status >= STATUS_EVERY or first_error:
            last_status = now
            status = await ses.launcher.poll(handle)
            if status.queued:  # not started yet: its silence is the queue's, not a hang
                last_data = now
                if queued is None:
                    queued = now
                    ses.note(f"the job waits in the scheduler's queue ({status.queued[:200]}); its silence does not "
                             f"count towards launch.stall until it starts")
            elif queued is not None:
                ses.note(f"the job left the scheduler's queue after {now - queued:.0f}s")
                queued = None
            if not status.alive:  # read what is left (the final partial lines too) and decide
                await logs.read(final=True)
                v, found = an.verdict(None), ""
                if not (v["outcome"] == "pass" and an.healthy_updates >= spec.passing.actor_updates):
                    found = await logs.postmortem(handle)
                logs.finish()
                v = an.verdict(None)
                if v["outcome"] in ("running", "unknown"):  # over, with nothing that says why: its last line
                    nxt, basis = silent_stage(an, v["last_stage_passed"])
                    v = _failed_at(v, nxt, basis, ended(an, status.exit_code, nxt))
                passed = v["outcome"] == "pass" and an.healthy_updates >= spec.passing.actor_updates
                return Watch(v, "passed" if passed else "exited", status.exit_code, postmortem=found)
        over = ses.budget_while_running(now, started)
        if over:
            return Watch(v, f"budget:{over}")
        silent = now - last_data
        if first_error is None and (silent >= spec.launch.stall or v["outcome"] == "hang") \
                and now - quiet_checked >= spec.launch.stall:
            quiet_checked = now
            cpu = await ses.launcher.cpu_activity(handle)
            if cpu["cpu_seconds"] < BUSY_CPU * cpu["interval"]:
                evidence, found = await _evidence(ses, handle), await logs.postmortem(handle)
                an.saw(evidence)  # where its processes wait: the hang's stage and the frame it waits in
                v = an.verdict(now)  # a worker's own error, found in its files, is the hang's cause
                if not (v["outcome"] == "hang" or found and v["root_cause"]):
                    v = _hung(an, now, spec.launch.stall)
                return Watch(v, "hung", evidence=evidence, postmortem=found)
            ses.note(f"the run printed nothing for {silent:.0f}s but its {cpu['processes']} processes use CPU: "
                     "still working (compiling?), waiting on")
        await ses.sleep(TICK)


def _name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


async def _evidence(ses, handle: RunHandle) -> str:
    """Where the hung run waits, gathered before it is stopped (a stopped run tells nothing)."""
    ses.activity("the run hangs: collecting where its processes wait")
    nodes = [(n.label, n.t) for n in getattr(ses, "nodes", []) if not n.lost]
    return await ses.launcher.evidence(handle, nodes)


def _hung(an: Analyzer, now: float, stall: float) -> dict:
    """A verdict for a run silent and idle before its stage timeout: hang at the next stage,
    with its last line for the root cause (see `analyze.verdict.silence`)."""
    v = an.verdict(now)
    if v["outcome"] in ("running", "unknown"):
        nxt, basis = silent_stage(an, v["last_stage_passed"])
        v = _failed_at(v, nxt, basis, silence(an, now - (an.last_ts or now), nxt))
    return v


def _failed_at(v: dict, stage: int, basis: str, root: Finding) -> dict:
    """`v` with the chain failed at `stage` (found as `basis` says) for `root`, with its outcome."""
    rc = root.to_dict() | {"stage": v["stages"][stage - 1]["name"]}
    v = {**v, "outcome": root.outcome, "failed_stage": stage, "stage_basis": basis, "root_cause": rc}
    v["stages"] = [{**s, "status": "failed", "line_no": rc["line_no"], "evidence": rc["text"]} if i == stage else s
                   for i, s in enumerate(v["stages"], 1)]
    return v
