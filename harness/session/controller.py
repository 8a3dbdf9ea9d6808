"""The controller: launch → follow → verdict → (known fix | infra retry | agent) → commit →
relaunch, until the chain passes or a budget or a stop rule ends the session.

    ses = Session(spec, session_dir, transport, model)
    reason = await ses.run()        # passed | stuck | budget:<which> | gave_up | stopped

Every step is an event appended (with fsync) to the session's journal.jsonl and folded into
`ses.state`; every way a session ends is an exception whose name becomes its reason, and the
`finally` stops the run it started (unless the spec keeps a passing one) and writes `end`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path

from ..agent.fixes import apply_fix
from ..agent.policy import Policy
from ..analyze import Analyzer, build_digest
from ..chain import STAGES
from ..playbook import Fix, load_playbook
from ..remote.launch import Launcher, RunActive, RunHandle
from .journal import Journal
from .ledger import Ledger
from .progress import fingerprint, model_blocked, relaunch_blocked, running_over, stuck
from .state import State, apply
from .turn import GaveUp, agent_turn
from .watch import watch


class SessionEnd(Exception):
    reason = "stopped"


class Passed(SessionEnd):
    reason = "passed"


class Stuck(SessionEnd):
    reason = "stuck"


class GaveUpEnd(SessionEnd):
    reason = "gave_up"


class BudgetOver(SessionEnd):
    def __init__(self, which: str):
        super().__init__(f"the {which} budget would be exceeded")
        self.reason = f"budget:{which}"


class Session:
    def __init__(self, spec, directory: Path, transport, model=None, *, offline: bool = False,
                 clock=time.time, sleep=asyncio.sleep, ui=None, tool_timeout: float = 120.0):
        self.spec, self.dir, self.transport, self.model = spec, Path(directory), transport, model
        self.offline, self.clock, self.sleep, self.ui, self.tool_timeout = offline, clock, sleep, ui, tool_timeout
        self.journal = Journal(self.dir / "journal.jsonl", clock)  # budgets count from its times
        self.state = State()
        for ev in self.journal.events():
            apply(self.state, ev)
        self.session = self.dir.name
        self.launcher = Launcher(transport)
        self.ledger = Ledger(transport, spec.workdir, self.session, exclude=spec.ledger.exclude)
        self.policy = Policy(workdir=spec.workdir, protected=(*spec.policy.protected, ".harness"),
                             deny=tuple(spec.policy.deny))
        pb = load_playbook(spec.playbooks[0] if spec.playbooks else None)
        stage_no = {name: i for i, name in enumerate(STAGES, 1)}
        self.playbook = dataclasses.replace(
            pb, timeouts=pb.timeouts | {stage_no[k]: v for k, v in spec.launch.timeouts.items()})
        self.live: RunHandle | None = None
        self.keep_on_stop, self.stop_detail = False, "interrupted"  # set by whoever stops the session

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

    # ---------------------------------------------------------------- budgets
    def check_model(self, messages: list[dict]) -> None:
        tokens, money = self.model.projected(messages)
        if over := model_blocked(self.state, self.spec.budgets, tokens, money, self.clock()):
            raise BudgetOver(over)

    def check_step(self) -> None:
        if self.state.used("agent_steps") >= self.spec.budgets.agent_steps:
            raise BudgetOver("agent_steps")

    def budget_while_running(self, now: float, run_started: float) -> str | None:
        return running_over(self.state, self.spec.budgets, self.spec.launch.devices, now, run_started)

    # ---------------------------------------------------------------- the loop
    async def run(self) -> str:
        """Run the session, or resume it from its journal: a run still alive is re-attached,
        never launched twice; a session that had ended goes on (with a fresh budget if a
        budget had ended it)."""
        st = self.state
        if not st.session:
            self.emit("session", session=self.session, host=self.spec.host, workdir=self.spec.workdir)
        else:  # resuming: a killed controller may have left git lock files in the ledger
            await self.ledger.recover()
            if st.ended:
                prior = st.ended["reason"]
                self.emit("continue", prior=prior, fresh_budget=prior.startswith("budget:"))
        reason, detail = "stopped", ""
        try:
            while True:
                last = st.attempts[-1] if st.attempts else None
                if last is not None and last.verdict is not None:
                    verdict = last.verdict
                    if verdict["outcome"] == "pass":
                        raise Passed(f"the chain passed on attempt {last.n}")
                    if stuck(st, self.spec.budgets.stuck_after):
                        raise Stuck(f"the same failure {self.spec.budgets.stuck_after} attempts in a row "
                                    f"[{verdict['fingerprint']}]: {(verdict.get('root') or {}).get('text', '')[:200]}")
                    if not st.pending_changes:  # not yet answered (or answered before a crash)
                        await self.respond(last.n, verdict)
                    if over := relaunch_blocked(st, self.spec.budgets, self.spec.launch.devices, self.clock()):
                        raise BudgetOver(over)
                    await self.attempt(last.n + 1)
                else:  # the first attempt, or one whose run a crashed controller left behind
                    await self.attempt(last.n if last is not None else 1)
        except SessionEnd as end:
            reason, detail = end.reason, str(end)
        except (asyncio.CancelledError, KeyboardInterrupt):
            reason, detail = "stopped", self.stop_detail
            raise
        finally:
            kept = (self.keep_on_stop and reason == "stopped") or (reason == "passed" and self.spec.keep_run)
            await self._stop_live(keep=kept)
            self.emit("end", reason=reason, detail=detail, kept_run=kept)
        return reason

    async def attempt(self, n: int) -> dict:
        """Commit the workdir, launch (or re-attach to the run of attempt n a crashed controller
        left), watch, stop; returns the `verdict` event."""
        st, spec = self.state, self.spec
        before = st.attempts[n - 2].verdict if n > 1 else None
        handle, reattached = await self._find_or_launch(n, before)
        self.live = handle
        # run time: a new run's from now (launching is the harness's own time), a re-attached
        # run's since it started (the host's clock)
        t0 = handle.started if reattached and handle.started else self.clock()
        an = Analyzer(self.playbook)
        (self.dir / "attempts").mkdir(exist_ok=True)
        seen = set(st.attempts[n - 1].stages)
        with open(self.dir / "attempts" / f"{n:02d}.log", "wb") as log:  # the watch reads from the start
            self.activity(f"attempt {n}: following the run")
            w = await watch(self, handle, an, lambda no: no in seen or self.emit(
                "stage", attempt=n, stage=no, name=STAGES[no - 1]), log.write)
        run_seconds = max(0.0, self.clock() - t0)
        if not (w.reason == "passed" and spec.keep_run):
            await self._stop_live()
        v = w.verdict
        root = v["root_cause"]
        ev = self.emit("verdict", attempt=n, outcome=v["outcome"], last_stage_passed=v["last_stage_passed"],
                       failed_stage=v["failed_stage"], reason=w.reason, exit_code=w.exit_code,
                       root=root and {k: root.get(k) for k in ("text", "category", "class", "signature", "hint", "fix", "stage")},
                       fingerprint=fingerprint(v), healthy_updates=an.healthy_updates, run_seconds=run_seconds,
                       accel_seconds=run_seconds * spec.launch.devices)
        (self.dir / "attempts" / f"{n:02d}.digest.txt").write_text(build_digest(v, an), encoding="utf-8")
        await self.ledger.annotate(n, _commit_message(self.session, n, before, ev))
        if w.reason == "passed":
            raise Passed(f"the chain passed on attempt {n}")
        if w.reason.startswith("budget:"):
            raise BudgetOver(w.reason.split(":", 1)[1])
        return ev

    async def _find_or_launch(self, n: int, before: dict | None) -> tuple[RunHandle, bool]:
        """The run of attempt n: the one a killed controller launched (re-attached, never launched
        twice), else a new one."""
        st = self.state
        known = st.attempts[n - 1].run_id if len(st.attempts) >= n else ""
        run_id = known or f"{self.session}-{n}"
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
        sha = await self.ledger.snapshot(n, _commit_message(self.session, n, before, None))
        env = spec.launch.env | st.env
        unset = [x for x in dict.fromkeys([*spec.launch.unset, *st.unset]) if x not in env]
        self.activity(f"launching attempt {n}")
        handle = await self.launcher.launch(spec.launch.command, workdir=spec.workdir, run_id=run_id,
                                            env=env, unset=unset)
        self.emit("launch", attempt=n, run_id=handle.run_id, pid=handle.pid, sha=sha)
        return handle

    async def respond(self, n: int, verdict: dict) -> None:
        """Known fix first, then cleanup-and-retry for infra failures, then the agent."""
        st, spec = self.state, self.spec
        root = verdict.get("root") or {}
        fix = root.get("fix")
        key = (verdict["fingerprint"], root.get("signature"))
        if fix and fix["kind"] != "cleanup_retry" and key not in st.fixes_tried:
            self.activity(f"applying the declared fix of {root.get('signature')}")
            res = await apply_fix(self.transport, Fix(**fix), workdir=spec.workdir, env=st.env, unset=st.unset)
            self.emit("fix", attempt=n, fingerprint=key[0], signature=key[1], kind=fix["kind"],
                      description=res.description, applied=res.applied, already=res.already, files=res.files,
                      env=res.env, unset=res.unset)
            if res.applied or res.already:
                return
        infra = root.get("class") == "infra" or (fix and fix["kind"] == "cleanup_retry")
        if infra and st.infra_retries < spec.budgets.infra_retries:
            self.activity("infrastructure failure: cleaning up before a retry")
            results = [await self.transport.run(c, cwd=spec.workdir, timeout=120) for c in spec.cleanup]
            self.emit("cleanup", attempt=n, commands=list(spec.cleanup), ok=all(r.ok for r in results))
            return
        if self.offline or self.model is None:
            why = "offline" if self.offline else "no model configured"
            raise GaveUpEnd(f"no declared fix for {root.get('signature') or verdict['outcome']} and {why}")
        digest = (self.dir / "attempts" / f"{n:02d}.digest.txt").read_text(encoding="utf-8")
        try:
            await agent_turn(self, n, verdict, digest)
        except GaveUp as exc:
            raise GaveUpEnd(str(exc)) from None

    async def _stop_live(self, keep: bool = False) -> None:
        if self.live is None:
            return
        handle, self.live = self.live, None
        if keep:
            self.note(f"run {handle.run_id} left running, as asked")
            return
        self.activity(f"stopping run {handle.run_id}")
        rep = await self.launcher.stop(handle, cleanup=self.spec.cleanup)
        n = len(self.state.attempts)
        if not (self.state.attempts and self.state.attempts[-1].stopped and rep.ok and not rep.terminated):
            self.emit("stopped", attempt=n, run_id=handle.run_id, survivors=list(rep.survivors))


def _commit_message(session: str, n: int, before: dict | None, after: dict | None) -> str:
    def where(v):
        if v is None:
            return "first run"
        return v["outcome"] + (f" at {STAGES[v['failed_stage'] - 1]}" if v.get("failed_stage") else "")
    head = f"harness {session} attempt {n}: {where(before)} -> {where(after) if after else 'running'}"
    body = [f"before: {before['fingerprint']} {(before.get('root') or {}).get('text', '')[:200]}" if before else "before: first run"]
    if after:
        body.append(f"after: {after['fingerprint']} {(after.get('root') or {}).get('text', '')[:200]}")
    return head + "\n\n" + "\n".join(body) + "\n"
