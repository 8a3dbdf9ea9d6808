"""Where a live process waits, from its stack (py-spy's dump: the harness collects one from a hung
run, and engineers paste them into issues): the collective it is in, when one is on the stack, and
the frame that waits — the innermost one outside the code that does the waiting (torch.distributed's
collectives, the standard library's locks, queues and sockets): the call everyone waits on. Of several
processes' dumps, the one its peers wait for in a collective; of several ranks' collective watchdogs
in a log, what they say together; of a log's end, the last line each process printed."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from .blocks import FRAME, PYSPY_FRAME, PYSPY_HEAD
from .lines import make_line

# The collectives proper (torch.distributed's ops and point-to-point calls, HCCL/NCCL's the same
# names): a run whose processes wait in one hangs in a collective. Other waits on other processes'
# work (a device synchronize, asyncio's wait_for, ray.get) may hang for any reason: not these.
COLLECTIVE_OPS = re.compile(r"all_?reduce|gather|scatter|broadcast|barrier|all_?to_?all|\bi?recv\b|\bi?send\b", re.I)
# Modules that only wait for another thread, process or peer: the standard library's, and
# torch.distributed's collective entry points (c10d's and its logging wrapper).
RELAY = re.compile(r"(?:^|/)(?:threading|queue|selectors|socket|subprocess)\.py$|/asyncio/|/concurrent/")
# Ray's internals under `ray.get` (`get`, `Worker.get_objects` in ray/_private/worker.py, its client
# and auto-init hooks; the compiled `_raylet.pyx`) and a future's `result` wait for a remote task: the
# caller is the frame that waits.
REMOTE_WAIT = re.compile(r"(?:^|/)ray/_private/|_raylet\.pyx$|/concurrent/futures/")
# torch's operator dispatch (torch/_ops.py: `OpOverloadPacket.__call__`, `OpOverload.__call__`) only
# hands a call to the C++ op: the frame that called the op says which (`all_reduce`, a custom op's).
WAITING = re.compile(RELAY.pattern + r"|torch/distributed/(?:distributed_c10d|c10d_logger)\.py$|"
                     + REMOTE_WAIT.pattern + r"|(?:^|/)torch/_ops\.py$")


def collective(frames: list[str]) -> str | None:
    """The innermost collective on a stack of traceback-shaped frames (outermost first)."""
    return next((m[3] for fr in reversed(frames) if (m := FRAME.match(fr)) and COLLECTIVE_OPS.search(m[3])), None)


def _own(frames: list[str]) -> list[re.Match]:
    """The frames of a stack outside the waiting code (`WAITING`), outermost first."""
    return [m for fr in frames if (m := FRAME.match(fr)) and not WAITING.search(m[1])]


def waiting_frame(frames: list[str]) -> str:
    """The frame a stack waits in, as py-spy prints it (`func (path:line)`): the innermost one
    outside the waiting code (`WAITING`), else the innermost."""
    own = _own(frames) or [m for fr in frames if (m := FRAME.match(fr))]
    return f"{own[-1][3]} ({own[-1][1]}:{own[-1][2]})" if own else ""


# py-spy's dump of a process starts with its command line: `Process 4242: python train.py --x`.
PYSPY_PROCESS = re.compile(r"^Process (?P<pid>\d+): (?P<cmd>.*)$")


@dataclass
class Dumped:
    """One process of a text of py-spy dumps: its pid, command line, the lines of its dump, and
    its main thread's frames (py-spy prints the main thread first), outermost first."""
    pid: str
    cmd: str
    lines: list[str] = field(default_factory=list)
    main: list[str] = field(default_factory=list)


