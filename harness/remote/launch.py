"""Detached runs on a host, all through a Transport (so the same code works locally and over SSH).

    launcher = Launcher(transport)
    h = await launcher.launch("bash train.sh", workdir="/w", unset=PROXY_VARS)
    st = await launcher.poll(h)                  # RunStatus(alive, exit_code, started, ended)
    cpu = await launcher.cpu_activity(h)         # a silent run: compiling, or hung?
    rep = await launcher.stop(h, cleanup=["ray stop --force"])

Everything about one run lives in `<workdir>/.harness/runs/<run-id>/`, so a new controller finds
it again by id (`find`); follow `handle.log_path` with `follow.py`:

    cmd          the command, run by bash (sh where there is no bash) in the workdir
    wrapper.sh   the detached supervisor: starts start.sh, waits, writes exit_code and ended
    start.sh     leader of the run's own session and group: writes its state, execs cmd
    run.log      the run's stdout and stderr, appended (the name is `log_name`)
    wrapper.log  the supervisor's own errors
    pid pgid started boot_id exit_code ended log_name    one value each, written atomically
    sup          the supervisor's pid
    queued       while a scheduler holds the job back: its state and why (jobsup.py)

Every process of a run carries HARNESS_RUN_ID=<id> in its environment, so processes that left
its process group (setsid, daemonising Ray workers) are still found, measured and stopped.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

from ..errors import BadInput, CommandFailed, HarnessError
from . import procs
from .procs import MARKER, StopReport, shell_vars
from .transport import ENV_NAME, CommandResult, Transport

RUNS = ".harness/runs"
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")

# Write one small file atomically (temp file, then rename): a reader never sees half a value.
PUT = 'put() { printf "%s\\n" "$2" > "$RD/.$1.tmp" && mv -f "$RD/.$1.tmp" "$RD/$1"; }\n'

# The supervisor. It runs detached (setsid nohup, every fd redirected) so it outlives the
# controller's connection, and it stays the run's parent so it can record how the run ended.
# The run gets its own session and group (setsid), apart from the supervisor, so stop() can
# signal the whole tree without killing the one process that writes exit_code (last: a run
# with an exit_code has its ended too). Its run dir is its first argument; the workdir, the
# run's id and its log's name follow from it.
HEAD = r'''
WD=${RD%/.harness/runs/*}; ID=${RD##*/}; LOG=; read -r LOG < "$RD/log_name"
'''
WRAPPER = 'RD=$1\n' + HEAD + PUT + r'''
printf '%s\n' $$ > "$RD/sup"
cd "$WD" || { put ended "$(date +%s)"; put exit_code 127; exit 1; }
setsid sh "$RD/start.sh" </dev/null >>"$RD/$LOG" 2>&1 &
wait $!
rc=$?
put ended "$(date +%s)"
put exit_code $rc
'''

# The run's session leader, so $$ is both its pid and its pgid. boot_id: after a reboot an old
# pid may belong to another process. pid is written last, atomically: launch() waits for it,
# and then the others are whole (so they need no rename of their own). bash when there is one:
# launch scripts often `source` a toolkit's env.
START = 'RD=${0%/start.sh}\n' + PUT + r'''
printf '%s\n' $$ > "$RD/pgid"
printf '%s\n' "$(date +%s)" > "$RD/started"
b=; read -r b < /proc/sys/kernel/random/boot_id 2>/dev/null; printf '%s\n' "$b" > "$RD/boot_id"
put pid $$
sh=$(command -v bash || echo /bin/sh)
exec env @ENV@ "$sh" "$RD/cmd"
'''

# A run is alive when it has a pid, no exit_code, and in this boot that pid still exists or its
# supervisor does (the run has just ended and the supervisor is writing exit_code: without this a
# poll in that moment would see a run that ended with no code). The supervisor's pid counts only
# while it is still wrapper.sh, so a reused pid never keeps a dead run alive.
# (`read` rather than `$(cat …)`: a poll forks nothing while the run lives.)
ALIVE = r'''
val() { v=; read -r v < "$1" 2>/dev/null; [ -n "$v" ]; }
alive() {
  [ -s "$1/pid" ] && [ ! -e "$1/exit_code" ] || return 1
  val "$1/boot_id"; b=$v; val /proc/sys/kernel/random/boot_id; [ "$b" = "$v" ] || return 1
  val "$1/pid" && kill -0 "$v" 2>/dev/null && return 0
  val "$1/sup" && kill -0 "$v" 2>/dev/null && grep -aqs wrapper.sh "/proc/$v/cmdline" && [ ! -e "$1/exit_code" ]
}
'''

# Refuse a second run beside a live one (they would fight over the accelerators), then claim
# the run directory (mkdir fails when the id is taken) with the claimant's token. The same claim
# sent again (its connection dropped) finds its own token: idempotent. W: the absolute workdir.
CLAIM = r'''
claim() {
  cd "$WD" || return 4
  R=.harness/runs/$ID
  cd -P . && W=$PWD
  if [ -n "$CLAIMANT" ] && val "$R/claim" && [ "$v" = "$CLAIMANT" ]; then return 0; fi
  for d in .harness/runs/*/; do
    d=${d%/}; alive "$d" && { echo "${d##*/} $(cat "$d/pid")"; return 3; }
  done
  { [ -d .harness/runs ] || mkdir -p .harness/runs; } && mkdir -m 700 "$R" || return 5
  printf '%s\n' "$LOG" > "$R/log_name" && printf '%s\n' "$CLAIMANT" > "$R/.claim" && mv -f "$R/.claim" "$R/claim"
}
'''

# A run's state, one `name=value` a line (in its run dir, with ALIVE's functions). Whether it is
# alive is asked before its files are read: a supervisor that writes exit_code and exits between
# the two is then read with its code (read the other way round, the run was dead with no code),
# and a run whose exit_code was read is not alive.
STATE = r'''
cd -P . && echo "dir=$PWD"
a=; alive . && a=1
for f in pid pgid started exit_code ended log_name queued; do val $f && echo "$f=$v" && [ $f = exit_code ] && a=; done
[ -n "$a" ] && echo alive=1
true
'''

# Write the run's files (unless its supervisor started already: a run's cmd is never rewritten
# under it), start the supervisor detached from this command's session and fds, wait (bounded)
# for the run to write its pid, and print its state. `mkdir detached` makes it idempotent: sent
# again, it waits for the run the first started.
DETACH = r'''
cd "$RD" || exit 7
[ -e detached ] || (umask 077 && printf '%s\n' "$CMD" > cmd && printf '%s' "$START" > start.sh &&
  printf '%s' "$WRAP" > wrapper.sh) || exit 6
if mkdir detached 2>/dev/null; then setsid nohup sh wrapper.sh "$PWD" </dev/null >>wrapper.log 2>&1 & fi
i=0
while [ ! -s pid ] && [ ! -e exit_code ] && [ $i -lt $TRIES ]; do sleep 0.005; i=$((i+1)); done
''' + STATE
# A launch in one round trip: claim the run dir, write the run's files, start it.
LAUNCH = ALIVE + CLAIM + 'claim || exit $?\nRD=$W/.harness/runs/$ID\n' + DETACH

STATUS = ALIVE + 'cd "$RD" 2>/dev/null || exit 4\n' + STATE

# After a stop: give the supervisor a moment (bounded: 5 s) to record how the run ended; it
# usually has by the first look or two.
ENDED = 'i=0; while [ ! -e "$RD/exit_code" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done\n'


class RunActive(HarnessError):
    """Another run is alive in the same workdir; stop it (or wait) before launching."""

    def __init__(self, run_id: str, pid: int, workdir: str):
        self.run_id, self.pid = run_id, pid
        super().__init__(f"run {run_id} (pid {pid}) is still running in {workdir}; stop it first")


class LaunchFailed(HarnessError):
    """The run did not start: its pid never appeared."""


@dataclass(frozen=True)
class RunHandle:
    run_id: str
    workdir: str  # absolute, on the host
    pid: int | None
    pgid: int | None
    started: float | None
    log_name: str = "run.log"

    @property
    def run_dir(self) -> str:
        return f"{self.workdir}/{RUNS}/{self.run_id}"

    @property
    def log_path(self) -> str:
        return f"{self.run_dir}/{self.log_name}"


@dataclass(frozen=True)
class RunStatus:
    alive: bool
    exit_code: int | None
    started: float | None
    ended: float | None
    queued: str = ""  # a scheduler holds the job back: its state and why (jobsup.py)


class RunLauncher(Protocol):
    """What the controller needs of a launcher (this detached-process one; Ray Jobs, Slurm)."""

    async def launch(self, cmd: str, *, workdir: str, run_id: str | None = None,
                     env: dict[str, str] | None = None, unset: Sequence[str] = (),
                     log_name: str = "run.log") -> RunHandle: ...
    async def find(self, workdir: str, run_id: str) -> RunHandle | None: ...
    async def poll(self, handle: RunHandle) -> RunStatus: ...
    async def stop(self, handle: RunHandle, grace: float = 10, cleanup: Sequence[str] = ()) -> StopReport: ...
    async def evidence(self, handle: RunHandle, nodes=()) -> str: ...
    async def postmortem(self, handle: RunHandle) -> str: ...
    async def cpu_activity(self, handle: RunHandle, interval: float = 1.0) -> dict: ...


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def _rel(path: str) -> str:
    """`~/x` as `x`: relative paths start at the login directory, as over SSH."""
    return (path[2:] or ".") if path == "~" or path.startswith("~/") else path


def _num(s: str | None, kind=int):
    try:
        return kind(s) if s not in (None, "") else None
    except ValueError:
        return None


def _fields(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


def _handle(run_id: str, s: dict[str, str]) -> RunHandle | None:
    """The handle of a run from the state STATUS prints (None without its directory)."""
    if "dir" not in s:
        return None
    return RunHandle(run_id, s["dir"].rsplit(f"/{RUNS}/", 1)[0], _num(s.get("pid")), _num(s.get("pgid")),
                     _num(s.get("started"), float), s.get("log_name") or "run.log")


# A Ray driver takes its job's runtime env from this variable when it calls ray.init, as a Ray Jobs
# entrypoint is given one (ray/_private/worker.py init: the variable's runtime env merged with
# ray.init's own, env vars key by key): set, the run's marker reaches every worker of the job its
# driver starts, on every node — workers a cluster started before the run (`ray start` on each node)
# inherit nothing of the run's own environment. Left alone when the spec sets or unsets it.
RAY_JOB_CONFIG = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def _env_args(run_id: str, env: dict[str, str], unset: Sequence[str]) -> str:
    for name in [*env, *unset]:
        if not ENV_NAME.match(name):
            raise BadInput(f"{name!r} is not an environment variable name")
    args = [f"-u {n}" for n in unset] + [f"{MARKER}={run_id}"]
    if RAY_JOB_CONFIG not in env and RAY_JOB_CONFIG not in unset:
        args.append(f"{RAY_JOB_CONFIG}=" + shlex.quote(json.dumps({"runtime_env": {"env_vars": {MARKER: run_id}}})))
    return " ".join(args + [f"{k}={shlex.quote(v)}" for k, v in env.items()])


class Launcher:
    """Runs as detached process groups with a run dir, through one Transport."""

    def __init__(self, transport: Transport, *, start_timeout: float = 30.0, timeout: float = 60.0,
                 once=None, token: str = ""):
        """`once(cmd)` guards the cleanup commands (once.Ops); `token` marks this launcher's claims,
        so a claim sent again after a dropped connection is recognised as its own."""
        self.t, self.start_timeout, self.timeout = transport, start_timeout, timeout
        self.once, self.token = once or (lambda cmd: cmd), token

    async def _sh(self, script: str, timeout: float | None = None, **kv) -> CommandResult:
        return await self.t.run(shell_vars(**kv) + script, timeout=timeout or self.timeout)

    async def launch(self, cmd: str, *, workdir: str, run_id: str | None = None,
                     env: dict[str, str] | None = None, unset: Sequence[str] = (),
                     log_name: str = "run.log") -> RunHandle:
        """Start `cmd` detached in `workdir`; returns once the run has written its pid.
        RunActive if another run of this workdir is alive."""
        run_id = run_id or new_run_id()
        if not _ID.match(run_id) or not _ID.match(log_name):
            raise BadInput(f"run id {run_id!r} and log name {log_name!r} must be plain file names")
        env_args = _env_args(run_id, env or {}, list(unset))
        files = dict(START="#!/bin/sh\n" + START.replace("@ENV@", env_args), WRAP="#!/bin/sh\n" + WRAPPER,
                     TRIES=max(1, int(self.start_timeout / 0.005)))
        if type(self)._prepare is Launcher._prepare:  # the command is the run's: one round trip
            r = await self._sh(LAUNCH, timeout=self.start_timeout + 30, WD=_rel(workdir), ID=run_id, LOG=log_name,
                               CLAIMANT=self.token, CMD=cmd.rstrip("\n"), **files)
            self._claimed(r, workdir, run_id)
            rd = f"{_rel(workdir)}/{RUNS}/{run_id}"
        else:  # a scheduler's: its job's files go into the run dir first
            wd = self._claimed(await self._sh(ALIVE + CLAIM + 'claim || exit $?\necho "$W"\n', WD=_rel(workdir),
                                              ID=run_id, LOG=log_name, CLAIMANT=self.token), workdir, run_id)
            rd = f"{wd}/{RUNS}/{run_id}"
            cmd = await self._prepare(cmd, wd=wd, rd=rd, run_id=run_id, env=env or {}, unset=list(unset))
            r = await self._sh(ALIVE + DETACH, timeout=self.start_timeout + 30, RD=rd, CMD=cmd.rstrip("\n"), **files)
        handle = _handle(run_id, _fields(r.stdout)) if r.ok else None
        if handle is None or handle.pid is None:
            raise LaunchFailed(f"run {run_id} did not start within {self.start_timeout:g}s: "
                               f"see {rd}/wrapper.log and {rd}/{log_name}")
        return handle

    async def _prepare(self, cmd: str, *, wd: str, rd: str, run_id: str, env: dict[str, str],
                       unset: list[str]) -> str:
        """The command the run's supervisor execs: `cmd` itself here; a scheduler's launcher
        (scheduled.py) writes its job's files into the run dir and returns its supervisor."""
        return cmd

    def _claimed(self, r: CommandResult, workdir: str, run_id: str) -> str:
        """The claim's answer: the absolute workdir it printed last, or why it was refused."""
        if r.returncode == 3:
            other, pid = r.stdout.split()[:2]
            raise RunActive(other, int(pid), workdir)
        if r.returncode == 4:
            raise BadInput(f"workdir {workdir} does not exist on {self.t.name}")
        if r.returncode == 5:
            raise BadInput(f"run id {run_id} is already used in {workdir}; choose another")
        if r.returncode == 6:
            raise LaunchFailed(f"could not write the files of run {run_id} in {workdir}: {r.stderr.strip()[:300]}")
        if not r.ok:
            raise CommandFailed(r)
        return (r.stdout.strip().splitlines() or [""])[-1]

    async def _status(self, run_dir: str) -> dict[str, str] | None:
        r = await self._sh(STATUS, RD=run_dir)
        if r.returncode == 4:
            return None
        if not r.ok:
            raise CommandFailed(r)
        return _fields(r.stdout)

    async def find(self, workdir: str, run_id: str) -> RunHandle | None:
        """The run `run_id` in `workdir` (left by this or an earlier controller), or None."""
        if not _ID.match(run_id):
            raise BadInput(f"run id {run_id!r} must be a plain file name")
        s = await self._status(f"{_rel(workdir)}/{RUNS}/{run_id}")
        return None if s is None else _handle(run_id, s)

    async def poll(self, handle: RunHandle) -> RunStatus:
        s = await self._status(handle.run_dir) or {}
        return RunStatus("alive" in s, _num(s.get("exit_code")), _num(s.get("started"), float),
                         _num(s.get("ended"), float), s.get("queued", "") if "alive" in s else "")

    async def stop(self, handle: RunHandle, grace: float = 10, cleanup: Sequence[str] = ()) -> StopReport:
        """TERM the run's processes, KILL them after `grace` s, run `cleanup` in the workdir,
        then kill whatever of the run is still there. `report.survivors` should be empty."""
        if handle.pgid is None:  # a handle found before the run wrote its state
            handle = await self.find(handle.workdir, handle.run_id) or handle
        report = StopReport()
        ended = shell_vars(RD=handle.run_dir) + ENDED
        if not cleanup:  # one command: TERM, KILL, sweep, wait for the exit code
            await procs.stop(self.t, handle.pgid, handle.run_id, grace, report, after=ended)
            return report
        await procs.terminate(self.t, handle.pgid, handle.run_id, grace, report)
        for cmd in cleanup:
            report.cleanup.append(await self.t.run(self.once(cmd), cwd=handle.workdir, timeout=self.timeout))
        await procs.sweep(self.t, handle.pgid, handle.run_id, report, after=ended)
        return report

    async def evidence(self, handle: RunHandle, nodes=()) -> str:
        """Where a hung run's processes wait (states, CPU, Python stacks with py-spy), on the head
        and on each worker node (`nodes`: label, transport): evidence.py."""
        from .evidence import hang_evidence

        return await hang_evidence(self.t, handle.pgid, handle.run_id, nodes)

    async def postmortem(self, handle: RunHandle) -> str:
        """What the engine itself knows of a failed run, as remote/postmortem.py sections: nothing
        here; a Ray job's dead actors (scheduled.py)."""
        return ""

    async def cpu_activity(self, handle: RunHandle, interval: float = 1.0) -> dict:
        """CPU seconds the run's processes used over `interval` s, and how many there are:
        a silent run that still burns CPU is compiling, not hung."""
        return await procs.cpu_activity(self.t, handle.pgid, handle.run_id, interval)
