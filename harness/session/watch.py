"""Watch one attempt: follow the run's log into the analyzer until the chain passes, a failure
has settled, the run exits, or a silent run is found idle. Waiting is the controller's job,
never the model's; while it waits it only polls (one stat + one read per tick).

A silent run is not called hung on silence alone: after `launch.stall` seconds without a line,
or once the playbook's stage timeout has passed, the run's processes are asked whether they
still use CPU (graph compilation on Ascend can print nothing for twenty minutes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..analyze import Analyzer
from ..remote.follow import Cursor, poll
from ..remote.launch import RunHandle

TICK = 0.25  # seconds between looks at the log
STATUS_EVERY = 1.0  # seconds between looks at whether the run is alive
BUSY_CPU = 0.05  # CPU seconds per second of wall time that count as "still working"
QUIET = 2.0  # seconds without a line after which an open error block is complete


@dataclass
class Watch:
    """What the watcher saw; `reason` says why it stopped watching."""

    verdict: dict
    reason: str  # passed | failed | exited | hung | budget:<which>
    exit_code: int | None = None
    new_stages: list[int] = field(default_factory=list)


async def watch(ses, handle: RunHandle, an: Analyzer, on_stage, on_data) -> Watch:
    """Follow `handle`'s log until there is something to decide. `ses` gives the transport,
    launcher, spec, clock and sleep; `on_stage(no)` and `on_data(bytes)` are called as lines come."""
    spec, clock = ses.spec, ses.clock
    cur = Cursor(handle.log_path)
    started = last_data = last_status = clock()
    first_error: float | None = None
    quiet_checked = 0.0
    while True:
        now = clock()
        chunk = await poll(ses.transport, cur)
        if chunk and chunk.data:
            last_data = now
            on_data(chunk.data)
            for ev in an.feed(chunk.data, ts=now):
                if ev.kind == "stage":
                    on_stage(ev.stage)
        if now - last_data >= QUIET and an.blocks.open:
            an.quiet()
        v = an.verdict(now)
        if v["outcome"] == "pass" and an.healthy_updates >= spec.passing.actor_updates:
            return Watch(v, "passed")
        if v["root_cause"] is not None:
            first_error = first_error or now
            if now - first_error >= spec.launch.settle:
                return Watch(v, "failed")
        if now - last_status >= STATUS_EVERY or first_error:
            last_status = now
            status = await ses.launcher.poll(handle)
            if not status.alive:
                return await _drain(ses, cur, an, on_data, on_stage, status.exit_code)
        over = ses.budget_while_running(now, started)
        if over:
            return Watch(v, f"budget:{over}")
        silent = now - last_data
        if first_error is None and (silent >= spec.launch.stall or v["outcome"] == "hang") \
                and now - quiet_checked >= spec.launch.stall:
            quiet_checked = now
            cpu = await ses.launcher.cpu_activity(handle)
            if cpu["cpu_seconds"] < BUSY_CPU * cpu["interval"]:
                v = an.verdict(now) if v["outcome"] == "hang" else _hung(an, now, spec.launch.stall)
                return Watch(v, "hung")
            ses.note(f"the run printed nothing for {silent:.0f}s but its {cpu['processes']} processes use CPU: "
                     "still working (compiling?), waiting on")
        await ses.sleep(TICK)


async def _drain(ses, cur: Cursor, an: Analyzer, on_data, on_stage, exit_code: int | None) -> Watch:
    """The run has exited: read what is left (the final partial line too) and decide."""
    while (chunk := await poll(ses.transport, cur)) and chunk.data:
        on_data(chunk.data)
        for ev in an.feed(chunk.data, ts=ses.clock()):
            if ev.kind == "stage":
                on_stage(ev.stage)
    rest = await ses.transport.read(cur.path, cur.offset) if await ses.transport.stat(cur.path) else b""
    if rest:
        on_data(rest)
        an.feed(rest, ts=ses.clock())
    for ev in an.finish():
        if ev.kind == "stage":
            on_stage(ev.stage)
    v = an.verdict(None)
    if v["outcome"] == "pass" and an.healthy_updates >= ses.spec.passing.actor_updates:
        return Watch(v, "passed", exit_code)
    return Watch(v, "exited", exit_code)


def _hung(an: Analyzer, now: float, stall: float) -> dict:
    """A verdict for a run silent and idle before its stage timeout: hang at the next stage."""
    v = an.verdict(now)
    if v["outcome"] in ("running", "unknown"):
        nxt = min(v["last_stage_passed"] + 1, len(v["stages"]))
        v = {**v, "outcome": "hang", "failed_stage": nxt}
        v["stages"] = [{**s, "status": "failed"} if i == nxt else s for i, s in enumerate(v["stages"], 1)]
    return v
