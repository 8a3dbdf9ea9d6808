"""Post-mortem evidence of a failed run, gathered on the host before it is stopped and relaunched
(Ray forgets dead workers, a relaunch rotates its session dir, plogs pile up):

    text = await gather(transport, ray_temp="/tmp/ray", since=handle.started, workdir=…, run_id=…)
    for label, data in sections(text): …    # ("worker-4414.err", b"Traceback…"), ("raylet.out", …)

What the driver's stdout often lacks: a worker that died hard shows there only as ActorDiedError
or "A worker died or was killed while executing a task by an unexpected system error"; its last
words are in its own `worker-<id>-<job>-<pid>.{out,err}` under Ray's session logs, the raylet
says why it went (`raylet.out`), the kernel's OOM killer says so in `dmesg`, and on Ascend an
HCCL failure's real error is in the CANN plogs (`ASCEND_PROCESS_LOG_PATH`, which the presets put
under `<workdir>/logs/ascend/<run-id>`, or `~/ascend/log/debug/plog/`). One shell command, one
round trip, bounded output; only files written since the run started that say something went
wrong, newest first.
"""

from __future__ import annotations

from .procs import shell_vars
from .transport import Transport

HEAD = "@@harness-file "
MAX_FILES = 12  # worker files, and plog files, at most
LINES = 120  # the last lines of each file

# The marks of a file worth reading (a worker's .err of a healthy run holds only warnings).
TROUBLE = ("Traceback|Error|ERROR|error:|Fatal|FATAL|SIGSEGV|SIGABRT|SIGKILL|SIGBUS|Killed|"
           "Segmentation fault|out of memory|core dumped|Check failed")
# raylet.out lines about a worker or a node going away.
RAYLET = ("died|killed|Killing|OOM|out of memory|memory usage|SIGKILL|SIGSEGV|exit_type|"
          "Worker exits|crash|unexpected|disconnected|failed to|Failed to")
OOM = "out of memory|oom-kill|oom_reaper|Killed process"

SCRIPT = r'''
exec 2>/dev/null
fresh() { find "$@" -type f -size +0 -newermt "@$SINCE" | xargs -r ls -t | head -n 200; }
n=0
L="$RAY_TEMP/session_latest/logs"
if [ -d "$L" ]; then
  for f in $(fresh "$L" -maxdepth 1 \( -name 'worker-*.err' -o -name 'worker-*.out' \)); do
    grep -q -E "$TROUBLE" "$f" || continue
    n=$((n+1)); [ $n -gt $MAX ] && break
    b=${f##*/}; pid=${b##*-}
    echo "$HEAD""worker-$pid"; tail -n $LINES "$f"; echo
  done
  for f in "$L/raylet.out" "$L/raylet.err"; do
    [ -s "$f" ] && [ "$(find "$f" -newermt "@$SINCE")" ] || continue
    out=$(grep -E "$RAYLET" "$f" | tail -n 40)
    [ -n "$out" ] && { echo "$HEAD${f##*/}"; echo "$out"; }
  done
fi
after=$(date -d "@$SINCE" +%Y-%m-%dT%H:%M:%S)  # the kernel's ring holds days: only what came since
out=$(dmesg --time-format iso | awk -v a="$after" 'substr($1, 1, 19) >= a' | grep -E -i "$OOM" | tail -n 20)
[ -n "$out" ] && { echo "$HEAD""dmesg"; echo "$out"; }
n=0
for f in $(fresh "$WD/logs/ascend/$ID" "$HOME/ascend/log/debug/plog" -name 'plog-*.log'); do
  out=$(grep -E '\[ERROR\]' "$f" | tail -n 30)
  [ -n "$out" ] || continue
  n=$((n+1)); [ $n -gt $MAX ] && break
  b=${f##*/}; echo "$HEAD${b%.log}"; echo "$out"
done
true
'''


async def gather(t: Transport, *, ray_temp: str, since: float | None, workdir: str, run_id: str,
                 timeout: float = 60.0) -> str:
    """The evidence on the host as `@@harness-file LABEL` sections ("" when there is none, or the
    host cannot say)."""
    if since is None:
        return ""
    r = await t.run(shell_vars(RAY_TEMP=ray_temp, SINCE=int(since) - 1, WD=workdir, ID=run_id, MAX=MAX_FILES,
                               LINES=LINES, HEAD=HEAD, TROUBLE=TROUBLE, RAYLET=RAYLET, OOM=OOM) + SCRIPT,
                    timeout=timeout)
    return r.stdout if r.ok else ""


def sections(text: str) -> list[tuple[str, bytes]]:
    """(label, content) for each file of `gather`'s output, in its order."""
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        if line.startswith(HEAD):
            out.append((line[len(HEAD):].strip(), []))
        elif out:
            out[-1][1].append(line)
    return [(label, "".join(lines).encode()) for label, lines in out if "".join(lines).strip()]


def relabel(text: str, node: str) -> str:
    """`gather`'s output from a worker node, each file's label led by the node's (`w1:raylet.out`)."""
    return "".join(f"{HEAD}{node}:{ln[len(HEAD):]}" if ln.startswith(HEAD) else ln
                   for ln in text.splitlines(keepends=True))
