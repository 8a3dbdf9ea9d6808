"""A session's state is a fold over its journal: status, report, resume and replay all read it.

Events (each also has `seq` and `t`, added by the journal):

    session   {session, host, workdir, spec}         once, first
    launch    {attempt, run_id, pid, sha}             a run started (sha: its ledger commit)
    stage     {attempt, stage, name}                  a stage reached for the first time in the attempt
    verdict   {attempt, outcome, last_stage_passed, failed_stage, stage_basis, reason, exit_code, root,
               fingerprint, healthy_updates, run_seconds, accel_seconds}   how the attempt ended (reason: passed |
                                                      failed | exited | hung | budget:<which> | stopped:
                                                      the harness stopped it before it ended)
    stopped   {attempt, run_id, survivors}            the run was stopped (or had exited) and swept
    fix       {attempt, signature, kind, description, applied, already, files, env, unset, origin}   a declared
                                                      fix (already: it was in place, e.g. applied before a crash;
                                                      origin: its playbook, where that lies, and for a learned
                                                      entry the session it was learned from)
    cleanup   {attempt, commands, ok, detail}         an infra failure cleaned up before a retry (detail: what
                                                      failed, what still holds the ports)
    model     {attempt, step, prompt_tokens, completion_tokens, cost, seconds, retries, content}
    tool      {attempt, step, name, arguments, refused, end, output}
    note      {attempt, text}                         something the controller decided and why
    host      {tool, devices, driver, toolkit, cann_installed, cann_sourced, packages, python, raw_error}
                                                      the devices and versions the run sees (remote/hostinfo.py),
                                                      read once, before the first launch
    evidence  {attempt, text}                         where a hung run's processes waited (states, CPU,
                                                      stacks; all of it in attempts/NN.evidence.txt)
    continue  {prior, fresh_budget, crashed}          a controller resumed the session: after its end (prior:
                                                      the end reason), or after its controller died
                                                      (crashed: no end was written, e.g. SIGKILL)
    unreachable {attempt, since, error}               the link to the host dropped (the session waits)
    reachable {attempt, after}                        it is back, after `after` seconds
    start_failed {error}                              a controller started for the session failed its checks
    end       {reason, detail, kept_run, left_run}    passed | stuck | budget:<which> | gave_up | stopped |
                                                      unreachable | error (left_run: the run left on an
                                                      unreachable host)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Attempt:
    n: int
    run_id: str = ""
    started: float | None = None
    verdict: dict | None = None  # the `verdict` event
    changes: list[str] = field(default_factory=list)  # what was changed before this attempt ran
    stages: list[int] = field(default_factory=list)
    stopped: bool = False  # a `stopped` event: its run was stopped and swept

    @property
    def reached(self) -> int:
        """Stages passed in a row: below the failed one, whatever markers came after it."""
        if not self.verdict:
            return max(self.stages) if self.stages else 0
        lsp, failed = self.verdict["last_stage_passed"], self.verdict.get("failed_stage")
        return min(lsp, failed - 1) if failed else lsp

    @property
    def cut_short(self) -> bool:
        """Stopped before it showed a failure (harness stop, a budget): nothing to answer or count."""
        v = self.verdict or {}
        return v.get("reason") == "stopped" or (str(v.get("reason", "")).startswith("budget:") and not v.get("root"))


@dataclass
class State:
    session: str = ""
    host: str = ""
    workdir: str = ""
    started: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    pending_changes: list[str] = field(default_factory=list)  # made since the last launch
    env: dict[str, str] = field(default_factory=dict)  # launch env changed by declared fixes
    unset: list[str] = field(default_factory=list)
    fixes_tried: set = field(default_factory=set)  # (fingerprint, signature) of declared fixes used
    agent_steps: int = 0
    model_calls: int = 0
    tokens: int = 0
    money: float = 0.0
    model_seconds: float = 0.0
    run_seconds: float = 0.0
    accel_seconds: float = 0.0
    infra_retries: int = 0  # consecutive cleanup-and-retry attempts
    last_t: float | None = None
    ended: dict | None = None  # the `end` event
    since: int = 0  # attempts before the last `continue`: stuck counts only later ones
    base: dict = field(default_factory=dict)  # usage when a fresh budget was granted
    unreachable: dict | None = None  # the `unreachable` event of an outage not yet over
    start_error: str = ""  # the last controller start that failed its checks
    crashes: int = 0  # controllers that died without writing `end`
    protocol: str | None = None  # how the agent acts with this model (`protocol` event): tools or text
    machine: dict | None = None  # the `host` event: devices and versions as the first launch saw them

    @property
    def relaunches(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def fingerprints(self) -> list[str]:
        return [a.verdict["fingerprint"] for a in self.attempts[self.since:] if a.verdict and not a.cut_short]

    def totals(self) -> dict:
        """What the session has used, for the budgets."""
        return {"relaunches": self.relaunches, "agent_steps": self.agent_steps, "tokens": self.tokens,
                "money": self.money, "accel_seconds": self.accel_seconds}

    def used(self, what: str) -> float:
        """Budget usage since the last fresh budget (`harness continue` after a budget end)."""
        return self.totals()[what] - self.base.get(what, 0)

    @property
    def passed(self) -> bool:
        return bool(self.ended and self.ended["reason"] == "passed")

    def attempt(self, n: int) -> Attempt:
        while len(self.attempts) < n:
            self.attempts.append(Attempt(len(self.attempts) + 1))
        return self.attempts[n - 1]


def fold(events: list[dict]) -> State:
    st = State()
    for ev in events:
        apply(st, ev)
    return st


def apply(st: State, ev: dict) -> State:
    kind, n = ev["type"], ev.get("attempt")
    st.last_t = ev.get("t", st.last_t)
    if kind == "session":
        st.session, st.host, st.workdir, st.started = ev["session"], ev["host"], ev["workdir"], ev["t"]
        st.env, st.unset = dict(ev.get("env", {})), list(ev.get("unset", []))
    elif kind == "host":
        st.machine = ev
    elif kind == "launch":
        a = st.attempt(n)
        a.run_id, a.started, a.changes = ev["run_id"], ev["t"], st.pending_changes
        st.pending_changes = []
    elif kind == "stopped":
        st.attempt(n).stopped = True
    elif kind == "stage":
        st.attempt(n).stages.append(ev["stage"])
    elif kind == "verdict":
        st.attempt(n).verdict = ev
        st.run_seconds += ev.get("run_seconds", 0.0)
        st.accel_seconds += ev.get("accel_seconds", 0.0)
    elif kind == "fix":
        st.fixes_tried.add((ev.get("fingerprint"), ev.get("signature")))
        if ev["applied"] or ev.get("already"):
            st.pending_changes.append(ev["description"])
            st.env, st.unset = dict(ev.get("env", st.env)), list(ev.get("unset", st.unset))
    elif kind == "cleanup":
        st.infra_retries += 1
        st.pending_changes.append("cleanup and retry: " + "; ".join(ev["commands"]) if ev["commands"] else "retry")
    elif kind == "protocol":
        st.protocol = ev["mode"]
    elif kind == "model":
        st.model_calls += 1
        st.tokens += ev["prompt_tokens"] + ev["completion_tokens"]
        st.money += ev["cost"]
        st.model_seconds += ev.get("seconds", 0.0)
    elif kind == "tool":
        st.agent_steps += 1
        if ev.get("end") == "relaunch":
            st.pending_changes.append("agent: " + (ev.get("summary") or "relaunch"))
    elif kind == "end":
        st.ended = ev
    elif kind == "unreachable":
        st.unreachable = ev
    elif kind == "reachable":
        st.unreachable = None
    elif kind == "start_failed":
        st.start_error = ev.get("error", "")
    elif kind == "continue" and ev.get("crashed"):  # the same run of the session goes on
        st.crashes += 1
        st.unreachable, st.start_error = None, ""
    elif kind == "continue":
        st.ended, st.since, st.unreachable, st.start_error = None, len(st.attempts), None, ""
        if ev.get("fresh_budget"):
            st.base = st.totals()
            st.base["relaunches"] += 1  # like a new session: its first launch is not a relaunch
            st.started = ev["t"]
    if kind in ("fix", "model"):  # something other than a retry happened: the count starts over
        st.infra_retries = 0
    return st
