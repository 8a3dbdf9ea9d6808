"""Findings: one per distinct error (the same traceback from 16 ranks is one finding with a
count). Built from an error block, a single matching line, or an unhealthy metric line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..chain import STAGE_NO
from ..playbook import MetricRule, Playbook, Signature, name_words
from ..redact import redact
from .blocks import FRAME, LAST_ERROR, RAY_METHOD, Block
from .callpath import LOOP, STRONG, TARGET, confined_stage, named_stage, naming_frame, path_level, path_stage, sets_up, with_calls
from .lines import Line, canonical, make_line

ROLE_ORDER = {"cause": 0, "downstream": 1, "wrapper": 2}


@dataclass
class Finding:
    key: str
    line_no: int
    text: str
    category: str
    cls: str = "code"
    hint: str = ""
    stage: int | None = None
    by_context: bool = False  # `stage` comes from the failing process's name or its callers' frames alone
    guessed: bool = False  # `stage` comes from a training loop on the path alone: the lifecycle bounds it
    role: str = "cause"
    outcome: str = "crash"
    signature: str | None = None
    exception: str = ""
    detail: str = ""  # for a metric rule: which value broke it, e.g. `grad_norm=nan (nonfinite)`
    fix: dict | None = None
    origin: str = ""  # the playbook of its signature or metric rule, and where that lies
    count: int = 1
    wrapped: bool = False  # seen inside a wrapper (RayTaskError …): a copy of an error printed elsewhere
    procs: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)  # the error block as printed (for the digest)
    first_no: int = 0  # the line number of `lines[0]` when it is not `line_no` (a block's head)
    context: list[str] = field(default_factory=list)  # lines just before it

    def to_dict(self) -> dict:
        """The public shape (texts redacted: a verdict is output)."""
        return {"line_no": self.line_no, "text": redact(self.text), "category": self.category, "class": self.cls,
                "hint": self.hint, "count": self.count, "signature": self.signature, "exception": self.exception,
                "role": self.role, "fix": self.fix, "detail": self.detail, "origin": self.origin}


def _best(sigs: list[Signature]) -> Signature | None:
    """The most telling signature: a cause before a downstream before a wrapper, then priority."""
    return min(sigs, key=lambda s: (ROLE_ORDER[s.role], -s.priority), default=None)


def _matches(pb: Playbook, text: str) -> list[Signature]:
    return pb.match.matches("signature", text)


def _make(pb: Playbook, line_no: int, text: str, sigs: list[Signature], sig: Signature | None, exc: str,
          procs: set[str], count: int) -> Finding:
    """A finding of the line `text` that the signatures `sigs` match, `sig` the most telling: its
    outcome is a hang when any of them says the line reports a wait that timed out (torch's
    `DistBackendError: … Watchdog caught collective operation timeout` is an error type wrapping a hang)."""
    category = (sig and sig.category) or fallback_category(pb, exc, text)
    if sig is not None and sig.role == "wrapper" and exc:  # a wrapper says little; what it wraps says more
        inner = fallback_category(pb, exc, "")
        category = inner if inner != "other" else category
    return Finding(
        key=f"{category}|{canonical(text)}", line_no=line_no, text=text, category=category,
        cls=sig.cls if sig else "code", hint=sig.hint if sig else "", role=sig.role if sig else "cause",
        outcome="hang" if any(s.outcome == "hang" for s in sigs) else sig.outcome if sig else "crash",
        signature=sig.id if sig else None, exception=exc,
        stage=STAGE_NO[sig.stage] if sig and sig.stage else None,
        fix=sig.fix.model_dump(exclude_defaults=True) if sig and sig.fix else None, procs=procs, count=count,
        origin=pb.origins.get(sig.id, "") if sig else "")


def finding_from_line(line: Line, sigs: list[Signature], pb: Playbook, context: list[str]) -> Finding:
    sig = _best(sigs)
    f = _make(pb, line.no, line.text, sigs, sig, "", {line.proc}, line.repeat)
    if f.stage is None:
        _place(f, pb, [failed_call(line.text) + used_attribute(line.text)], [line.actor] if line.actor else [], "",
               line.text)
    elif f.stage == START:
        _work_over_setup(f, pb, [failed_call(line.text)])
    _value_of_wrong_type(f, sig)
    f.lines, f.context = [line.text], context
    return f


START = STAGE_NO["engine_start"]


def _work_over_setup(f: Finding, pb: Playbook, paths: list[list[str]]) -> None:
    """A signature that puts its error at start-up (a communicator's creation) names set-up as a
    set-up frame does: a call on the failing path named for a stage's work says that set-up ran
    inside it — c10d and torch_npu create a group's NCCL/HCCL communicator at its first
    collective, inside whichever phase runs that collective (`Engine method 'compute_logp'
    failed: … hcclCommInitRootInfoConfig …`) —, unless that path passes through set-up itself
    (`init_model` → `load_weights`: weights loaded to build the model)."""
    stage, level = path_level(pb, paths)
    if stage is not None and level == STRONG and stage != START and not sets_up(pb, paths):
        f.stage = stage


def _place(f: Finding, pb: Playbook, paths: list[list[str]], actors: list[str], exc: str, text: str) -> None:
    """The stage of a finding no signature placed: from its call path, else from the process it
    came from (`by_context`, as when only the callers' frames — a driver's side of a RayTaskError —
    name one), else from where errors of its family arise. A process that does only
    one stage's work (`confined_stage`) overrides another work stage its frames' words suggest;
    a process named for its work (an engine's worker: generation) failing in an initialiser on its
    own path, with no stage's work named there, fails in its start-up."""
    f.stage, level = path_level(pb, paths + [actors])
    if level == STRONG and path_level(pb, paths)[1] != STRONG and _initialising(paths[:2]):
        f.stage = STAGE_NO["engine_start"]  # a process's own initialisation, whatever work it does after
    f.by_context = f.stage is not None and f.stage != path_stage(pb, paths[:2])
    f.guessed = level == LOOP
    own = confined_stage(pb, actors)
    if own is not None and f.stage not in (None, own, STAGE_NO["engine_start"]):
        f.stage = own
    if f.stage is None or f.by_context:  # where errors of its family arise says more than a process's name
        f.stage = family(pb, exc, text)[1] or f.stage


INIT_WORDS = ("init", "initialize", "initialise")


def _initialising(paths: list[list[str]]) -> bool:
    """Whether the failing call's own path passes through an initialiser: a constructor
    (`__init__`) or a function that initialises something (`init_communicator`, `initialize_model`)."""
    firsts = [name_words(m[3])[:1] for names in paths for e in names if (m := FRAME.match(e)) is not None]
    return any(w and w[0] in INIT_WORDS for w in firsts)


def finding_from_block(blk: Block, pb: Playbook) -> Finding | None:
    """The root of a block: its first exception that is not a wrapper or a consequence, and
    within that exception's message the most specific line."""
    per_line = [(ln, [sg for sg in _matches(pb, ln.text) if not sg.alone]) for ln in blk.lines]
    segs = [s for s in blk.segments if s.exc_text]
    zones = []  # (segment, lines of its exception message)
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].exc_no if i + 1 < len(segs) else None
        # the exception's own line, however a paste indented it, then the message lines it runs on to
        zone = [(ln, sg) for ln, sg in per_line if ln.no >= seg.exc_no and (nxt is None or ln.no < nxt)
                and (ln.no == seg.exc_no or not FRAME.match(ln.text) and not ln.text.startswith("    ")
                     and ln.no not in blk.code_nos)]
        zones.append((seg, zone))
    if not zones:
        sig_lines = [(ln, sg) for ln, sg in per_line if sg]
        if not sig_lines:
            return _cut_short(blk, pb)
        zones = [(None, sig_lines)]

    def zone_rank(item):
        """A zone is as telling as its exception line: a wrapper's zone ranks last — also when
        the wrapper names what it wraps (`RayTaskError(ProxyError): ray::WorkerDict.run()`,
        which a cause's pattern for ProxyError matches too) and the wrapped exception follows."""
        seg, zone = item
        best = _best(zone[0][1])
        if seg is not None and seg is not segs[-1] and any(s.role == "wrapper" for s in zone[0][1]):
            return ROLE_ORDER["wrapper"]
        return ROLE_ORDER[best.role] if best else 0

    ranks = [zone_rank(z) for z in zones]
    # the earliest of the most telling zones; when all wrap (a RayTaskError(ActorDiedError) whose
    # actor died without a word of its own), the innermost says most: why the actor is gone
    all_wrap = min(ranks) == ROLE_ORDER["wrapper"]
    seg, zone = zones[-1] if all_wrap else zones[ranks.index(min(ranks))]
    if seg is not None and not seg.exc_type:  # a message logged alone, then raised with its frames (c10d's
        # socket.cpp line, then the DistNetworkError of the same words): the exception, with its call path
        seg, zone = next(((s, z) for (s, z), r in zip(zones, ranks) if r == min(ranks) and s is not None
                          and s.exc_type and s.frames and restates(seg.exc_text, s.exc_text)), (seg, zone))
    # The most telling line of the zone: its best cause (or consequence) signature, by priority;
    # else, among wrappers, the one of highest priority (a dead actor's exit detail); else the
    # exception line itself.
    signed = [(ln, s) for ln, s in ((ln, _best(sg)) for ln, sg in zone if sg)]
    telling = [(ln, s) for ln, s in signed if s.role != "wrapper"]
    if telling:
        line, sig = min(telling, key=lambda x: (ROLE_ORDER[x[1].role], -x[1].priority))
    elif signed and all_wrap:
        line, sig = min(signed, key=lambda x: -x[1].priority)
    else:
        line, sig = zone[0][0], _best(zone[0][1])
    exc = (seg.inner_type or seg.exc_type) if seg else ""
    text = seg.exc_text if seg is not None and line.no == seg.exc_no else line.text  # with a message it ran on to
    if (detail := last_error([ln for ln in blk.lines if line.no < ln.no <= line.no + 4])) and detail not in text:
        text = f"{text} (last error: {detail})"
    f = _make(pb, line.no, text, next(sg for ln, sg in zone if ln is line), sig, exc, {blk.proc},
              max((ln.repeat for ln in blk.lines), default=1))
    if sig is None and seg is not None and line.no == seg.exc_no:
        f.category = statement_family(pb, seg) or f.category
    if f.stage is None:
        # a remote task's failure with no traceback of its own (`RayTaskError(WorkerCrashedError):
        # ray::RewardModel.get_rewards()`: the worker died): the method it names is the innermost
        # call known; the frames above it are the caller's, waiting in ray.get
        named = RAY_METHOD.findall(line.text) if sig is not None and sig.role == "wrapper" else []
        if named and seg is not None:  # the remote frames Ray prints under its header, cut before their
            # exception: they ran inside the method (ray/exceptions.py RayTaskError: header, then the
            # remote traceback)
            after = blk.segments[blk.segments.index(seg) + 1:]
            named += [e for s in after if not s.exc_text for e in with_calls(pb, s.frames, s.code)]
            if (cut := _cut_after(blk, seg)) and cut[-1].frames:  # and stop before their exception
                f.text = f"{f.text} (its traceback cut short after {_said(cut[-1], pb)})"
        elif sig is not None and sig.role == "wrapper" and seg is not None and (cut := _cut_after(blk, seg)):
            # any wrapper's traceback cut short (vLLM's `WorkerProc hit an exception.`): its frames are
            # the failing call's own path, where the error was raised
            named = [e for s in cut for e in with_calls(pb, s.frames, s.code)]
        _place_in(f, pb, blk, seg, exc, line.text,
                  named + callee(seg.exc_text if seg else line.text) + failed_call(line.text)
                  + statement_attribute(pb, seg, line.text))
    elif f.stage == START:
        _work_over_setup(f, pb, [(with_calls(pb, seg.frames, seg.code) if seg else []) + failed_call(line.text),
                                 blk.methods])
    if f.category == "other" and (sig is None or sig.role == "wrapper"):  # the rest of a message of several lines
        # may say more (a wrapper's own words say little: `terminate called …` then `what():  std::bad_alloc`)
        f.category = next((c for ln, _ in zone if ln is not line
                           and (c := fallback_category(pb, exc, ln.text)) != "other"), "other")
    if f.category == "other" and sig is None and seg is not None:
        f.category = frame_family(pb, with_calls(pb, seg.frames, seg.code))
    elif f.category == "other" and sig is not None and sig.role == "wrapper" and seg is not None:
        # a wrapper whose traceback is cut before its exception (vLLM's `WorkerProc hit an exception.`
        # then the worker's frames): the frames it wraps are all that says what failed
        f.category = frame_family(pb, [e for s in _cut_after(blk, seg) for e in with_calls(pb, s.frames, s.code)])
    _value_of_wrong_type(f, sig)  # a family of messages, before the reward function's own
    f.category = scored_category(f, f.stage)
    if sig is None and f.stage == STAGE_NO["reward"] \
            and any(named_stage(pb, n) == f.stage for n in callee(line.text, KEYWORD_ERRORS)):
        # the reward function could not take the keyword arguments it was called with: trainers
        # pass it the dataset's columns so (TRL GRPOTrainer: reward_func(prompts=…, completions=…,
        # **{column: values})), so a column missing, extra or named like one of theirs is the data's
        # shape; a count of positional arguments that does not fit is the calling convention's
        f.category = "data_format"
    if seg is not None and line.no == seg.exc_no and line.text == seg.exc_type and seg.frames:
        # a bare exception (an `assert` without a message): say where it was raised and the statement
        code = seg.code.get(len(seg.frames) - 1, "")
        f.text = f"{line.text} (at {seg.frames[-1].strip()}{': ' + code if code else ''})"
    f.lines, f.context, f.first_no = [ln.text for ln in blk.lines], blk.context, blk.start_no
    f.wrapped = seg is not None and segs.index(seg) > 0 and zone_rank(zones[0]) > 0
    return f


# CPython's TypeErrors of an operation given a value of a builtin type it cannot take
# (Objects/abstract.c `'%.200s' object is not subscriptable`, `object of type '%.200s' has no len()`,
# `unsupported operand type(s) for +: 'int' and 'list'`, `argument of type 'NoneType' is not
# iterable`; Objects/unicodeobject.c and listobject.c `string indices must be integers`, `list
# indices must be integers or slices, not str`; Objects/floatobject.c `must be real number, not
# NoneType`; `'<' not supported between instances of 'str' and 'int'`; Objects/dictobject.c
# `unhashable type: 'list'`): a None where a value was expected, a string where a dict was, a list
# where a number was. Past start-up that value is a record's field handed between stages
# (tests/corpus/realworld10/1126, ms-swift's batch); at start-up there are no records yet — a
# setting left unset (realworld3/401, MindSpeed-RL's config).
BUILTIN = r"(?:NoneType|list|dict|str|int|float|tuple|set|bool|bytes)"
VALUE_TYPE = re.compile(rf"'{BUILTIN}' object is not (?:subscriptable|iterable|reversible|a mapping)"
                        rf"|(?:object|argument) of type '{BUILTIN}' (?:has no len\(\)|is not iterable)"
                        rf"|unsupported operand type\(s\) for \S+: '{BUILTIN}' and '{BUILTIN}'"
                        rf"|not supported between instances of '{BUILTIN}' and '{BUILTIN}'"
                        rf"|(?:string|list|tuple) indices must be integers|must be [\w ,-]+?, not '?{BUILTIN}\b"
                        rf"|unhashable type: '{BUILTIN}'")


def _value_of_wrong_type(f: Finding, sig: Signature | None) -> None:
    """A TypeError of a builtin value's type (VALUE_TYPE) that no family named, raised past
    start-up: the data's shape."""
    if f.category == "other" and (sig is None or sig.role != "cause") and f.stage not in (None, START) \
            and VALUE_TYPE.search(f.text):
        f.category = "data_format"


def scored_category(f: Finding, stage: int | None) -> str:
    """The category of a finding raised at `stage`: an error no family or signature names, raised
    while scoring, is the reward function's own (TRL's reward_funcs, verl's compute_score,
    OpenRLHF's remote_rm_fn run the user's code) — `reward_parsing`; else its own."""
    if f.category == "other" and f.signature is None and stage == STAGE_NO["reward"]:
        return "reward_parsing"
    return f.category


CUT_SHORT = "cut|"  # the key prefix of a traceback's finding whose exception the log does not show
# what a finding's text adds about where its traceback stopped (`… (its traceback cut short after
# File "…/ray/_private/worker.py", line 2882, in get: values, … = worker.get_objects(…))`): the
# frames' names, not the message's words
CUT_NOTE = re.compile(r" \((?:its traceback )?cut short after .*\)$")

# Python's logging prints a record's message and then its exception's traceback (Logger.exception
# and exc_info=True: logging.Formatter.format appends formatException to the message), as
# AReaL's `EngineBP ERROR: Engine method 'initialize' failed: …`, ms-swift's `[ERROR:swift] Method
# execution failed: …` and vLLM's `ERROR … [core.py] Invocation of collective_rpc method failed`
# do: an error record just before a traceback's head says what its exception was. So does a
# record of the call that failed, printed before its traceback (`print(f"Error in {method}: {e}")`
# then traceback.print_exc(): NeMo-RL's `Error in VllmInternalWorkerExtension.update_weights…: …`;
# vLLM's worker_base `Error executing method update_weight.`).
LEVEL_ERROR = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
# … or a library's own report of a failed call, printed by its C code before Python raised
# (`CUDA Error: out of memory at …cumem_allocator.cpp:62`, torch's `CUDA error: …`, `NCCL error: …`,
# `CUresult error: 2 (out of memory)`): an acronym naming the library, then `error: `.
LOGGED_ERROR = re.compile(LEVEL_ERROR.pattern + r"|(?:^|[\s\]])Error (?:in [\w.]+:|executing method \w+)"
                          r"|(?:^|\s)[A-Z]{2,}\w* [Ee]rror: \S")
# The exception's own line put above its traceback (an issue's paste: the error first, then where
# it came from), its blank after the colon sometimes lost (`RuntimeError:No module named …`).
PASTED_EXC = re.compile(r"(?:^|\s)(?:[A-Za-z_]\w*\.)*(?P<type>[A-Z]\w*(?:Error|Exception))(?:\([\w.]+\))?: ?\S")


def restates(said: str, exc_text: str) -> bool:
    """Whether a line that said `said` says an exception's message (`exc_text`, `Type: message`)
    again, as its end, not as the exception itself."""
    msg = exc_text.split(": ", 1)[1].rstrip(" .") if ": " in exc_text else ""
    return len(msg) >= 20 and said.rstrip(" .").endswith(msg) and said.rstrip(" .") != exc_text.rstrip(" .")


def last_error(lines: list) -> str:
    """The collective library's last error among the lines just after an exception's (its
    message's others): the line after `Last error:` (or the rest of that line), the most specific."""
    for i, ln in enumerate(lines):
        if (m := LAST_ERROR.match(ln.text.strip())) is not None:
            said = m["said"] or (lines[i + 1].text.strip() if i + 1 < len(lines) else "")
            return "" if said.startswith("Unknown") else said
    return ""


def _cut_short(blk: Block, pb: Playbook) -> Finding | None:
    """A Python traceback that stops before its exception line (the process killed while it
    printed, a log cut, a paste cut short): the process was failing where its frames say — a
    crash there, its exception unknown; the innermost frame's statement is the last thing known
    of it. A stack dump (faulthandler's, innermost first) is a look at a live process, not a
    failure. An error record logged just before the head (LOGGED_ERROR), or the exception's own
    line pasted there (PASTED_EXC), is its message: the root cause's text. Frames with no
    `Traceback` head count only where the log ends inside them (a paste
    that starts and stops within a traceback, not lines after them): in a running log they may
    be a printed stack; and they rank after any error the log shows in full (`downstream`): when
    that traceback's exception was raised, before or after the others, lies outside the window."""
    head = next((ln for ln in blk.lines if "Traceback (most recent call last)" in ln.text), None)
    seg = blk.segments[-1] if blk.segments else None
    frames = [fr for s in blk.segments for fr in s.frames]
    coded = any(s.code for s in blk.segments)  # a frame with its statement under it: a traceback's shape
    inside = blk.at_end and not blk.gap and (len(frames) > 1 or coded) and all(", in " in fr for fr in frames)
    if blk.innermost_first or (not frames and not blk.ipython) or (head is None and not inside):
        return None
    named: list[str] = []  # the calls its message names as the one that failed (`f() missing 1 …`)
    typed = ""  # the exception's type, when the log names it
    if not frames:  # IPython's head names the exception's type: all there is of it
        typed = head.text.split()[0].rsplit(".", 1)[-1]
        text = f"{head.text} (cut short after its head)"
        category = family(pb, typed, text)[0]
    else:
        said = _said(seg, pb) if seg is not None and seg.frames else frames[-1]
        logged = blk.context[-1] if head is not None and head.no == blk.start_no and blk.context else ""
        record = make_line(0, logged, pb.prefixes)
        logged = record.text  # as the log's own lines read: no Ray or rank prefix
        pasted = PASTED_EXC.search(logged)  # (after whatever framing the log's lines carry)
        # the level may be in the logger's prefix, peeled (vLLM's `ERROR 12-18 15:51:23 [core.py:710] `)
        if pasted or LOGGED_ERROR.search(logged) or LEVEL_ERROR.search(record.prefix):
            exc = pasted["type"] if pasted else ""
            text, category = f"{logged} (its traceback cut short after {said})", family(pb, exc, logged)[0]
            named = callee(logged) + failed_call(logged)  # the call it names failed inside the frames shown
        elif warned := _warned(blk.context, pb):  # what the library said of the failure as it began
            text, category = f"{warned[0]} (its traceback cut short after {said})", warned[1]
        else:
            text, category = f"{head.text if head else 'Traceback'} (cut short after {said})", "other"
    entries = [e for s in blk.segments for e in with_calls(pb, s.frames, s.code)]
    f = Finding(key=f"{CUT_SHORT}{canonical(text)}", line_no=(head or blk.lines[0]).no, text=text,
                category=category if category != "other" else frame_family(pb, entries), exception=typed,
                procs={blk.proc}, lines=[ln.text for ln in blk.lines], context=blk.context, first_no=blk.start_no,
                role="cause" if head else "downstream")
    _place_in(f, pb, blk, seg, "", "", named)
    return f


# A line a library printed at a warning's or an error's level: c10's `[W906 15:02:06.204334026
# CUDACachingAllocator.cpp:3934] `, a logger's `WARNING` / `ERROR` (the level in its peeled prefix or its text).
LEVELLED = re.compile(r"^(?:\[rank\d+\]:)?\[[WE]\d{3,4} |\b(?:WARN(?:ING)?|ERROR|CRITICAL|FATAL)\b")
WARNED_BACK = 5  # the lines before a traceback cut short read for what was said of its failure


def _warned(context: list[str], pb: Playbook) -> tuple[str, str] | None:
    """(text, category) of the nearest line just before a traceback cut short that a library printed
    at a warning's or an error's level in an error family: c10's caching allocator warns
    `[W906 …CUDACachingAllocator.cpp:3934] memory allocation failed with OOM on device 0 while
    trying to allocate … bytes (free: …)` when an allocation fails, then frees its cached blocks
    and retries — alone a warning (the retry often succeeds, the run goes on: never a finding by
    itself), but a traceback that stops right after it, its exception lost (tests/corpus/realworld48/4817,
    a paste), failed where the allocator did; of a run of such lines, its first."""
    said = [_levelled_family(t, pb) for t in context]
    near = [i for i in range(max(len(said) - WARNED_BACK, 0), len(said)) if said[i] is not None]
    if not near:
        return None
    i = near[-1]
    while i > 0 and said[i - 1] is not None and said[i - 1][1] == said[i][1]:
        i -= 1  # the first of its run: the lines after it repeat the failure (each retry's)
    return said[i]


def _levelled_family(text: str, pb: Playbook) -> tuple[str, str] | None:
    ln = make_line(0, text, pb.prefixes)
    if LEVELLED.search(ln.prefix) or LEVELLED.search(ln.text):
        if (category := family(pb, "", ln.text)[0]) != "other":
            return ln.text, category
    return None


def _cut_after(blk: Block, seg) -> list:
    """The segments after `seg` when none of them reaches an exception: the traceback a wrapper's
    line heads (Ray's RayTaskError header, vLLM's `WorkerProc hit an exception.`), cut short."""
    after = blk.segments[blk.segments.index(seg) + 1:]
    return [] if any(s.exc_text for s in after) else after


def _said(seg, pb: Playbook) -> str:
    """Where a segment's frames stop: its innermost frame and the statement printed under it, the
    frame of the program's work it was in (`naming_frame`) when that is another, and the statement
    that called that work, printed under the frame above it (`fprop_logprobs =
    policy.get_logprobs(train_data)["logprobs"]` above NeMo-RL's get_logprobs): the line of the
    program's own loop an engineer looks for first."""
    def at(i: int) -> str:
        code = seg.code.get(i, "")
        return f"{seg.frames[i].strip()}: {code}" if code else seg.frames[i].strip()
    inner = len(seg.frames) - 1
    work = naming_frame(pb, seg.frames, seg.code)
    if work is None and all(FRAME.match(fr) for fr in seg.frames):  # no function names the work:
        own = [i for i, fr in enumerate(seg.frames) if not LIBRARY_FILE.search(FRAME.match(fr)[1])]
        work = own[-1] if own else None  # where the program's own code made the call
    where = at(inner) if work in (None, inner) else f"{at(inner)}, in {at(work)}"
    call = seg.code.get(work - 1, "") if work else ""
    return f"{where}, called as {call}" if call else where


# A file of an installed package (pip's site-packages, Debian's dist-packages), a compiled module's
# source as it was built (Cython's `python/ray/_raylet.pyx`), or no file (`<frozen importlib…>`,
# `<string>`): a library's frame, not the program's.
LIBRARY_FILE = re.compile(r"[/\\](?:site|dist)-packages[/\\]|\.pyx$|^<")


# The function a call failed to enter, named by the interpreter's argument errors (CPython
# Python/ceval.c and Objects/call.c: `f() missing 1 required positional argument: 'x'`,
# `f() got an unexpected keyword argument 'x'`, `f() takes 2 positional arguments but 3 were
# given`, `f() got multiple values for argument 'x'`; 3.10+ print the qualified name,
# `Trainer.step()`): the innermost call of the failure, where its frames may be cut away.
CALLEE = re.compile(r"\bTypeError: ([A-Za-z_][\w.<>]*\(\)) (missing \d+ required|got an unexpected keyword"
                    r"|takes (?:from )?\d+|got multiple values|got some positional-only)")
# the errors of keyword arguments that do not fit (a count of positional ones is the other kind)
KEYWORD_ERRORS = ("missing", "got an unexpected keyword", "got multiple values")


def callee(text: str, kinds: tuple[str, ...] = ()) -> list[str]:
    """The function a TypeError of a call's arguments names (`accuracy_reward()`), as a Ray method
    is named: `name()` or `Class.name()`; with `kinds`, only for an error of one of those kinds."""
    m = CALLEE.search(text)
    return [".".join(m[1].split(".")[-2:])] if m and m[2].startswith(kinds or ("",)) else []


# The call an error record names as the one that failed or timed out, quoted or not: AReaL's RPC
# server (`Engine method 'compute_logp' failed: …`, areal/scheduler/rpc: the engine method a
# remote call ran), vLLM's engine client (`RPC call to sample_tokens timed out.`, v1 engine
# core_client: the engine-core method it waited on) — the innermost call known when the record
# carries no traceback of its own.
FAILED_CALL = re.compile(r"\b(?:[Mm]ethod|[Ff]unction|call to) ['`\"]?([A-Za-z_]\w*)['`\"]? (?:failed|timed out)")


def failed_call(text: str) -> list[str]:
    """The name of the call `text` says failed or timed out (`FAILED_CALL`), as a Ray method is named."""
    m = FAILED_CALL.search(text)
    return [f"{m[1]}()"] if m else []


# The attribute an AttributeError says an object lacks (CPython Objects/object.c
# PyObject_GenericGetAttr: `'%.100s' object has no attribute '%U'`, a module's `module 'x' has no
# attribute 'y'`): what the failing statement was using, its innermost operation when the log shows
# no frame of it (slime's dynamic-sampling filter calling `get_reward_value` on a group:
# tests/corpus/realworld36/3623), and under the frames of one (`statement_attribute`).
MISSING_ATTRIBUTE = re.compile(r"\bhas no attribute '([A-Za-z_]\w*)'")


def used_attribute(text: str) -> list[str]:
    """The attribute `text` says an object lacks, as a Ray method is named."""
    m = MISSING_ATTRIBUTE.search(text)
    return [f"{m[1]}()"] if m else []


def statement_attribute(pb: Playbook, seg, text: str) -> list[str]:
    """`used_attribute` as the innermost operation of a traceback's statement, when its frames do
    not pass through set-up: a set-up frame reads settings and builds objects, whatever work they
    are for (`'Config' object has no attribute 'rollout'` in `init_model`); elsewhere the attribute
    names what the statement did where its frames name nothing (`train_dataloader.sampler` under a
    training loop of the script's own: `'DeepSpeedDataLoader' object has no attribute 'sampler'`,
    a dispatch — tests/corpus/realworld60/6006)."""
    used = used_attribute(text)  # the message first: most errors name no attribute, and the path is not read
    if used and seg is not None and seg.frames and sets_up(pb, [with_calls(pb, seg.frames, seg.code)]):
        return []
    return used


# Ray's ActorDiedError names the actor that died under its message, one field a line (ray/exceptions.py
# ActorDiedError from the ActorDiedErrorContext: `\tclass_name: ActorWorker`, `\tname: actor_infer-12`,
# ROLL's inference worker): a process of the failing call, as a prefix names one.
DEAD_ACTOR = re.compile(r"^\s+(?:class_)?name: ([\w.<>:-]+)$")


def _place_in(f: Finding, pb: Playbook, blk: Block, seg, exc: str, text: str, named: tuple | list = ()) -> None:
    """`_place` a block's finding by the root's own traceback (then the calls `named` inside it),
    the Ray methods, the block's other frames, the processes."""
    actors = list(dict.fromkeys([ln.actor for ln in blk.lines if ln.actor]
                                + [m[1] for ln in blk.lines if (m := DEAD_ACTOR.match(ln.text))]))
    every = [e for s in blk.segments for e in with_calls(pb, s.frames, s.code)]
    # a fatal error's dump (faulthandler's `Fatal Python error: …`, then `Stack (most recent call
    # first):`) is the dying call's own path: its frames follow the error, not precede it
    own = (every if blk.innermost_first and not (seg and seg.frames)
           else with_calls(pb, seg.frames, seg.code) if seg else [])
    _place(f, pb, [own + list(named), blk.methods, every], actors, exc, text)


def metric_finding(line: Line, rule: MetricRule, value: float, context: list[str], origin: str = "") -> Finding:
    return Finding(key=f"metric|{rule.id}", line_no=line.no, text=line.text, category=rule.category,
                   hint=rule.hint, stage=STAGE_NO[rule.stage], outcome="wrong_result", signature=rule.id,
                   detail=f"{rule.metric}={value:g} ({rule.when}{' ' + rule.against if rule.against else ''})",
                   procs={line.proc}, lines=[line.text], context=context, origin=origin,
                   fix=rule.fix.model_dump(exclude_defaults=True) if rule.fix else None)


def fallback_category(pb: Playbook, exc: str, text: str) -> str:
    """A reasoned category when no signature matched: the first of the playbook's error families
    (`categories:`) that the exception type or the message belongs to; else `other` — never a
    guess that it is the configuration."""
    return family(pb, exc, text)[0]


def statement_family(pb: Playbook, seg) -> str | None:
    """The category of the first statement family the source line that raised a traceback's
    exception (its innermost frame's) belongs to: `cls._registry[name]` failing is a name no
    component is registered under, whatever the KeyError's type says of records."""
    code = seg.code.get(len(seg.frames) - 1, "") if seg.frames else ""
    return next((category for category, rx in pb.statement_categories if code and rx.search(code)), None)


def frame_family(pb: Playbook, entries: list[str]) -> str:
    """The category of the first frame family an innermost function of the call belongs to: a
    frame's, or one its source line calls (`with_calls`: `self._load_weights(weights)` under the
    innermost frame of a traceback cut short)."""
    funcs = [m[3] if (m := FRAME.match(e)) else e for e in reversed(entries) if not e.startswith(TARGET)][:FRAME_FAMILY_DEPTH]
    for category, rx in pb.frame_categories:
        if any(rx.search(fn) for fn in funcs):
            return category
    return "other"


FRAME_FAMILY_DEPTH = 4  # the innermost functions that say what the failing call was doing


PADDING = re.compile(r" {2,}")  # a terminal's copy pads a wrapped row to its width (tests/corpus/realworld41/4105)


def family(pb: Playbook, exc: str, text: str) -> tuple[str, int | None]:
    """(category, stage or None) of the first error family the type or message belongs to — the
    stage that of the first family it belongs to that has one (an out-of-memory error of
    torch_memory_saver's `resume`, tests/corpus/realworld54/5412, is the memory's, in the rollout's
    wake-up) —, its words read with one blank between them: a message copied from a terminal's
    screen holds the rows it wrapped into padded to the screen's width (`must be evenly divisible      by …`)."""
    text = PADDING.sub(" ", text)
    first = None
    for category, rx, stage in pb.categories:
        if rx.search(exc) or rx.search(text):
            first = first or category
            if stage is not None:
                return first, stage
    return first or "other", None