def dumps(text: str) -> list[Dumped]:
    """The processes whose py-spy dumps `text` holds (each from its `Process N:` line to the next,
    or to a line of the harness's own evidence, `== …`)."""
    out, cur, threads = [], None, 0
    for line in text.splitlines():
        if m := PYSPY_PROCESS.match(line):
            cur, threads = Dumped(m["pid"], m["cmd"].strip()), 0
            out.append(cur)
        elif line.startswith("== "):
            cur = None
        if cur is None:
            continue
        cur.lines.append(line)
        if PYSPY_HEAD.match(line):
            threads += 1
        elif threads == 1 and (f := PYSPY_FRAME.match(line)):
            cur.main.insert(0, f'File "{f["path"]}", line {f["no"] or 0}, in {f["func"]}')
    return out


def kind(cmd: str) -> str:
    """What a process is, to find its peers by: a Ray worker's title names its actor's class
    (`ray::WorkerDict.update_actor` while a task runs, `ray::WorkerDict` between tasks); any other
    process, its command line (torchrun and mpirun start every rank with the same one)."""
    return cmd.split()[0].split(".", 1)[0] if cmd.startswith("ray::") else cmd


def waited_on(procs: list[Dumped]) -> tuple[list[Dumped], int, str] | None:
    """The processes the others wait on, how many wait, and in which collective: of a kind some
    of whose processes wait in a collective, those that are not in one but in code of their own
    (a rank still scoring, loading or stuck in a request while its peers sit in the all-reduce that
    needs it — torch's flight recorder names the rank that never joined the same way); not one idle
    in a relay's or Ray's wait for work. None when no such process is seen."""
    kinds: dict[str, list[Dumped]] = {}
    for p in procs:
        kinds.setdefault(kind(p.cmd), []).append(p)
    for peers in kinds.values():
        ops = {id(p): collective(p.main) for p in peers if p.main}  # pids of two hosts may be the same
        waiting = [op for op in ops.values() if op]
        late = [p for p in peers if id(p) in ops and not ops[id(p)] and _own(p.main)]
        if waiting and late:
            return late, len(waiting), Counter(waiting).most_common(1)[0][0]
    return None


# A collective's watchdog names the rank, the collective's number in its process group and its kind:
# torch ProcessGroupNCCL `[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=696,
# OpType=BROADCAST, …)` (torch >= 2.3 puts the group first: `[PG ID 0 PG GUID 0(default_pg) Rank 3] …`),
# torch_npu's ProcessGroupHCCL the same with WorkHCCL. Numbers count within a group.
WATCHDOG = re.compile(r"(?:\[PG ID (?P<pg>\d+)[^\]]*\].*?)?\[Rank (?P<rank>\d+)\] Watchdog caught collective operation "
                      r"timeout: Work[A-Z]+\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)")


# Under a collective's watchdog timeout torch prints, when its flight recorder holds the collective,
# the Python stack it was called from: ProcessGroupNCCL WorkNCCL::printTraceback logs "Stack trace of
# the failed collective: " and then the recorder's traceback, one `#N func from path:line` line per
# frame, innermost first (torch/csrc/profiler/combined_traceback; tests/corpus/realworld21/2102, a
# Megatron checkpoint save's all_reduce); "… not found, potentially because FlightRecorder is
# disabled" when it holds none. The call path of the collective every rank waits in.
FLIGHT_HEAD = "Stack trace of the failed collective:"
FLIGHT_FRAME = re.compile(r"^#\d+ (?P<func>\S+) from (?P<path>\S+?):(?P<no>\d+)\s*$")
MAX_FLIGHTS, MAX_FLIGHT_FRAMES = 16, 64


def flight_frame(text: str) -> str | None:
    """A flight recorder's frame line as a traceback's frame line, else None."""
    m = FLIGHT_FRAME.match(text)
    return f'File "{m["path"]}", line {m["no"]}, in {m["func"]}' if m else None


def flights_after(flights: list[tuple[int, list[str]]], after: int) -> list[list[str]]:
    """The frames (outermost first) of the collectives' stacks printed after line `after`, in order."""
    return [frames for no, frames in flights if no > after and frames]


