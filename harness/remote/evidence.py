"""What an engineer would look at before stopping a run that hangs, gathered in one command: for
every process of the run, its state, the CPU it used in a second, its kernel wait channel, its
command line, and — with py-spy on the host — the Python stack of each of its threads. Then one
line per process saying where it waits (the innermost frame of its main thread, and the
collective it is in when one is on the stack), and the process its peers wait for when some of
a kind wait in a collective and one of them is busy elsewhere, so the agent and the report can say
*where* the run hangs, not only that it does.

    text = await hang_evidence(transport, handle.pgid, handle.run_id)
"""

from __future__ import annotations

import re

from ..analyze.stacks import collective, dumps, waited_on, waiting_frame
from .procs import _vars, MEMBERS
from .transport import Transport

# py-spy on the host: on PATH, beside a Python, or in ~/.local/bin (pip install --user py-spy).
EVIDENCE = MEMBERS + r'''
spy=$(command -v py-spy 2>/dev/null || { [ -x "$HOME/.local/bin/py-spy" ] && echo "$HOME/.local/bin/py-spy"; })
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu() { read -r l < "/proc/$1/stat" 2>/dev/null || { echo 0; return; }; set -- ${l##*) }; echo $(( $12 + $13 )); }
pids=$(members)
for p in $pids; do eval "c0_$p=$(cpu $p)"; done
sleep 1
for p in $pids; do
  [ -r "/proc/$p/stat" ] || continue
  read -r l < "/proc/$p/stat"; set -- ${l##*) }; st=$1
  eval "c0=\$c0_$p"; c1=$(cpu $p)
  echo "== process $p state $st cpu_ticks $((c1 - c0)) hz $hz wchan $(cat /proc/$p/wchan 2>/dev/null || echo ?)"
  echo "cmd $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-300)"
  case "$(readlink "/proc/$p/exe" 2>/dev/null)" in  # stacks of Python processes (py-spy reads no other)
    *python*) [ -z "$spy" ] || RUST_BACKTRACE=0 timeout 20 "$spy" dump --pid "$p" 2>&1 | head -n 80;;
  esac
done
[ -n "$spy" ] || echo "== no py-spy"
true
'''
_PROC = re.compile(r"^== process (\d+) state (\S+) cpu_ticks (\d+) hz (\d+) wchan (\S+)$")


def summary(raw: str) -> list[str]:
    """One line per process: pid, state, CPU, where its main thread waits and the collective on its
    stack, read as the analyzer reads a dump (analyze/stacks.py), or the kernel wait channel when
    there is no stack."""
    out, cur = [], None
    for line in raw.splitlines():
        if m := _PROC.match(line):
            cur = {"pid": m[1], "state": m[2], "cpu": int(m[3]) / max(1, int(m[4])), "wchan": m[5], "cmd": "",
                   "dump": []}
            out.append(cur)
        elif cur is not None and line.startswith("cmd "):
            cur["cmd"] = line[4:].strip()
        elif cur is not None:
            cur["dump"].append(line)  # py-spy's dump of it, when there is one
    lines = []
    for p in out:
        main = next((d.main for d in dumps("\n".join(p["dump"]))), [])  # its main thread (py-spy's first)
        # the frame it waits in, past the standard library's and c10d's waiting; the collective proper
        where = f"in {waiting_frame(main)}" if main else f"kernel wait {p['wchan']}"
        coll = collective(main)
        lines.append(f"pid {p['pid']} {p['state']} {p['cpu']:.2f}s CPU/s {where}"
                     + (f", in the collective {coll}" if coll else "") + f" — {p['cmd'][:80]}")
    return lines


def waited(raw: str) -> str | None:
    """The process(es) the others wait for (`stacks.waited_on`), in a line, when the dumps show one."""
    if (late := waited_on(dumps(raw))) is None:
        return None
    procs, n, op = late
    return (f"waited on: pid {', '.join(p.pid for p in procs)}, in {waiting_frame(procs[0].main)} — not in the "
            f"collective {op} that {n} process(es) of its kind wait in")


async def hang_evidence(t: Transport, pgid: int | None, run_id: str) -> str:
    """The evidence text (a summary, then the raw per-process dump), or what stopped it."""
    r = await t.run(_vars(pgid, run_id) + EVIDENCE, timeout=120)
    raw = r.stdout
    lines = summary(raw)
    head = [f"{len(lines)} process(es) of the run, sampled for 1 s:"] + [f"  {x}" for x in lines]
    if late := waited(raw):
        head.append(f"  {late}")
    if "== no py-spy" in raw:
        head.append("  (no py-spy on the host, so no Python stacks: `pip install py-spy` there, and the next "
                    "hang shows where each process waits)")
    if not r.ok:
        head.append(f"  (the evidence command failed: {r.tail(2)})")
    return "\n".join(head) + "\n\n" + raw.replace("== no py-spy\n", "")
