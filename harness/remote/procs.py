"""The processes of one run on a host, found, signalled and measured through a Transport.

A run's processes are those in its process group, and those that left it (setsid, daemonising
Ray workers) but carry the run's marker `HARNESS_RUN_ID=<id>` in their environment. Each
operation is one shell command (one round trip over SSH) reading /proc, so it needs Linux and
nothing installed beyond sh, grep and sort.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..errors import CommandFailed
from .transport import CommandResult, Transport

MARKER = "HARNESS_RUN_ID"
KILL_GRACE = 2.0  # seconds between TERM and KILL of a timed-out command's process group

# alive: a live (non-zombie) process in group $P, or process $P itself (ps when the host has
# it; else kill -0, which also counts a zombie).
_ALIVE = ("alive() { if command -v ps >/dev/null 2>&1; then ps -e -o pid= -o pgid= -o stat= | "
          "awk -v p=$P '($1==p || $2==p) && $3 !~ /^Z/ {f=1} END {exit !f}'; else kill -0 $G; fi; }")


def kill_script(pid: int, grace: float | None = None) -> str:
    """A command that TERMs process group `pid` (the pid alone when it leads none), waits up to
    `grace` s (KILL_GRACE) while a live member is left, KILLs what still lives and waits, bounded
    (2 s), for it to be gone. Used by the SSH transports when a command times out."""
    ticks = max(1, round((KILL_GRACE if grace is None else grace) * 10))
    script = (f"P={pid}; {_ALIVE}; "
              "if kill -TERM -$P; then G=-$P; elif kill -TERM $P; then G=$P; else exit 0; fi; "
              f"i=0; while [ $i -lt {ticks} ] && alive; do sleep 0.1; i=$((i+1)); done; "
              "if alive; then kill -KILL $G; fi; "
              "i=0; while [ $i -lt 20 ] && alive; do sleep 0.1; i=$((i+1)); done; exit 0")
    return "/bin/sh -c " + shlex.quote("exec 2>/dev/null; " + script)

# members: the run's live processes: those carrying its marker, and the members of its process
# group while one of them is in it — once every marked process is gone, the group's number is
# free for the system to hand to another group (pid_max is often 32768, so numbers come round
# within minutes on a busy host), and a TERM to it would hit someone else's processes. Zombies
# are skipped (nothing to stop; their environ is empty). Unreadable /proc entries (other users'
# processes, processes just gone) are ignored.
MEMBERS = r'''
marked() { for f in $(grep -lzxF "$MARKER=$ID" /proc/[0-9]*/environ 2>/dev/null); do f=${f#/proc/}; echo "${f%/environ}"; done; }
ours() {  # $1: the marked pids, when the caller has them
  [ -n "$PGID" ] || return 1
  for p in ${1-$(marked)}; do
    read -r l < "/proc/$p/stat" 2>/dev/null || continue
    set -- ${l##*) }
    [ "$3" = "$PGID" ] && return 0
  done
  return 1
}
members() {
  m=$(marked)
  { for p in $m; do
      read -r l < "/proc/$p/stat" || continue
      set -- ${l##*) }
      [ "$1" != Z ] && echo "$p"
    done
    ours "$m" && for f in /proc/[0-9]*/stat; do
      read -r l < "$f" || continue
      set -- ${l##*) }
      [ "$1" != Z ] && [ "$3" = "$PGID" ] && { f=${f#/proc/}; echo "${f%/stat}"; }
    done
  } 2>/dev/null | sort -un
}
'''

# signal SIG [MEMBERS]: to the whole group at once (nothing forks past it), then to every
# member (the caller's last look, else a new one), escapees included; prints "SIG pid" for each
# process reached. settle N: wait, bounded (N hundredths of a second), until no member is left,
# leaving the last look in $m; looking again after 0.01, 0.02, 0.05, 0.1 s, then every 0.2 s,
# so a run that goes at once is seen gone at once without a busy loop.
SIGNAL = MEMBERS + r'''
signal() {
  pids=${2-$(members)}
  ours "$pids" && kill -"$1" -- -"$PGID" 2>/dev/null
  for p in $pids; do kill -"$1" "$p" 2>/dev/null && echo "$1 $p"; done
}
settle() {
  i=0; d=0.01; n=1
  while m=$(members); [ -n "$m" ] && [ $i -lt "$1" ]; do
    sleep $d; i=$((i + n))
    case $d in 0.01) d=0.02; n=2 ;; 0.02) d=0.05; n=5 ;; 0.05) d=0.1; n=10 ;; 0.1) d=0.2; n=20 ;; esac
  done
}
'''
# Each look at /proc is used once: a run that already ended (the usual case after a crash)
# costs two scans; KILL follows TERM only when something outlived the grace.
_TERM = 'signal TERM "$m"; settle "$TRIES"; [ -z "$m" ] || { signal KILL "$m"; settle 500; }\n'
_SWEEP = '''left=$(members); [ -n "$left" ] && { signal KILL "$left"; settle 500; left=$m; }
echo "left $(echo $left)"\n'''
TERMINATE = SIGNAL + 'm=$(members); [ -n "$m" ] || exit 0; ' + _TERM
SWEEP = SIGNAL + _SWEEP
# A stop with no cleanup between: both in one command (then `after`, the caller's own lines)
STOP = SIGNAL + 'm=$(members); if [ -n "$m" ]; then ' + _TERM.strip() + '; fi\n' + _SWEEP

# CPU ticks of the run's processes, sampled twice INTERVAL apart in one command. Fields 14-17
# of /proc/PID/stat are utime stime cutime cstime; the last two hold children already reaped,
# so a short-lived compiler process that ends between the samples is not lost.
CPU = MEMBERS + r'''
snap() {
  t=0; n=0
  for p in $(members); do
    read -r l < "/proc/$p/stat" || continue
    set -- ${l##*) }; t=$((t + ${12} + ${13} + ${14} + ${15})); n=$((n + 1))
  done
  echo "$t $n"
}
snap 2>/dev/null; sleep "$INTERVAL"; snap 2>/dev/null; getconf CLK_TCK 2>/dev/null || echo 100
'''


@dataclass
class StopReport:
    """Pids that got TERM, pids that needed KILL, the cleanup results, and what survived."""

    terminated: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    cleanup: list[CommandResult] = field(default_factory=list)
    survivors: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.survivors and all(r.ok for r in self.cleanup)

    def add(self, output: str) -> None:
        """Take in the "TERM pid", "KILL pid" and "left pid..." lines of the scripts above."""
        lists = {"TERM": self.terminated, "KILL": self.killed, "left": self.survivors}
        for line in output.splitlines():
            word, _, rest = line.partition(" ")
            lists.get(word, []).extend(int(p) for p in rest.split() if p.isdigit())


def shell_vars(**kv) -> str:
    """Shell assignments that parameterise a constant script."""
    return "".join(f"{k}={shlex.quote(str(v))}\n" for k, v in kv.items())


def _vars(pgid: int | None, run_id: str, **kv) -> str:
    return shell_vars(MARKER=MARKER, PGID=pgid or "", ID=run_id, **kv)


async def terminate(t: Transport, pgid: int | None, run_id: str, grace: float, report: StopReport) -> None:
    """TERM every process of the run, wait up to `grace` s for them to go, KILL the rest."""
    r = await t.run(_vars(pgid, run_id, TRIES=max(1, int(grace * 100))) + TERMINATE, timeout=grace + 60)
    report.add(r.stdout)


async def sweep(t: Transport, pgid: int | None, run_id: str, report: StopReport, *, after: str = "") -> None:
    """KILL whatever of the run is (still, or again) there; record what could not be killed.
    `after`: shell lines run next in the same command (their variables set by the caller)."""
    _swept(await t.run(_vars(pgid, run_id) + SWEEP + after, timeout=60), report)


async def stop(t: Transport, pgid: int | None, run_id: str, grace: float, report: StopReport, *,
               after: str = "") -> None:
    """`terminate` then `sweep` (and `after`) in one command, for a stop with no cleanup between."""
    r = await t.run(_vars(pgid, run_id, TRIES=max(1, int(grace * 100))) + STOP + after, timeout=grace + 120)
    _swept(r, report)


def _swept(r, report: StopReport) -> None:
    if "left" not in r.stdout:
        raise CommandFailed(r)
    report.add(r.stdout)
    report.killed = sorted(set(report.killed))


async def cpu_activity(t: Transport, pgid: int | None, run_id: str, interval: float = 1.0) -> dict:
    """CPU seconds the run's processes used over `interval` s, and how many there are now."""
    r = await t.run(_vars(pgid, run_id, INTERVAL=interval) + CPU, timeout=interval + 60)
    words = r.stdout.split()
    if not r.ok or len(words) < 5:
        raise CommandFailed(r)
    t0, _, t1, n, hz = (int(x) for x in words[:5])
    return {"cpu_seconds": max(0, t1 - t0) / (hz or 100), "processes": n, "interval": interval}
