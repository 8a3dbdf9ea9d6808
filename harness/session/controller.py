"""The controller: launch → follow → verdict → (known fix | infra retry | agent) → commit →
relaunch, until the chain passes or a budget or a stop rule ends the session.

    ses = Session(spec, session_dir, transport, model, reopen=reconnect)
    reason = await ses.run()   # passed | stuck | budget:<which> | gave_up | stopped | unreachable | error

Every step is an event appended (with fsync) to the session's journal.jsonl and folded into
`ses.state`; every way a session ends is an exception whose name becomes its reason, and the
`finally` stops the run it started (unless the spec keeps a passing one, or the host is out of
reach) and writes `end`. Every remote call goes through one reconnecting layer (`ses.transport`,
remote/reconnect.py): a dropped connection is waited out, not raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
import time
from pathlib import Path

from ..agent.policy import Policy
from ..analyze import Analyzer, build_digest, last_lines_of
from ..chain import STAGES
from ..errors import HarnessError, HostUnreachable, one_line
from ..playbook import load_playbook
from ..remote.launch import RunActive, RunHandle
from ..remote.postmortem import HEAD as POSTMORTEM_HEAD
from ..remote.scheduled import launcher_for
from ..remote.once import Ops
from ..remote.reconnect import Reconnecting
from .journal import Journal
from .ledger import Ledger
from .nodes import cleanup_nodes, links, reset
from .progress import commit_message, fingerprint, model_blocked, relaunch_blocked, running_over, stuck
from .respond import BudgetOver, SessionEnd, Stuck, respond
from .state import State, apply
from .watch import Watch, watch

FINAL_GRACE = 60.0  # seconds the final stop of a run waits for an unreachable host


class Passed(SessionEnd):
    reason = "passed"


class Session:
    def __init__(self, spec, directory: Path, transport, model=None, *, offline: bool = False,
                 clock=time.time, sleep=asyncio.sleep, ui=None, tool_timeout: float = 120.0,
                 reopen=None, process: str | None = None, nodes=()):
        """`reopen()` makes a new connection after one dropped (None: never reconnect);
        `process` names this controller process's op directories and claims on the host
        (recorded, so a replay uses the same); `nodes`: (spec node, transport, reopen) of each
        worker node of `spec.nodes`, in its order."""
        self.spec, self.dir, self.model = spec, Path(directory), model
        self.offline, self.clock, self.sleep, self.ui, self.tool_timeout = offline, clock, sleep, ui, tool_timeout
        self.journal = Journal(self.dir / "journal.jsonl", clock)  # budgets count from its times
        self.state = State()
        for ev in self.journal.events():
            apply(self.state, ev)
        self.session, self.process = self.dir.name, process or secrets.token_hex(3)
        self.transport = self.link = Reconnecting(transport, reopen, clock=clock, sleep=sleep,
                                                  grace=spec.connection.grace, on_change=self._link_changed)
        self.nodes = links(spec, nodes, clock=clock, sleep=sleep, on_change=self._node_changed)
        self.ops = Ops(spec.workdir, self.session, self.process)
        self.launcher = launcher_for(spec.launch, self.transport, once=self.ops, token=f"{self.session}/{self.process}")
        self.ledger = Ledger(self.transport, spec.workdir, self.session, exclude=spec.ledger.exclude, once=self.ops)
        self.policy = Policy(workdir=spec.workdir, protected=(*spec.policy.protected, ".harness"),
                             deny=tuple(spec.policy.deny))
        pb = load_playbook(spec.playbooks or None)
        stage_no = {name: i for i, name in enumerate(STAGES, 1)}
        self.playbook = dataclasses.replace(
            pb, timeouts=pb.timeouts | {stage_no[k]: v for k, v in spec.launch.timeouts.items()})
        self.live: RunHandle | None = None
        self.keep_on_stop, self.stop_detail = False, "interrupted"  # set by whoever stops the session
        self._down0 = 0.0  # outage seconds when the current attempt's run started
        self._own_runs = False  # whether this controller has launched or re-attached a run already
        self._note: tuple[int, str] | None = None  # (attempt, its ledger message with the verdict), not yet written

    # ---------------------------------------------------------------- journal and view
    def emit(self, type: str, **fields) -> dict:
        ev = self.journal.append(type, **fields)
        apply(self.state, ev)
        if self.ui:
            self.ui(ev, self.state)
        return ev

    def note(self, text: str) -> None:
        self.emit("note", attempt=len(self.state.attempts), text=text)

    def activity(self, text: str) -> None:
        if self.ui:
            self.ui({"type": "activity", "text": text}, self.state)

    def _link_changed(self, what: str, **kw) -> None:
        n = len(self.state.attempts)
        if what == "down":
            self.emit("unreachable", attempt=n, since=kw["since"], error=kw["error"][:300])
        else:
            self.emit("reachable", attempt=n, after=round(kw["after"], 3))

    def _node_changed(self, label: str, what: str, **kw) -> None:
        if what == "down":
            self.note(f"node {label} unreachable: {kw['error'][:200]}")
        else:
            self.note(f"node {label} reachable again after {kw['after']:.0f}s")

    # ---------------------------------------------------------------- budgets
    def check_model(self, messages: list[dict]) -> None:
        tokens, money = self.model.projected(messages)
        if over := model_blocked(self.state, self.spec.budgets, tokens, money, self.clock()):
            raise BudgetOver(over)

    def check_step(self) -> None:
        if self.state.used("agent_steps") >= self.spec.budgets.agent_steps:
            raise BudgetOver("agent_steps")

    def budget_while_running(self, now: float, run_started: float) -> str | None:
        # accelerator-hours count while the run is known alive: an outage of the link is left out
        shifted = run_started + self.link.down_seconds(now) - self._down0
        return running_over(self.state, self.spec.budgets, self.spec.launch.devices, now, shifted)

    # ---------------------------------------------------------------- the loop
    async def run(self) -> str:
        """Run the session, or resume it from its journal: a run still alive is re-attached,
        never launched twice; a session that had ended goes on (with a fresh budget if a
        budget had ended it)."""
        st = self.state
        resuming = bool(st.session)
        if not resuming:
            self.emit("session", session=self.session, host=self.spec.host, workdir=self.spec.workdir,
                      **({"nodes": [n.label for n in self.nodes]} if self.nodes else {}))
        else:  # resuming: a killed controller may have left git lock files in the ledger
            prior = st.ended["reason"] if st.ended else None
            self.emit("continue", prior=prior, fresh_budget=bool(prior and prior.startswith("budget:")),
                      crashed=st.ended is None)
        reason, detail = "stopped", ""
        try:
            if resuming:
                await self.ledger.recover()
                if (last := st.attempts[-1] if st.attempts else None) and last.verdict:  # its note may be unwritten
                    before = st.attempts[-2].verdict if len(st.attempts) > 1 else None
                    self._note = (last.n, commit_message(self.session, last.n, before, last.verdict))
            if st.machine is None:
                await self._read_host()
            while True:
                await self.step()
        except SessionEnd as end:
            reason, detail = end.reason, str(end)
        except HostUnreachable as e:
            reason, detail = "unreachable", one_line(e)
        except (asyncio.CancelledError, KeyboardInterrupt):
            reason, detail = "stopped", self.stop_detail
            raise
        except Exception as e:
            reason, detail = "error", one_line(e)
            raise
        finally:
            await self._finish(reason, detail)
        return reason

    async def _read_host(self) -> None:
        """Once per session, before its first launch: the devices and versions the run will see
        (the report shows them; they are what a framework's maintainers ask for first)."""
        from ..remote.hostinfo import host_info

        self.activity("reading the host's devices and package versions")
        try:
            info = await host_info(self.transport, self.spec)
        except HostUnreachable:
            raise
        except HarnessError as e:  # never in the way of the run itself
            self.note(f"could not read the host's devices and versions: {one_line(e)}")
            return
        self.emit("host", **info.as_event())

    async def step(self) -> None:
        """One turn of the loop: decide on the last attempt's verdict, then run the next attempt."""
        st = self.state
        last = st.attempts[-1] if st.attempts else None
        if last is None or last.verdict is None:  # the first attempt, or one a dead controller left running
            await self.attempt(last.n if last is not None else 1)
            return
        verdict = last.verdict
        if verdict["outcome"] == "pass":
            raise Passed(f"the chain passed on attempt {last.n}")
        if not last.stopped:  # its controller died between the verdict and stopping the run
            self.live = await self.launcher.find(self.spec.workdir, last.run_id)
            await self._stop_live()
        if not last.cut_short:  # an attempt stopped before it showed anything is relaunched as it was
            if stuck(st, self.spec.budgets.stuck_after):
                raise Stuck(f"the same failure {self.spec.budgets.stuck_after} attempts in a row "
                            f"[{verdict['fingerprint']}]: {(verdict.get('root') or {}).get('text', '')[:200]}")
            if not st.pending_changes:  # not yet answered (or answered before a crash)
                await respond(self, last.n, verdict)
        if over := relaunch_blocked(st, self.spec.budgets, self.spec.launch.devices, self.clock()):
            raise BudgetOver(over)
        await self.attempt(last.n + 1)

    async def attempt(self, n: int) -> dict:
        """Commit the workdir, launch (or re-attach to the run of attempt n a dead controller
        left), watch, record the verdict, stop the run; returns the `verdict` event."""
        st, spec = self.state, self.spec
        before = st.attempts[n - 2].verdict if n > 1 else None
        reset(self.nodes)  # a node lost in the last attempt is tried again
        handle, reattached = await self._find_or_launch(n, before)
        self.live = handle
        # run time: a new run's from now (launching is the harness's own time), a re-attached
        # run's since it started (the host's clock)
        t0 = handle.started if reattached and handle.started else self.clock()
        self._down0 = self.link.down_seconds(self.clock())
        an = Analyzer(self.playbook)
        (self.dir / "attempts").mkdir(exist_ok=True)
        seen = set(st.attempts[n - 1].stages)

        def reached(no: int) -> None:  # once per stage and attempt (a re-attached run is read again)
            if no not in seen:
                seen.add(no)
                self.emit("stage", attempt=n, stage=no, name=STAGES[no - 1])
        with open(self.dir / "attempts" / f"{n:02d}.log", "wb") as log:  # the watch reads from the start
            self.activity(f"attempt {n}: following the run")
            try:
                w = await watch(self, handle, an, reached, log.write)
            except HostUnreachable:  # the run is left as it is: `continue` re-attaches to it
                raise
            except BaseException:  # the harness stops this run: the attempt is over, `continue` relaunches
                if not self.keep_on_stop:
                    self._verdict(n, before, Watch(an.verdict(None), "stopped"), an, t0)
                raise
        ev = self._verdict(n, before, w, an, t0)
        if not (w.reason == "passed" and spec.keep_run):
            await self._stop_live()
        # the ledger's message for this attempt gets its verdict with the next snapshot (one round
        # trip), or as the session ends
        self._note = (n, commit_message(self.session, n, before, ev))
        if w.reason == "passed":
            raise Passed(f"the chain passed on attempt {n}")
        if w.reason.startswith("budget:"):
            raise BudgetOver(w.reason.split(":", 1)[1])
        return ev

    def _verdict(self, n: int, before: dict | None, w: Watch, an: Analyzer, t0: float) -> dict:
        now = self.clock()
        run_seconds = max(0.0, now - t0)
        alive_seconds = max(0.0, run_seconds - (self.link.down_seconds(now) - self._down0))
        v, root = w.verdict, w.verdict["root_cause"]
        ev = self.emit("verdict", attempt=n, outcome=v["outcome"], last_stage_passed=v["last_stage_passed"],
                       failed_stage=v["failed_stage"], stage_basis=v.get("stage_basis"), reason=w.reason,
                       exit_code=w.exit_code,
                       root=root and {k: root.get(k) for k in ("text", "category", "class", "signature", "hint", "fix",
                                                               "stage", "origin")},
                       fingerprint=fingerprint(v), healthy_updates=an.healthy_updates, run_seconds=run_seconds,
                       accel_seconds=alive_seconds * self.spec.launch.devices)
        last = last_lines_of(self.dir / "attempts" / f"{n:02d}.log", an) if w.evidence else None
        digest = build_digest(v, an, last=last)
        if w.evidence:  # a hang: where each process waits, for the agent and the report
            digest += self._hang_evidence(n, w.evidence, last)
        if w.postmortem:  # the failed run's files on the host, as they were before the relaunch
            (self.dir / "attempts" / f"{n:02d}.postmortem.txt").write_text(w.postmortem, encoding="utf-8")
            self.note(f"read {w.postmortem.count(POSTMORTEM_HEAD)} file(s) of the run's workers on the host "
                      f"(attempts/{n:02d}.postmortem.txt)")
        (self.dir / "attempts" / f"{n:02d}.digest.txt").write_text(digest, encoding="utf-8")
        return ev

    def _hang_evidence(self, n: int, evidence: str, last: list[str]) -> str:
        """Keep a hang's evidence with the attempt, with the last line each process printed (`last`,
        from the attempt's log: who went quiet first), journal and note where it waits; what the
        digest adds."""
        (self.dir / "attempts" / f"{n:02d}.evidence.txt").write_text(
            evidence.rstrip("\n") + ("\n\n== the last line each process printed, silent longest first\n" + "\n".join(last)
                                     if last else "") + "\n", encoding="utf-8")
        head = evidence.split("\n\n", 1)[0]
        procs = [x.strip() for x in head.splitlines()[1:]]
        self.emit("evidence", attempt=n, text=head[:4000])
        # what says most: the process the others wait for, else one in a collective, else the first
        where = next((x for x in procs if x.startswith("waited on: ")), None) \
            or next((x for x in procs if ", in the collective " in x), procs[0] if procs else None)
        self.note(f"the run hung; {where[:240] if where else 'no process of it was left'} "
                  f"(all of it in attempts/{n:02d}.evidence.txt)")
        return f"\n\n## Where the hung run waits\n{head[:2000]}\n"

    async def _find_or_launch(self, n: int, before: dict | None) -> tuple[RunHandle, bool]:
        """The run of attempt n: the one a killed controller launched (re-attached, never launched
        twice), else a new one."""
        st = self.state
        known = st.attempts[n - 1].run_id if len(st.attempts) >= n else ""
        run_id = known or f"{self.session}-{n}"
        if self._own_runs and not known:  # this controller launched the attempt before: no other can have launched this
            return await self._launch(n, run_id, before), False
        self._own_runs = True
        handle = await self.launcher.find(self.spec.workdir, run_id)
        for _ in range(50):  # a launch cut short: its supervisor may still be writing the pid
            if handle is None or handle.pid is not None:
                break
            await self.sleep(0.1)
            handle = await self.launcher.find(self.spec.workdir, run_id)
        if handle is None or handle.pid is None:  # never started (or never claimed): launch it now
            # a run dir without a run: take a new id, made of the (recorded) clock so a replay makes the same
            fresh = run_id if handle is None else f"{run_id}-{int(self.clock() * 1000)}"
            try:
                return await self._launch(n, fresh, before), False
            except RunActive as e:  # the run a killed controller started under another id
                if not e.run_id.startswith(f"{self.session}-{n}"):
                    raise
                run_id, handle = e.run_id, await self.launcher.find(self.spec.workdir, e.run_id)
        self.note(f"re-attached to run {run_id} of attempt {n}")
        if not known:
            self.emit("launch", attempt=n, run_id=run_id, pid=handle.pid, sha=None)
        return handle, True

    async def _launch(self, n: int, run_id: str, before: dict | None) -> RunHandle:
        st, spec = self.state, self.spec
        sha = await self.ledger.snapshot(n, commit_message(self.session, n, before, None), note=self._note)
        self._note = None
        env = spec.launch.env | st.env
        unset = [x for x in dict.fromkeys([*spec.launch.unset, *st.unset]) if x not in env]
        self.activity(f"launching attempt {n}")
        handle = await self.launcher.launch(spec.launch.command, workdir=spec.workdir, run_id=run_id,
                                            env=env, unset=unset)
        self.emit("launch", attempt=n, run_id=handle.run_id, pid=handle.pid, sha=sha)
        return handle

    async def _stop_live(self, keep: bool = False) -> None:
        if self.live is None:
            return
        handle, self.live = self.live, None
        if keep:
            self.note(f"run {handle.run_id} left running, as asked")
            return
        self.activity(f"stopping run {handle.run_id}")
        rep = await self.launcher.stop(handle, cleanup=self.spec.cleanup)
        self.emit("stopped", attempt=len(self.state.attempts), run_id=handle.run_id, survivors=list(rep.survivors))
        if problems := await cleanup_nodes(self.nodes, self.spec.cleanup):
            self.note("; ".join(problems)[:600])

    async def _finish(self, reason: str, detail: str) -> None:
        """Stop the run the session started (unless it is kept, or the host is out of reach) and
        write `end`, whatever happens while stopping."""
        kept = (self.keep_on_stop and reason == "stopped") or (reason == "passed" and self.spec.keep_run)
        left = None
        if reason == "unreachable" and self.live is not None:
            left, self.live = self.live, None
            detail += f"; run {left.run_id} (pid {left.pid}) was left as it was on the host: it may still be " \
                      "running — `harness continue` re-attaches to it once the host is back"
        self.link.grace = min(self.link.grace, FINAL_GRACE)
        try:
            await self._stop_live(keep=kept)
        except Exception as e:  # noqa: BLE001 - the end must be written whatever stopping did
            detail += f"; stopping the run failed: {one_line(e)}"
        if reason != "unreachable":
            if self._note:  # the last attempt's verdict into its ledger message (a resumed session writes it again)
                try:
                    await self.ledger.annotate(*self._note)
                    self._note = None
                except Exception as e:  # noqa: BLE001 - the end must be written whatever the ledger did
                    detail += f"; the ledger's message of attempt {self._note[0]} was not updated: {one_line(e)}"
            with contextlib.suppress(Exception):  # housekeeping: the guarded commands' records
                await self.transport.run(self.ops.clear_command(), timeout=60)
        self.emit("end", reason=reason, detail=detail, kept_run=kept,
                  left_run=left and {"run_id": left.run_id, "pid": left.pid})
