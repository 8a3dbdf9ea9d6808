"""Assemble error blocks per process: a Python traceback (with its chained and Ray-nested
parts) plus the message lines that follow its exception line, even when several processes
interleave their output.

A block is a list of segments; each segment is the frames of one traceback and the exception
line that ends it. Pure; fed one `Line` at a time by the analyzer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lines import Line

# Python tracebacks, and faulthandler's dumps (`Fatal Python error: …` then `Stack (most
# recent call first):` with frames `File "…", line N in f`, innermost first).
TB_START = re.compile(r"^\s*(?:(?:Original )?Traceback \(most recent call last\)|(?:Current thread \w+ )?"
                      r"(?:Stack|Thread \w+) \(most recent call first\)):")
# torch's c10d puts NCCL's own account of a failed call under its interpretation of the result code
# (NCCLUtils getNcclErrorDetailStr: `"\nLast error:\n" + ncclGetLastError(NULL)`, so a
# DistBackendError reads `… unhandled cuda error …`, `ncclUnhandledCudaError: Call to CUDA function
# failed.`, `Last error:`, `Cuda failure 1 'invalid argument'`); the forks for other collective
# libraries print the same (`Last error: Unknown NCCL Error` when there is none).
LAST_ERROR = re.compile(r"^Last error:\s*(?P<said>.*?)\s*$")
# loguru's tracebacks (`backtrace=True`, its default for logger.exception and @logger.catch) mark the
# frame where the exception was caught with `> ` at column 0: `> File "…", line N, in f`.
FRAME = re.compile(r'^\s*(?:> )?File "([^"]*)", line (\d+),? in (\S+)')
# torch.compile's errors (torch/_dynamo/exc.py: TorchRuntimeError, BackendCompilerFailed,
# InternalTorchDynamoError, formatted by format_error_msg_verbose) print the exception and its
# message — over several lines, unindented (the failing call and its fake tensors) — then
# `from user code:` and the frames of the user's code the compiled graph was running, outermost
# first: where it was raised (tests/corpus/realworld25/2522, 2523: Unsloth's compiled GRPO loss).
USER_CODE = "from user code:"
COMPILED_MESSAGE = 40  # lines its message may run on for before `from user code:`; past them, lines are read afresh
COMPILED = re.compile(r"^(?:torch\._dynamo\.exc\.)?(?:TorchRuntimeError|BackendCompilerFailed|InternalTorchDynamoError)\b")
CHAIN = re.compile(r"^\s*(?:The above exception was the direct cause of the following exception:"
                   r"|During handling of the above exception, another exception occurred:)")
# `Type: message`, `pkg.mod.Type(Inner): message` or a bare `Type` at column 0.
EXC_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<type>[A-Za-z_]\w*)(?:\((?P<inner>[\w.]+)\))?(?::(?: |$)|$)")
# An exception line seen outside a traceback (a log that starts mid-traceback, a logged error).
# A bare `Error: …` is a log message, not an exception; `Exception: …` is one, and so are the
# HTTP clients' timeouts (requests' and httpx's ReadTimeout, ConnectTimeout, PoolTimeout).
LOOSE_EXC = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*(?P<type>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Timeout)|Exception)"
                       r"(?:\((?P<inner>[\w.]+)\))?|Fatal Python error): ")
# An exception named by its module's path, whatever its class ends with (`pyarrow.lib.ArrowInvalid: …`,
# `zmq.error.Again: …`): a lower-case module path, then a class — a logger's name is a module path alone.
QUALIFIED_EXC = re.compile(r"^(?:[a-z_][a-z0-9_]*\.)+(?P<type>[A-Z][A-Za-z0-9]*)(?:\((?P<inner>[\w.]+)\))?: ")
# `ray::WorkerDict.actor_rollout_generate_sequences()`, `ray::main_task()`, and named actors
# `ray::agent_loop_worker_0:AgentLoopWorker.__init__()`: kept as `Class.method()`.
SIGNATURE_LINE = re.compile(r"(?P<type>)(?P<inner>)")  # any line a signature matched: its exception type is unknown
# CPython's own messages of its built-in exceptions, pasted without their type (a copy of the
# message alone, an issue's text): `list indices must be integers or slices, not str` (a TypeError,
# Objects/listobject.c), `f() got an unexpected keyword argument 'x'` and `f() missing 1 required
# positional argument: 'x'` (Python/ceval.c, getargs.c), `'X' object is not subscriptable` /
# `… has no attribute 'y'` (Objects/abstract.c, object.c): the exception line of the traceback they
# end, or an error on their own (tests/corpus/realworld25/2526, realworld27/2727).
BARE_BUILTIN = re.compile(
    r"^(?P<type>)(?P<inner>)(?:[\w.]+\(\) (?:got an unexpected keyword argument|got multiple values for argument|"
    r"missing \d+ required (?:positional|keyword-only) arguments?|takes \d+ positional arguments? but \d+ (?:was|were) given)|"
    r"(?:list|string|tuple) indices must be integers|'\w+' object (?:is not (?:subscriptable|iterable|callable)|"
    r"has no attribute '\w+'|does not support item assignment)|unsupported operand type\(s\) for|can only concatenate \w+ \(not)")
RAY_METHOD = re.compile(r"ray::(?:[\w.<>-]+:)?((?:[\w<>]+\.)?\w+\(\))")
# A paste's elision of frames (`...`, `…`, `[...]` on a line of its own): the traceback goes on after it.
ELIDED = re.compile(r"^\s*(?:\.{3,}|…|\[(?:\.{3}|…)\])\s*$")
CARETS = re.compile(r"^\s*[~^]+[~^ ]*$")  # Python 3.11's markers under a frame's source line
# what Python prints under the frame of an `assert` that failed: the statement, the carets under it
# (the analyzer's gate lets both through: UNDER_FRAME_WORDS)
UNDER_FRAME = re.compile(r"^\s+assert\s|^\s*(?=[~^ ]*\^\^\^)[~^]+[~^ ]*$")
UNDER_FRAME_WORDS = ("assert ", "^^^")
PANEL = ("│", "╰", "└")  # the rest of a rich traceback's panel (lines.py: unbox): its code context, its border
# IPython's tracebacks (a notebook's, `ipython -c`; IPython.core.ultratb): the head names the exception
# type first, each frame is `File path:N, in Class.func(args)` or `Cell In[k], line N`, its code shown
# with numbered context lines and the running one marked `---->` (`-->`, `->` as numbers widen).
IPY_HEAD = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*\s{2,}Traceback \(most recent call last\)$")
IPY_FRAME = re.compile(r"^(?:File (?P<path>.+?):(?P<no>\d+)|Cell In\[(?P<cell>\d+)\], line (?P<cno>\d+))"
                       r"(?:, in (?P<func>[\w.<>]+))?")
IPY_CODE = re.compile(r"^-*> +\d+ (?P<code>.*)$")
IPY_CONTEXT = re.compile(r"^\s+\d+ |^\s*\.\.\.$|^'Could not get source")
# The exception view of VS Code's Python debugger (debugpy), copied from its panel: a head naming the
# type (`Exception has occurred: ValueError`, in a Chinese locale `发生异常: ValueError`, maybe with
# `(note: full exception trace is shown but execution is paused at: …)`), the message on the lines
# after it, then the frames innermost first, each with its statement (tests/corpus/realworld9/1025
# ms-swift, realworld41/4148 NeMo-Aligner, realworld55/5516 MedicalGPT, realworld57/5717 Visual-RFT).
DEBUGPY_HEAD = re.compile(r"^(?:Exception has occurred|发生异常): (?P<type>[A-Za-z_][\w.]*)(?:\s+\(note: .*\))?\s*$")
DEBUGPY_WORDS = ("Exception has occurred: ", "发生异常: ")  # the head's literal start: most lines are cut at once
DEBUGPY_MESSAGE = 8  # lines of its message at most: a view with no frames after them is over
# A traceback's head printed at the end of another line: a progress bar redrawn with `\r` and no
# newline (tqdm writes `\r` + bar and ends the line only when it closes) leaves the cursor at the
# bar's end, so whatever another process or thread writes next lands on the bar's line.
GLUED_HEAD = re.compile(r"\S.*Traceback \(most recent call last\):$")
# py-spy's `dump` of a live process (what an engineer runs on a hung one, and what the harness
# collects before it stops one): per thread a head, `Thread 20870 (idle): "MainThread"`, then its
# frames innermost first, `    gather_object (torch/distributed/distributed_c10d.py:3312)`. One
# block per thread, its frames read as a traceback's; a look at a live process, not a failure.
PYSPY_HEAD = re.compile(r'^Thread (?:0x)?[0-9A-Fa-f]+ \((?:idle|active|gil|active\+gil)\)(?:: "(?P<name>[^"]*)")?$')
PYSPY_FRAME = re.compile(r"^\s+(?P<func>[^\s(][^(]*?) \((?P<path>[^()\s]+?)(?::(?P<no>\d+))?\)$")
PYSPY_LOCALS = "        "  # `--locals` prints a frame's arguments and locals indented under it
MAX_BLOCK_LINES = 400
# Lines of its own process a traceback may be interrupted by and still go on: another thread of
# the process writes between two of its lines (socketserver's `handle_error` prints a rule and
# `Exception occurred during processing of request from …` around each request's traceback; a
# logger thread writes its line), and the frames resume just after.
MAX_GAP = 3


@dataclass
class Segment:
    frames: list[str] = field(default_factory=list)  # frame lines (`File "…", line N, in f`), outermost first
    code: dict[int, str] = field(default_factory=dict)  # frame index -> the source line printed under it
    exc_no: int = 0
    exc_text: str = ""
    exc_type: str = ""
    inner_type: str = ""


@dataclass
class Block:
    proc: str
    start_no: int
    segments: list[Segment] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)  # `Class.method()` of ray::… seen, in order
    state: str = "frames"  # frames (inside a traceback) | after_exc (an exception line was seen)
    context: list[str] = field(default_factory=list)  # lines just before the block
    code_nos: set[int] = field(default_factory=set)  # numbers of the lines that are frames' source lines
    innermost_first: bool = False  # faulthandler prints the innermost frame first
    debugpy: str = ""  # the exception type a debugger's exception view (DEBUGPY_HEAD) names, its message still to come
    ipython: bool = False  # IPython's shape (IPY_*)
    thread: str | None = None  # a py-spy dump's thread (PYSPY_HEAD): its name, "" when unnamed
    headless: bool = False  # py-spy frames the log starts with, a thread's head cut off: a dump's once one follows
    at_end: bool = False  # still open when the log ended
    gap: int = 0  # lines of its process since its frames were interrupted (MAX_GAP)
    waited_by: tuple[int, str] | None = None  # a dump's process others wait for: how many, in which collective
    user_code: bool = False  # the frames after its exception are where it was raised (`USER_CODE`)

    @property
    def main_stack(self) -> list[str] | None:
        """A dump's main thread's frames (outermost first): the thread that says where its
        process is; None for any other block."""
        return self.segments[0].frames if self.thread in ("MainThread", "") and self.segments else None

    @property
    def current(self) -> Segment:
        if not self.segments or (self.segments[-1].exc_text and not self.user_code):
            self.segments.append(Segment())
        return self.segments[-1]


def _exc_line(blk: "Block", seg: Segment) -> Line:
    """The line of a block that holds its segment's exception (the last line if none does)."""
    return next((ln for ln in blk.lines if ln.no == seg.exc_no), blk.lines[-1])


