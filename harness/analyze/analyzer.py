"""The incremental analyzer: feed bytes, get events; ask for a verdict at any moment.

Pure: no I/O and no clock. Time enters only as the `ts` of fed data (when the caller knows
it) and the `now` of `verdict()`.

    a = Analyzer(load_playbook("verl"))
    for chunk in chunks: events = a.feed(chunk, ts=arrival_time)
    a.finish(); v = a.verdict(now=time.time())
"""

from __future__ import annotations

import re
import weakref
from collections import deque
from dataclasses import dataclass, field, replace

from ..chain import STAGES
from ..playbook import Playbook
from .blocks import UNDER_FRAME_WORDS, Block, BlockAssembler
from .findings import Finding, finding_from_block, finding_from_line, metric_finding
from .framing import MIN_LINES, SAMPLE_LINES, learn, wrap_width
from .gate import Gate, build_gate
from .lines import Line, as_shown, canonical, clean, decode, make_line, peel, shown, unglued
from .metrics import DICT_ITEM, DICT_LINES, DICT_OPEN, GENERIC_WORDS, HISTORY, generic_metrics, parse_metrics, violates
from .stacks import (FLIGHT_HEAD, MAX_FLIGHT_FRAMES, MAX_FLIGHTS, collective, dumps, flight_frame, waited_on,
                     waited_rank, watchdog)
from .verdict import build_verdict

WARNING = re.compile(r"\bWARN(?:ING)?\b|Warning: ")  # a boolean test: `\w*Warning: ` would crawl
# A traceback's source line (`    raise RuntimeError(f"NCCL error: {error_str}")`) is code: the
# message it builds is not one the run printed. A paste that starts inside a traceback shows it
# without its frame (tests/corpus/realworld28/2801, realworld31/3130: vLLM's pynccl wrapper under
# NeMo-RL, the exception with the message printed on the next line).
RAISE_SOURCE = re.compile(r"^\s*raise\s+[A-Za-z_][\w.]*\s*(?:\(|$)")
# A frame line whose head a paste cut off (`…/vllm_rollout/dtensor_weight_loaders.py", line 284, in
# redistribute_dtensor`: a copy that began inside the line, or a terminal's wrapped path): the rest
# of Python's `  File "path", line N, in func` is unmistakable. Read as the frame it was.
CUT_FRAME = re.compile(r'^[^\s"]*\.py", line \d+,? in [\w<>.]+$')
# Lines that any analysis may need, besides the playbook's own patterns.
_EXTRA_GATES = [r"Traceback \(most recent call last\)", r"most recent call first", r'File "', r'\.py", line ', r"\(idle\)", r"\(active",
                r"Error", r"Exception", r"Exit", r"Interrupt", r"WARN", r"Warning", *GENERIC_WORDS,
                *map(re.escape, UNDER_FRAME_WORDS)]
LAST = len(STAGES)
_GATES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # playbook -> {live marker ids: Gate}
STALE_BLOCK_LINES = 64  # an open block with no continuation for this many lines is closed
CONTEXT_LINES = 8
CHUNK_SAMPLE = 1 << 20  # bytes of a log's start its framing is learned from, at most
TAIL_LINES = 20  # the run's last lines its verdict reads (what it said last, a bar still counting)
DIGEST_LINES = 50  # the last lines kept for the digest (its ~16k characters hold about as many): a short log whole
MAX_WARNINGS = 50
ONE_LINE_RULES = ("nonfinite",)  # the metric rules a line of no playbook's shape is held to
KNOWN_TEXT, KNOWN_MAX = 400, 4096  # texts whose facts are kept (short ones), how many (~2 MB)


@dataclass
class Event:
    kind: str  # stage | failure | metric | warning
    line_no: int
    text: str
    stage: int | None = None
    data: dict = field(default_factory=dict)