def flight_said(flights: list[tuple[int, list[str]]], after: int, most: int = 12) -> list[str]:
    """The call path of the first collective's stack printed after line `after` (frames outermost
    first, as py-spy prints them: `func (path:line)`), its innermost `most`."""
    frames = next(iter(flights_after(flights, after)), [])
    return [f"{m[3]} ({m[1]}:{m[2]})" for fr in frames[-most:] if (m := FRAME.match(fr))]


def watchdog(text: str) -> tuple[tuple[str, int], tuple[int, str]] | None:
    """((group, rank), (SeqNum, OpType)) of a collective watchdog's line, group "" when unnamed."""
    m = WATCHDOG.search(text)
    return ((m["pg"] or "", int(m["rank"])), (int(m["seq"]), m["op"])) if m else None


# HCCL's notify wait names the peer it waits for (CANN EI0002, vocab §9: `The Notify register has not
# received the Notify record from remote rank: [5].`; `[unknown]` when it cannot tell).
REMOTE_RANK = re.compile(r"not received the Notify record from remote rank: \[(\d+)\]")


def waited_rank(text: str) -> int | None:
    """The remote rank an HCCL notify wait names, if it names one."""
    return int(m[1]) if (m := REMOTE_RANK.search(text)) else None


def collectives_said(seen: dict[tuple[str, int], tuple[int, str]], named: dict[int, int]) -> list[str]:
    """What the ranks' watchdogs say together, group by group (`seen`: (group, rank) -> (SeqNum,
    OpType) it timed out in): ranks of a group in different collectives diverged — one took another
    path or is behind, and when the rest agree the odd one out is where to look (torch's flight
    recorder reads its traces the same way); ranks all in the same one wait for a rank not among them,
    or for the collective itself. Nothing for a group of fewer than two ranks. Then the ranks HCCL's
    waits name as the peer they wait for (`named`: rank -> how many times)."""
    said: list[str] = []
    for pg in sorted({g for g, _ in seen}):
        ranks = {r: at for (g, r), at in sorted(seen.items()) if g == pg}
        if len(ranks) < 2:
            continue
        groups: dict[tuple[int, str], list[int]] = {}
        for rank, at in ranks.items():
            groups.setdefault(at, []).append(rank)
        head = f"group {pg}: " if pg else ""
        said += [f"{head}{op} #{seq}: rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}"
                 for (seq, op), r in groups.items()]
        if len(groups) == 1:
            said.append(f"all {len(ranks)} wait in the same collective: a rank not among them never joined it (what "
                        "it did last says why), or, if these are all the ranks, the collective itself stalled")
            continue
        reading = "they wait in different collectives: their collectives diverged (one took another path or is behind)"
        sizes = sorted(len(r) for r in groups.values())
        if len(groups) == 2 and sizes[0] < sizes[1]:  # the rest agree among themselves: the odd one out
            (seq, op), odd = min(groups.items(), key=lambda g: len(g[1]))
            reading += f"; the odd one out: rank{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd))} ({op} #{seq})"
        said.append(reading)
    if named:
        said.append("HCCL's notify waits name the remote rank they wait for: "
                    + ", ".join(f"rank {r} ({n}x)" for r, n in sorted(named.items(), key=lambda x: -x[1])))
    return said


def last_said(lines: list[str], prefixes: list[re.Pattern], framing=None, most: int = 32) -> list[str]:
    """The last line each process printed among `lines` (a log's end), by the process its prefixes
    name (Ray's actor and pid, torch's rank), the one silent longest first: where a hung run's
    processes stopped talking, `[rank1]: scoring batch 4 — 212 line(s) before the end`. Lines of
    no prefix are one process; blank lines say nothing."""
    last: dict[str, tuple[int, str, str]] = {}
    for i, raw in enumerate(lines):
        ln = make_line(i, raw, prefixes, framing)
        if ln.text.strip():
            last[ln.proc] = (i, ln.prefix.strip() or "(no prefix)", ln.text)
    return [f"{prefix} {text[:200]} — {len(lines) - 1 - i} line(s) before the end"
            for i, prefix, text in sorted(last.values())[:most]]