def is_exception_line(text: str) -> re.Match | None:
    m = EXC_LINE.match(text)
    if m and (":" in text[: m.end()] or m.end() == len(text)) and not text.startswith((" ", "\t")):
        return m
    return BARE_BUILTIN.match(text)


# A diagnostic headed by its source file and line, never a Python statement: a device-side
# assertion (ATen's `../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: … Assertion
# `srcIndex < srcSelectDimSize` failed.`, printed under the frame that launched the kernel:
# tests/corpus/realworld52/5218), a Python warning (`path.py:8: RuntimeWarning: …`).
DIAGNOSTIC = re.compile(r"^\S+\.\w+:\d+: ")


class BlockAssembler:
    """Tracks one open block per process. `feed` returns the blocks that closed."""

    def __init__(self) -> None:
        self.open: dict[str, Block] = {}
        self.glued: Line | None = None  # the last line, when it ended with a traceback's head
        self.heard: set[str] = set()  # the processes that printed a line already

    def feed(self, line: Line, matched: bool) -> tuple[list[Block], bool]:
        """Feed a line; `matched` says a failure signature matched it. Returns the blocks
        closed by this line and whether the line was consumed by a block. A line that ends with
        a traceback's head (`GLUED_HEAD`) heads the frames that follow it at once, whichever
        process's prefix they carry (the bar's writer is not the traceback's)."""
        glued, self.glued = self.glued, None
        if (glued is not None and glued.no == line.no - 1 and line.proc not in self.open
                and FRAME.match(line.text)):
            blk = self.open[line.proc] = Block(line.proc, glued.no)
            self._add(blk, glued)
            self._add(blk, line)
            return [], True
        closed, consumed = self._feed(line, matched)
        self.heard.add(line.proc)
        if not consumed and line.text.endswith("(most recent call last):") and GLUED_HEAD.match(line.text):
            self.glued = line
        return closed, consumed

    def _feed(self, line: Line, matched: bool) -> tuple[list[Block], bool]:
        text = line.text
        blk = self.open.get(line.proc)
        if blk is None and line.no == 1 and PYSPY_FRAME.match(text):  # a paste that starts inside a dump
            blk = self.open[line.proc] = Block(line.proc, line.no, innermost_first=True, thread="", headless=True)
        if (head := PYSPY_HEAD.match(text)) or (blk is not None and blk.thread is not None):
            closed, consumed = self._pyspy(line, head, blk)
            if consumed:
                return closed, True
            more, consumed = self._feed(line, matched)  # the line after a dump, read afresh
            return closed + more, consumed
        if (text.endswith("(most recent call last)") and IPY_HEAD.match(text)
                and (blk is None or blk.state == "after_exc")):  # a chained one continues the block
            blk = blk or self.open.setdefault(line.proc, Block(line.proc, line.no))
            blk.ipython, blk.state = True, "frames"
            self._add(blk, line)
            return [], True
        if blk is not None and blk.ipython and blk.state == "frames" and (got := _ipython(line)) is not None:
            if got.text:
                self._add(blk, got, code=got.text.startswith("    "))
            return [], True
        if blk is None and text.startswith(DEBUGPY_WORDS) and (head := DEBUGPY_HEAD.match(text)):
            blk = self.open[line.proc] = Block(line.proc, line.no, innermost_first=True, debugpy=head["type"],
                                                state="message")
            self._add(blk, line)
            return [], True
        if blk is not None and blk.state == "message":
            return self._debugpy_message(blk, line)
        if blk is None:
            if TB_START.match(text) or FRAME.match(text) or (line.no == 1 and CARETS.match(text)) \
                    or (line.proc not in self.heard and UNDER_FRAME.match(text)):
                # (a paste that starts inside a traceback, under a frame's statement: its exception
                # follows — or a process's first lines in it do: an `assert` statement, the carets
                # under one, a bare AssertionError after them)
                blk = self.open[line.proc] = Block(line.proc, line.no)
                self._add(blk, line)
                return [], True
            m = (LOOSE_EXC.match(text) or BARE_BUILTIN.match(text) or (SIGNATURE_LINE.match(text) if matched else None)
                 or (LOOSE_EXC.match(text.lstrip(" ")) if text[:1] == " " and text[:5] != "     " else None)
                 or QUALIFIED_EXC.match(text))
            if m:  # an error line (a paste may indent it): its message, a traceback or a stack dump may follow
                blk = self.open[line.proc] = Block(line.proc, line.no)
                self._exception(blk, line, m)
                return [], True
            return [], False
        if len(blk.lines) >= MAX_BLOCK_LINES:
            return [self.open.pop(line.proc)], False
        if blk.state == "frames" and blk.gap:
            if not self._resumes(blk, text):
                blk.gap += 1
                return ([self.open.pop(line.proc)] if blk.gap > MAX_GAP else []), False
            blk.gap = 0
        if blk.state == "frames":
            if self._source_line(blk, text):  # a frame's statement, however the paste indented it
                self._add(blk, line, code=True)
                return [], True
            if (text[:1] in (" ", "\t") and blk.lines and not FRAME.match(blk.lines[-1].text)
                    and (m := LOOSE_EXC.match(text.lstrip()))):  # indented, after a source line: a log pasted
                self._exception(blk, line, m)                     # or re-indented (a frame's code is never `XError: …`)
                return [], True
            if text.startswith(PANEL):
                return [], True  # a panel's code context or border: read, not kept
            if (text.startswith((" ", "\t")) or not text or TB_START.match(text) or CARETS.match(text)
                    or FRAME.match(text) or ELIDED.match(text)):
                self._add(blk, line)
                return [], True
            m = is_exception_line(text)
            if m:
                self._exception(blk, line, m)
                return [], True
            if RAY_METHOD.search(text):  # the head of a Ray remote traceback
                self._add(blk, line)
                return [], True
            # Interrupted: this line is processed normally, and the traceback is cut short unless
            # its frames resume within MAX_GAP lines.
            blk.gap = 1
            return [], False
        # after_exc: the message continues, a chained or Ray-nested traceback follows, or the
        # block is over.
        if (blk.segments and COMPILED.match(blk.segments[-1].exc_text) and not blk.user_code
                and line.no - blk.segments[-1].exc_no <= COMPILED_MESSAGE):
            if text.strip() == USER_CODE:  # the compiled code's own frames follow
                blk.user_code, blk.state = True, "frames"
            if not is_exception_line(text):  # its message runs on till then
                self._add(blk, line)
                return [], True
        if CHAIN.match(text) or TB_START.match(text):
            blk.state = "frames"
            self._add(blk, line)
            return [], True
        if text.startswith((" ", "\t")) or not text or FRAME.match(text):
            if FRAME.match(text):
                blk.state = "frames"
            self._add(blk, line)
            return [], True
        if LAST_ERROR.match(text) or (LAST_ERROR.match(blk.lines[-1].text) and not is_exception_line(text)):
            self._add(blk, line)  # the collective library's own account of the error, and its line
            return [], True
        seg = blk.segments[-1]
        if seg.exc_no == blk.lines[-1].no and seg.exc_text.rstrip().endswith(":") and not is_exception_line(text):
            # `Type:` alone: a message that starts with a newline (`raise E(f"\n{why}")`, a paste
            # that wrapped it) goes on on the next line
            seg.exc_text = f"{seg.exc_text.rstrip()} {text.strip()}"
            self._add(blk, line)
            return [], True
        m = is_exception_line(text)
        if matched and not m and line.prefix and not _exc_line(blk, seg).prefix:
            # a bare exception line, then a record with a head of its own (a logger's): the message is over
            return [self.open.pop(line.proc)], False
        if m or matched or RAY_METHOD.search(text):
            if m and blk.state == "after_exc" and len(m.group("type")) > 2 and _looks_like_type(m.group("type")):
                self._exception(blk, line, m)
            else:
                self._add(blk, line)
            return [], True
        return [self.open.pop(line.proc)], False

    def _debugpy_message(self, blk: Block, line: Line) -> tuple[list[Block], bool]:
        """A line after a debugger's exception head: the message until the first frame, which makes
        the exception (`Type: message`, at the message's first line) whose frames follow, innermost
        first. An exception line of its own among them is the exception the message carries (its
        cause, `KeyError: <code object …>` under torch's `Unsupported`, tests/corpus/realworld43/4323):
        the innermost, it is the block's exception, read as any."""
        text, seg = line.text, (blk.segments[-1] if blk.segments else blk.current)
        frame, m = FRAME.match(text), is_exception_line(text)
        if not (frame or (m and _looks_like_type(m.group("type")))):  # the message goes on
            if len(blk.lines) > DEBUGPY_MESSAGE:
                return [self.open.pop(line.proc)], False  # no frames came: the log went on, the view is over
            if not seg.exc_no:  # the message's first line is the exception's
                self._debugpy_exception(blk, seg, line.no, f"{blk.debugpy}: {text.strip()}")
            self._add(blk, line)
            return [], True
        if frame:  # the frames that follow are where it was raised
            if not seg.exc_no:  # no message: the head names the exception alone
                self._debugpy_exception(blk, seg, blk.start_no, blk.debugpy)
            blk.user_code, blk.state = True, "frames"
            self._add(blk, line)
        else:
            seg.exc_no, seg.exc_text, seg.exc_type = 0, "", ""
            blk.innermost_first, blk.debugpy = False, ""
            self._exception(blk, line, m)
        return [], True

    @staticmethod
    def _debugpy_exception(blk: Block, seg: Segment, no: int, text: str) -> None:
        seg.exc_no, seg.exc_text, seg.exc_type = no, text, blk.debugpy.rsplit(".", 1)[-1]

    def _pyspy(self, line: Line, head: re.Match | None, blk: Block | None) -> tuple[list[Block], bool]:
        """A line of a py-spy dump: a thread's head opens its block (closing the one before), a
        frame joins it as a traceback's frame, outermost first; any other line ends it."""
        if head:
            closed = [self.open.pop(line.proc)] if blk is not None else []
            if blk is not None:
                blk.headless = False  # the dump's next thread: the frames before were its first
            blk = self.open[line.proc] = Block(line.proc, line.no, innermost_first=True, thread=head["name"] or "")
            blk.lines.append(line)
            return closed, True
        local = line.text.startswith(PYSPY_LOCALS)
        m = None if local else PYSPY_FRAME.match(line.text)
        if (m is None and not local) or len(blk.lines) >= MAX_BLOCK_LINES:
            self.open.pop(line.proc)  # the thread's stack is over; frames the log started with
            return ([] if blk.headless else [blk]), False  # and no thread's head after: no dump
        blk.lines.append(line)
        if m is not None:  # `--native` frames name a library and no line
            blk.current.frames.insert(0, f'File "{m["path"]}", line {m["no"] or 0}, in {m["func"]}')
        return [], True

    @staticmethod
    def _resumes(blk: Block, text: str) -> bool:
        """Whether `text`, after lines that interrupted a traceback, carries it on: a frame, the
        source line or carets under the last frame, the exception line. Not any indented line:
        the interrupting message may go on over several."""
        after_frame = bool(blk.lines) and FRAME.match(blk.lines[-1].text) is not None
        m = is_exception_line(text)
        return bool(FRAME.match(text) or TB_START.match(text) or (m and _looks_like_type(m.group("type")))
                    or (after_frame and text.startswith("    ")) or CARETS.match(text))

    @staticmethod
    def _source_line(blk: Block, text: str) -> bool:
        """Whether `text`, at column 0, is the source line Python printed under the frame just
        before it: a traceback pasted without its indentation (an issue's text, a logger that
        strips lines) keeps its shape — a frame, its statement, the carets, the exception. Not a
        line that reads as an exception, nor after a faulthandler frame (it prints no source), nor
        a `file:N: ` diagnostic (`DIAGNOSTIC`)."""
        if (not text or text[:1] in (" ", "\t") + PANEL or blk.innermost_first or not blk.lines
                or not FRAME.match(blk.lines[-1].text) or FRAME.match(text) or TB_START.match(text)
                or DIAGNOSTIC.match(text)):
            return False
        m = is_exception_line(text)
        return not (LOOSE_EXC.match(text) or (m and _looks_like_type(m.group("type"))))

    def _add(self, blk: Block, line: Line, code: bool = False) -> None:
        blk.lines.append(line)
        if TB_START.match(line.text):
            blk.innermost_first = "call first" in line.text
        f = FRAME.match(line.text)
        if f:
            seg = blk.current
            if blk.innermost_first:
                seg.frames.insert(0, line.text.strip())
                seg.code = {i + 1: c for i, c in seg.code.items()}
            else:
                seg.frames.append(line.text.strip())
        elif code or (blk.state == "frames" and (blk.debugpy or not blk.innermost_first) and len(blk.lines) > 1
                      and FRAME.match(blk.lines[-2].text) and line.text[:1] in (" ", "\t")):
            seg = blk.current  # the statement the frame was running (faulthandler prints none)
            if seg.frames:
                seg.code[0 if blk.innermost_first else len(seg.frames) - 1] = line.text.strip()
                blk.code_nos.add(line.no)
        for meth in RAY_METHOD.findall(line.text):
            blk.methods.append(meth)

    def _exception(self, blk: Block, line: Line, m: re.Match) -> None:
        self._add(blk, line)
        seg = blk.current
        seg.exc_no, seg.exc_text = line.no, line.text
        seg.exc_type, seg.inner_type = m.group("type") or "", m.group("inner") or ""
        blk.state = "after_exc"
        if _turned(seg.frames, seg.code):
            n = len(seg.frames)
            seg.frames.reverse()
            seg.code = {n - 1 - i: c for i, c in seg.code.items()}

    def close_all(self) -> list[Block]:
        out = list(self.open.values())
        self.open.clear()
        return out