class Analyzer:
    def __init__(self, playbook: Playbook, fast: bool = True):
        """`fast=False` looks at every line instead of skipping those the gate rules out:
        slower, and by construction the same verdict (the tests check it)."""
        self.pb = playbook
        self.fast = fast
        self.blocks = BlockAssembler()
        self.line_no = 0
        self.pending = b""
        self.framing = None  # the head every line of this log carries (framing.py)
        self.wrap: int | None = None  # the width a terminal hard-wrapped this log at (framing.wrap_width)
        self._said: dict[str, bool] = {}  # text -> whether the playbook reads it (`_reads`), while learning
        self._sample: bytes | None = b""  # the first lines it is learned from (None: learned)
        self.reached: dict[int, tuple[int, str]] = {}  # stage no -> (line no, evidence)
        self.entered: dict[int, int] = {}  # stage no -> line of its latest `during` marker
        self.last_update: int | None = None  # line of the latest actor-update marker
        self.findings: dict[str, Finding] = {}
        self.metric_steps = 0  # metric lines parsed; each metric's first and latest value (memory stays flat)
        self.metric_first: dict[str, float] = {}
        self.metric_last: dict[str, float] = {}
        self._history: dict[str, deque] = {}  # the last HISTORY finite values of each metric
        self.warnings: dict[str, list] = {}  # canonical -> [first line no, text, count]
        # The last lines read (raw bytes for lines the gate skipped, decoded only when used).
        self.recent: deque[str | bytes] = deque(maxlen=DIGEST_LINES)
        self.last_ts: float | None = None
        self.last_healthy_update: int | None = None  # line of the last actor update with sane metrics
        self.healthy_updates = 0  # how many actor updates had sane metrics (the pass rule counts them)
        self._since_block: dict[str, int] = {}
        self._events: list[Event] = []
        self._known: dict[str, tuple] = {}  # text -> _facts(text), for texts up to KNOWN_TEXT chars
        self._dicts: dict[str, list[Line]] = {}  # proc -> the lines of a pprint'ed dict it is printing
        self.stack: Block | None = None  # the latest main thread's stack a dump in the log showed (py-spy's)
        self.watchdogs: dict[tuple[str, int], tuple[int, str]] = {}  # (group, rank) -> where its watchdog fired
        self.waited_ranks: dict[int, int] = {}  # rank -> times HCCL named it the peer a wait waits for
        # (line of the head, frames outermost first) of each collective's stack torch's flight recorder printed
        self.flights: list[tuple[int, list[str]]] = []
        self._flight: list[str] | None = None  # the frames of the one being printed
        self.gate = self._gate()

    def _live(self, no: int, marker) -> bool:
        """Can this marker still say something? An actor update's always; another stage's end
        markers until the stage is reached; a `during` marker until it is seen in this step
        (since the last update)."""
        if no == LAST:
            return True
        if marker.at == "during":
            return no not in self.entered or (self.last_update or 0) > self.entered[no]
        return no not in self.reached

    def _gate(self) -> Gate | None:
        """The gate for what can still matter: the live markers, signatures, metric lines.
        Rebuilt when that set changes (a stage first reached, a step begun or ended); one
        gate per set, kept with the playbook."""
        if not self.fast or (self.framing is not None and not self.framing.literal) or self.wrap:
            return None  # an envelope escapes the literals the gate looks for
        src = self.pb.source
        live = tuple(m.id for name, spec in src.stages.items() for m in spec.markers
                     if self._live(STAGES.index(name) + 1, m))
        gates = _GATES.setdefault(self.pb, {})
        if live not in gates:
            ids = set(live)
            markers = [m.regex for spec in src.stages.values() for m in spec.markers if m.id in ids]
            gates[live] = build_gate(markers + [x.regex for x in src.signatures + src.metric_lines] + _EXTRA_GATES)
        return gates[live]

    # ------------------------------------------------------------------ feeding

    def feed(self, data: bytes | str, ts: float | None = None) -> list[Event]:
        """Feed any chunk of the log (need not end on a line boundary)."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        if ts is not None:
            self.last_ts = ts
        if self._sample is not None:
            self._learn(data)
        buf = self.pending + data
        cut = buf.rfind(b"\n") + 1
        while self.wrap and cut and self._wrapped(buf[buf.rfind(b"\n", 0, cut - 1) + 1:cut - 1]):
            cut = buf.rfind(b"\n", 0, cut - 1) + 1  # pieces of a wrapped line whose rest is still to come
        self.pending = buf[cut:]
        if len(self.pending) > 1 << 20:  # a huge line with no newline yet: analyse its start, drop the rest
            self.pending = self.pending[: 1 << 16]
        if cut:
            self._region(buf[:cut])
        out, self._events = self._events, []
        return out

    def _learn(self, data: bytes) -> None:
        """Learn the log's framing from its first SAMPLE_LINES lines, before they are read: a file
        read in large chunks decides on all of them at once; a log followed live decides on what
        has come so far (a line still being written too) and again as more comes, until the
        sample is full."""
        self._sample += data
        lines = self._sample.split(b"\n", SAMPLE_LINES)
        whole = lines[:-1] if len(lines) > MIN_LINES else lines  # a line being written, only while it is needed
        self.framing = learn([clean(decode(x)) for x in whole[:SAMPLE_LINES]],
                             lambda t: len(peel(t, self.pb.prefixes)[2]), self._reads)
        self.wrap = wrap_width([decode(x).rstrip("\r") for x in whole[:SAMPLE_LINES]], self.framing)
        self.gate = self._gate()
        if len(lines) > SAMPLE_LINES or len(self._sample) > CHUNK_SAMPLE:
            self._sample, self._said = None, {}

    def _reads(self, text: str) -> bool:
        """Whether the playbook reads a line as it begins: a metric line, a stage marker (kept while
        the framing is learned: a followed log learns it again as each piece comes)."""
        if text not in self._said:
            m = self.pb.match
            found = m.scan(text)
            self._said[text] = m.first("metric_line", text, found) is not None or bool(m.matches("marker", text, found))
        return self._said[text]

    def finish(self) -> list[Event]:
        """The log ended: analyse a last partial line and close open tracebacks."""
        if self.pending:
            self._region(self.pending + b"\n")
            self.pending = b""
        self._flush_dicts()
        for blk in self.blocks.close_all():
            blk.at_end = True
            self._block_closed(blk)
        out, self._events = self._events, []
        return out

    def quiet(self) -> list[Event]:
        """The log has been quiet for a while (the caller's clock says so): close open error
        blocks, whose continuation would have come at once, and read the pieces of a wrapped line
        held for their rest. Feeding may go on afterwards."""
        if (cut := self.pending.rfind(b"\n") + 1) > 0:  # (only a wrapped line's pieces wait whole in it)
            held, self.pending = self.pending[:cut], self.pending[cut:]
            self._region(held)
        self._flush_dicts()
        for blk in self.blocks.close_all():
            self._block_closed(blk)
        out, self._events = self._events, []
        return out

    def _region(self, region: bytes) -> None:
        pos, end = 0, len(region)
        while pos < end:
            if (self.gate is not None and not self.blocks.open and not self._dicts and self._flight is None
                    and self.line_no):  # the first line read whatever it holds: a paste may start inside a
                # dump (blocks: `headless`)
                start = self.gate.next_line(region, pos)
                if start > pos:
                    skipped = region.count(b"\n", pos, start)
                    self.line_no += skipped
                    self._remember(region, start, min(skipped, DIGEST_LINES))
                    pos = start
                    if pos >= end:
                        break
            nl = region.find(b"\n", pos)
            self.line_no += 1
            raw, first = decode(region[pos:nl]), self.line_no
            piece = raw
            while self.wrap and self._wrapped(piece) and nl + 1 < end:  # a line a terminal broke: one line
                pos, nl = nl + 1, region.find(b"\n", nl + 1)
                piece = decode(region[pos:nl])
                got = self.framing.split(piece) if self.framing is not None else None  # a collector's head on each piece
                raw, self.line_no = raw + (got[1] if got else piece), self.line_no + 1
            for line in unglued(make_line(first, raw, self.pb.prefixes, self.framing), self.pb.prefixes):
                self._line(line)
            pos = nl + 1

    def _wrapped(self, raw: bytes | str) -> bool:
        """Whether a physical line is a piece of a longer one, broken at the wrap width."""
        return len((decode(raw) if isinstance(raw, bytes) else raw).rstrip("\r")) == self.wrap

    def _remember(self, region: bytes, start: int, n: int) -> None:
        """Keep the last lines before `start` (lines the gate skipped) for context and tail."""
        if n <= 0:
            return
        lines, i = [], start - 1
        for _ in range(n):
            j = region.rfind(b"\n", 0, i)
            lines.append(region[j + 1:i])
            i = j
            if j < 0:
                break
        self.recent.extend(reversed(lines))

    def _keep(self, text: str) -> None:
        self.recent.append(text)

    def _last(self, n: int) -> list[str]:
        """The last `n` lines read, as shown (only those decoded)."""
        return [x if isinstance(x, str) else shown(x) for x in list(self.recent)[-n:]]

    @property
    def context(self) -> list[str]:
        """The lines just before the current one."""
        return self._last(CONTEXT_LINES)

    @property
    def tail(self) -> list[str]:
        return self._last(TAIL_LINES)

    @property
    def last_lines(self) -> list[str]:
        """The last DIGEST_LINES lines (the digest's tail: its budget decides how many it shows)."""
        return self._last(DIGEST_LINES)

    # ------------------------------------------------------------------ one line

    def _line(self, line: Line, gathered: bool = False) -> None:
        if self._dicts and self._in_dict(line):
            return
        if '", line ' in line.text and CUT_FRAME.match(line.text):
            line = replace(line, text='  File "' + line.text)
        text = line.text
        if self._flight is not None:  # the flight recorder's frames, innermost first, then the log goes on
            if (frame := flight_frame(text)) is not None:
                if len(self._flight) < MAX_FLIGHT_FRAMES:
                    self._flight.insert(0, frame)
                self._keep(as_shown(line))
                return
            self._flight = None
        if text.startswith(FLIGHT_HEAD) and len(self.flights) < MAX_FLIGHTS:
            self._flight = []
            self.flights.append((line.no, self._flight))
        if not gathered and DICT_OPEN.match(text):
            self._dicts[line.proc] = [line]
            return
        noise, sigs, markers, metric, warning = self._facts(text)
        if sigs and RAISE_SOURCE.match(text):
            sigs = ()
        if noise and not text.endswith("(most recent call last):"):  # a bar a traceback's head landed on
            self._keep(as_shown(line))  # context and tail hold noise too; the digest drops it
            return
        if sigs and (dog := watchdog(text)):  # a rank's watchdog, whether a block takes its line or not
            self.watchdogs[dog[0]] = dog[1]
        elif sigs and (peer := waited_rank(text)) is not None:
            self.waited_ranks[peer] = self.waited_ranks.get(peer, 0) + line.repeat
        closed, consumed = self.blocks.feed(line, bool(sigs))
        for blk in closed:
            self._block_closed(blk)
        self._age_blocks(line.proc)
        if not consumed:
            update = self._stages(line, markers)
            # a line of no playbook's shape is read when it may hold a non-finite value (metrics.GENERIC)
            generic = not metric and ("nan" in text or "NaN" in text or "inf" in text)
            if (not (metric or generic) or self._metrics(line, generic)) and update:
                self.last_healthy_update = line.no
                self.healthy_updates += 1
            if sigs:
                self._add_finding(finding_from_line(line, sigs, self.pb, self.context))
            elif warning:
                self._warning(line)
        elif (blk := self.blocks.open.get(line.proc)) is not None and line.no - 1 <= blk.start_no <= line.no \
                and not blk.context:  # a block opened by this line, or by the head glued to the line before
            blk.context = self.context[:len(self.context) - (line.no - blk.start_no)]
        self._keep(as_shown(line))

    def _in_dict(self, line: Line) -> bool:
        """Gather a pprint'ed dict's lines (DICT_OPEN): True if `line` was one of them. When it
        closes, or a line of its process is no item of it, it is read as the one line it stands for."""
        lines = self._dicts.get(line.proc)
        if lines is None:
            return False
        item = DICT_ITEM.match(line.text) is not None
        if item:
            lines.append(line)
        if not item or line.text.endswith("}") or len(lines) >= DICT_LINES:
            self._read_dict(line.proc)
        return item

    def _read_dict(self, proc: str) -> None:
        lines = self._dicts.pop(proc)
        self._line(replace(lines[0], text=" ".join(ln.text.strip() for ln in lines)), gathered=True)

    def _flush_dicts(self) -> None:
        """The log ended or went quiet inside a pprint'ed dict: read what was gathered."""
        for proc in list(self._dicts):
            self._read_dict(proc)

    def _facts(self, text: str) -> tuple:
        """What the playbook's patterns say of a line's text — noise?, signatures, markers, a
        metric line?, a warning? — a pure function of the text, kept for short texts: the same
        warning or request line comes back thousands of times a night."""
        facts = self._known.get(text)
        if facts is None:
            m = self.pb.match
            found = m.scan(text)
            facts = (m.first("noise", text, found) is not None, tuple(m.matches("signature", text, found)),
                     tuple(m.matches("marker", text, found)), m.first("metric_line", text, found) is not None,
                     WARNING.search(text) is not None)
            if len(text) <= KNOWN_TEXT:
                if len(self._known) >= KNOWN_MAX:
                    self._known.clear()
                self._known[text] = facts
        return facts

    def _age_blocks(self, proc: str) -> None:
        """Close blocks whose process went quiet: their continuation will not come."""
        for p in list(self.blocks.open):
            if p == proc:
                self._since_block[p] = 0
                continue
            self._since_block[p] = self._since_block.get(p, 0) + 1
            if self._since_block[p] > STALE_BLOCK_LINES:
                del self._since_block[p]
                self._block_closed(self.blocks.open.pop(p))

    def _stages(self, line: Line, markers: tuple) -> bool:
        """Record stages first reached on this line (`markers`: those its text matches); True
        if it marks an actor update (checked on every line: each update may be healthy or not)."""
        update = False
        for no, marker in markers:
            if marker.at == "during":
                if self._live(no, marker):  # the first time in this step
                    self.entered[no] = line.no
                    self.gate = self._gate()
                continue
            if no == LAST:
                self.last_update = line.no
                if self.entered:  # a new step: its during markers count again
                    self.gate = self._gate()
            if no == LAST or no not in self.reached:
                update |= no == LAST
                if no not in self.reached:
                    self.reached[no] = (line.no, line.text)
                    self.gate = self._gate()
                    self._events.append(Event("stage", line.no, line.text, no, {"marker": marker.id}))
        return update

    def _metrics(self, line: Line, generic: bool = False) -> bool:
        """Parse a metric line; False when a metric rule says the values are unhealthy. A line of
        no playbook's shape (`generic`, see metrics.GENERIC) is read when it holds a non-finite
        value, held to the non-finite rules only and feeds no history: an evaluation's loss, a
        sample's zero reward printed that way are not the training's, whose drift, zeros and
        spread the other rules judge."""
        values = (generic_metrics if generic else parse_metrics)(line.text, self.pb.metric_keys)
        if not values or (generic and set(values) == {"step"}):
            return True
        self.metric_steps += 1
        for name, value in values.items():
            if name != "step":
                self.metric_first.setdefault(name, value)
                self.metric_last[name] = value
        self._events.append(Event("metric", line.no, line.text, None, values))
        healthy = True
        for rule in self.pb.source.metric_rules:
            if generic and rule.when not in ONE_LINE_RULES:
                continue
            if rule.metric in values and violates(rule, values, self._history.get(rule.metric, ())):
                self._add_finding(metric_finding(line, rule, values[rule.metric], self.context,
                                                  self.pb.origins.get(rule.id, "")))
                healthy = False
        if not generic:
            for name, value in values.items():  # after the rules: a value is judged against the earlier ones
                self._history.setdefault(name, deque(maxlen=HISTORY)).append(value)
        return healthy

    def _warning(self, line: Line) -> None:
        key = canonical(line.text)
        if key in self.warnings:
            self.warnings[key][2] += line.repeat
        elif len(self.warnings) < MAX_WARNINGS:
            self.warnings[key] = [line.no, line.text, line.repeat]
            self._events.append(Event("warning", line.no, line.text))

    # ------------------------------------------------------------------ findings

    def _block_closed(self, blk: Block) -> None:
        self._since_block.pop(blk.proc, None)
        if blk.thread is not None:  # a live process's stack, not a failure: where it was when dumped
            if blk.main_stack:
                self.stack = blk
            return
        f = finding_from_block(blk, self.pb)
        if f is not None:
            self._add_finding(f)

    def _add_finding(self, f: Finding) -> None:
        old = self.findings.get(f.key)
        if old is not None:
            if not (f.wrapped and old.procs):  # a driver's re-print of a worker's error is no new rank
                old.count += f.count
                old.procs |= f.procs
            if old.stage is None and f.stage is not None and len(f.lines) > len(old.lines):
                # the same error said first alone (a logger's line, another rank's), then with its
                # traceback: where that places it is where the first was raised too
                old.stage, old.by_context, old.guessed = f.stage, f.by_context, f.guessed
                old.lines, old.first_no = f.lines, f.first_no  # the block's lines and the line they begin on
            return
        self.findings[f.key] = f
        self._events.append(Event("failure", f.line_no, f.text, f.stage, {"category": f.category, "role": f.role}))

    def saw(self, dump: str) -> None:
        """Stacks of the run's processes taken outside its log (py-spy's, in a hang's evidence):
        where the run waits, as if the log had shown that dump after its last line — the main
        thread of a process its peers wait for in a collective (`stacks.waited_on`), else the main
        thread that waits in a collective, else the first main thread."""
        late = waited_on(dumps(dump))
        asm, found = BlockAssembler(), []
        for no, text in enumerate(late[0][0].lines if late else dump.splitlines(), 1):
            found += asm.feed(make_line(no, text, []), False)[0]
        mains = [b for b in found + asm.close_all() if b.main_stack]
        best = next((b for b in mains if collective(b.main_stack)), mains[0] if mains else None)
        if best is not None:
            self.stack = replace(best, start_no=self.line_no + 1, waited_by=late[1:] if late else None)

    # ------------------------------------------------------------------ verdict

    def verdict(self, now: float | None = None) -> dict:
        """The verdict so far (see README: `harness analyze --json` fields)."""
        return build_verdict(self, now)



