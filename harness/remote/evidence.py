"""What an engineer would look at before stopping a run that hangs, gathered in one command: for
every process of the run, its state, the CPU it used in a second, its kernel wait channel, its
command line, and — with py-spy on the host — the Python stack of each of its threads. Then one
line per process saying where it waits (the innermost frame of its main thread, and the
collective it is in when one is on the stack), and the process its peers wait for when some of
a kind wait in a collective and one of them is busy elsewhere, so the agent and the report can say
*where* the run hangs, not only that it does. A multi-node run's worker nodes are sampled the same
way, each through its own link, and read together with the head: the rank its peers wait for may
be on another node than theirs.

    text = await hang_evidence(transport, handle.pgid, handle.run_id, nodes=[("w1", node_transport)])
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..analyze.stacks import collective, dumps, waited_on, waiting_frame
from ..errors import HostUnreachable, one_line
from .procs import _vars, MARKER, MEMBERS
from .transport import Transport

# py-spy on the host: on the session's PATH or in ~/.local/bin (pip install --user py-spy), else on the
# PATH of the process itself — the conda env or venv the run activated, which a non-interactive SSH
# session's PATH does not hold (`pip install py-spy` into the training env is enough).
EVIDENCE = MEMBERS + r'''
spy=$(command -v py-spy 2>/dev/null || { [ -x "$HOME/.local/bin/py-spy" ] && echo "$HOME/.local/bin/py-spy"; })
spy_of() {
  [ -z "$spy" ] || { echo "$spy"; return; }
  for d in $(tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | sed -n 's/^PATH=//p' | tr ':' ' '); do
    [ -x "$d/py-spy" ] && { echo "$d/py-spy"; return; }
  done
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
cpu() { read -r l < "/proc/$1/stat" 2>/dev/null || { echo 0; return; }; set -- ${l##*) }; echo $(( $12 + $13 )); }
pids=$(members)
for p in $pids; do eval "c0_$p=$(cpu $p)"; done
sleep 1
dumped=
for p in $pids; do
  [ -r "/proc/$p/stat" ] || continue
  read -r l < "/proc/$p/stat"; set -- ${l##*) }; st=$1
  eval "c0=\$c0_$p"; c1=$(cpu $p)
  echo "== process $p state $st cpu_ticks $((c1 - c0)) hz $hz wchan $(cat /proc/$p/wchan 2>/dev/null || echo ?)"
  echo "cmd $(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-300)"
  case "$(readlink "/proc/$p/exe" 2>/dev/null)" in  # stacks of Python processes (py-spy reads no other)
    *python*) s=$(spy_of "$p"); [ -z "$s" ] || { dumped=1; RUST_BACKTRACE=0 timeout 20 "$s" dump --pid "$p" 2>&1 | head -n 80; };;
  esac
done
[ -n "$spy$dumped" ] || echo "== no py-spy"
true
'''
_PROC = re.compile(r"^== process (\d+) state (\S+) cpu_ticks (\d+) hz (\d+) wchan (\S+)$")


def summary(raw: str, node: str = "") -> list[str]:
    """One line per process: pid, state, CPU, where its main thread waits and the collective on its
    stack, read as the analyzer reads a dump (analyze/stacks.py), or the kernel wait channel when
    there is no stack; `node`: the worker node it ran on, named after the pid."""
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
        lines.append(f"pid {p['pid']}{' on ' + node if node else ''} {p['state']} {p['cpu']:.2f}s CPU/s {where}"
                     + (f", in the collective {coll}" if coll else "") + f" — {p['cmd'][:80]}")
    return lines


def waited(raw: str, nodes: dict[str, str] | None = None) -> str | None:
    """The process(es) the others wait for (`stacks.waited_on`), in a line, when the dumps show one:
    the head's (`raw`) and each worker node's (`nodes`: label -> its raw text) read as one run."""
    procs = dumps(raw) + [replace(d, pid=f"{d.pid} on {label}") for label, text in (nodes or {}).items()
                          for d in dumps(text)]
    if (late := waited_on(procs)) is None:
        return None
    procs, n, op = late
    return (f"waited on: pid {', '.join(p.pid for p in procs)}, in {waiting_frame(procs[0].main)} — not in the "
            f"collective {op} that {n} process(es) of its kind wait in")


NO_SPY = "== no py-spy"


async def sample(t: Transport, pgid: int | None, run_id: str) -> tuple[str, str]:
    """(the raw per-process text, what went wrong or "") of one host: the run's processes there are
    those of its process group (`pgid`, the head's) and those carrying its marker."""
    r = await t.run(_vars(pgid, run_id) + EVIDENCE, timeout=120)
    return r.stdout, "" if r.ok else f"the evidence command failed: {r.tail(2)}"


# A worker node's processes are found by the run's marker alone (no process group spans hosts).
UNMARKED = ("no process of the run there: only those carrying its marker ({marker}) are found on a worker node — a "
            "Ray job's workers and srun's tasks carry it; a process started there some other way (ssh, pdsh) must be "
            "given it")


async def hang_evidence(t: Transport, pgid: int | None, run_id: str, nodes=()) -> str:
    """The evidence text (a summary, then the raw per-process dumps), or what stopped it; `nodes`:
    (label, transport) of each worker node still answering, sampled after the head."""
    raw, failed = await sample(t, pgid, run_id)
    lines, notes = summary(raw), [failed] if failed else []
    if NO_SPY in raw:
        notes.append("no py-spy on the host, so no Python stacks: `pip install py-spy` there, and the next hang "
                     "shows where each process waits")
    count, more = len(lines), {}
    for label, nt in nodes:
        try:
            text, failed = await sample(nt, None, run_id)
        except HostUnreachable as e:
            notes.append(f"node {label} could not be sampled: {one_line(e)}")
            continue
        more[label] = text
        found = summary(text, label)
        count += len(found)
        lines += found or [f"node {label}: {UNMARKED.format(marker=MARKER)}"]
        notes += [f"node {label}: {failed}"] if failed else []
        notes += [f"no py-spy on node {label}: `pip install py-spy` there"] if NO_SPY in text else []
    where = f" on the head and {len(nodes)} worker node(s)" if nodes else ""
    head = [f"{count} process(es) of the run{where}, sampled for 1 s:"] + [f"  {x}" for x in lines]
    if late := waited(raw, more):
        head.append(f"  {late}")
    head += [f"  ({x})" for x in notes]
    body = "".join([raw] + [f"== node {label}\n{text}" for label, text in more.items()])
    return "\n".join(head) + "\n\n" + body.replace(NO_SPY + "\n", "")