def _turned(frames: list[str], code: dict[int, str]) -> bool:
    """Whether a traceback's frames were pasted innermost first, as some viewers show them: Python
    prints the script's `<module>` frame first, so a `<module>` frame printed last whose statement
    calls the function of the frame printed just before it (`main()` under `<module>`, after
    `File …, in main`) is that traceback turned over (an import that failed ends in a `<module>`
    frame too, but importlib's frames come between it and its importer)."""
    if len(frames) < 2 or not (last := FRAME.match(frames[-1])) or not (before := FRAME.match(frames[-2])):
        return False
    return (last[3] == "<module>" != before[3]
            and re.search(rf"\b{re.escape(before[3])}\s*\(", code.get(len(frames) - 1, "")) is not None)


def _ipython(line: Line) -> Line | None:
    """A line of an IPython traceback as Python prints it: a frame, the running statement under
    it, an empty text for a numbered context line (read, not kept); None for any other line."""
    text = line.text
    if m := IPY_FRAME.match(text):
        path = m["path"] or f"<cell In[{m['cell']}]>"
        func = (m["func"] or "<module>").rsplit(".", 1)[-1]  # `Trainer.train`, `f.<locals>.g`: the function
        text = f'  File "{path}", line {m["no"] or m["cno"]}, in {func}'
    elif m := IPY_CODE.match(text):
        text = "    " + m["code"].strip()
    elif IPY_CONTEXT.match(text):
        text = ""
    else:
        return None
    return Line(line.no, text, line.proc, line.actor, line.rank, line.repeat, line.prefix)


def _looks_like_type(name: str) -> bool:
    """An exception class name, not a log word like `INFO` or `Solution`."""
    return name[0].isupper() and not name.isupper() and name.endswith(
        ("Error", "Exception", "Exit", "Interrupt", "Failure", "Fault", "Timeout", "Warning"))
