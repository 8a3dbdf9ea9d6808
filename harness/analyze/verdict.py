"""The verdict: how far the chain got, what broke and why, as the public JSON shape."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from ..chain import STAGE_NO, STAGES, stage_statuses
from ..redact import redact
from .blocks import LOOSE_EXC
from .callpath import MODEL_CLASS, named_stage, names_collective_work, names_set_up, path_stage, requested_stage
from .findings import CUT_NOTE, CUT_SHORT, ROLE_ORDER, Finding, family, restates, scored_category
from .lines import canonical, make_line
from .metrics import measures, reports
from .stacks import collective, flights_after, waiting_frame

LAST = len(STAGES)


def root_cause(findings: list[Finding], last_update_no: int | None) -> Finding | None:
    """The earliest real error: a cause before a consequence before a wrapper, and a traceback the
    log cut short before its exception after every error it shows in full (ranks print the same
    failure, one in full, the others' cut by the window or by each other's lines). Errors that the
    run lived through (a healthy actor update came after them) do not count, nor do
    consequences and wrappers after it (an engine 'died' at shutdown) — but for a hang's (a
    collective's watchdog timing out: a collective that waited its whole timeout is no shutdown's
    noise, whatever the updates before it). A run that crashed or
    hung has that for its root cause; bad values it printed before are findings (a wrong result
    is a run that went on, or ended, with them)."""
    live = [f for f in findings if f.outcome == "wrong_result" or last_update_no is None
            or (f.line_no > last_update_no and (f.role == "cause" or (f.role, f.outcome) == ("downstream", "hang")))]
    failed = [f for f in live if f.outcome != "wrong_result"]
    if failed and all(f.key.startswith(CUT_SHORT) for f in failed):
        # a traceback cut short before its exception says where the run died, not why: a bad value
        # it printed before (a NaN in the step's metrics) is the earliest error known, and the crash's
        died = min(g.line_no for g in failed)
        bad = [f for f in live if f.outcome == "wrong_result" and f.line_no < died]
        if bad:
            return replace(min(bad, key=lambda f: (f.line_no, f.stage or 0)), outcome="crash")
    # on one line, the most upstream stage first: a NaN reward makes the loss NaN, not the reverse;
    # of wrappers only, one that names the kind of error inside (`RayTaskError(OutOfMemoryError)`)
    # before one that does not (Ray's `Unhandled error …: ray::X.f()` printed for the same task)
    root = min(failed or live, key=lambda f: (ROLE_ORDER[f.role], f.role == "wrapper" and f.category == "other",
                                              f.key.startswith(CUT_SHORT), f.line_no, f.stage or 0), default=None)
    return restated(root, failed) if root is not None else None


def restated(root: Finding, failed: list[Finding]) -> Finding:
    """The exception `root` only restates, when it does: a line that ends with the message of a
    later exception with its traceback (`Training failed with error: CUDA error: …` logged by
    whoever caught it, c10d's `socket.cpp` line before its DistNetworkError) is that error, and
    the exception, with its call path, is the root."""
    if root.exception:
        return root
    return next((f for f in failed if f.line_no > root.line_no and f.exception and restates(root.text, f.text)), root)


def lifecycle_stage(stage: int | None, top: int, floor: int = 0) -> int:
    """The failed stage: the one a signature or the call path says, else the stage after the
    last one passed — a failure before any marker is a start-up failure (DESIGN.md's convention),
    one after a whole step is the next step's first, completion (weight sync, generation) —;
    never below `floor + 1` (see `first_pass`)."""
    if stage is None:
        stage = top + 1 if top < len(STAGES) else STAGE_NO["completion"]
    return max(stage, floor + 1)


def first_pass(reached: dict[int, tuple[int, str]], line_no: int) -> int:
    """In the run's first pass through the chain (no actor update before `line_no`), the k such
    that stages 1..k all passed before that line: a failure there is of stage k+1 or later. Only
    the unbroken run of stages counts — tasks are often dispatched before the engine serves its
    first completion, so a dispatch marker does not put a completion failure after it later."""
    if LAST in reached and reached[LAST][0] < line_no:
        return 0
    k = 0
    while k + 1 in reached and reached[k + 1][0] < line_no:
        k += 1
    return k


# ProcessGroupNCCL numbers the collectives of a group and its watchdog names the one that timed out,
# `WorkNCCL(SeqNum=131, OpType=_ALLGATHER_BASE, …)` (torch_npu's ProcessGroupHCCL the same,
# `WorkHCCL(SeqNum=196, OpType=ALLREDUCE, …)`): a number past the first says the group had run
# collectives before it — it was set up, and in use. Its op (`reduced_stage`) when the watchdog names it.
SEQ = re.compile(r"\bWork[A-Z]+\(SeqNum=(\d+)(?:, OpType=(\w+))?")


def set_up(lines: list[str]) -> int:
    """1 (engine_start passed) when one of `lines` is a collective's watchdog past its group's
    first collective, else 0: the lifecycle's floor for a failure nothing else places."""
    return int(any(int(m[1]) > 1 for t in lines for m in SEQ.finditer(t)))


# The collective a watchdog names (`WorkNCCL(SeqNum=45390, OpType=ALLREDUCE, …)`) by its kind: the
# gradients' reductions — torch DDP's reducer all-reduces each bucket of gradients as the backward pass
# fills it (c10d/reducer.cpp), FSDP reduce-scatters them in its post-backward hook
# (fsdp/_runtime_utils.py), DeepSpeed ZeRO and Megatron's DDP reduce them the same ways (ZeRO's
# average_tensor, Megatron's param_and_grad_buffer) — are the update's. Set-up runs few collectives
# (a barrier is an ALLREDUCE too): only a group thousands of collectives into its run is training. What
# its line names, read after a phase a marker says is under way (a weight sync's all-reduce is the sync's).
# Labelled (tests/corpus/realworld8/922, realworld14/1522, 1523: TRL and verl trainers timing out in an
# ALLREDUCE at SeqNum 1236 to 460631, the update each).
GRADIENT_OPS = frozenset({"ALLREDUCE", "_REDUCE_SCATTER_BASE", "REDUCE_SCATTER", "REDUCE_SCATTER_TENSOR_COALESCED"})
TRAINING = 1000  # collectives of a group: past its set-up and its first steps


def reduced_stage(lines: list[str]) -> int | None:
    """actor_update when one of `lines` is a watchdog's report of a gradients' reduction far into its
    group's run (GRADIENT_OPS, TRAINING), else None."""
    return next((STAGE_NO["actor_update"] for t in lines for m in SEQ.finditer(t)
                 if int(m[1]) >= TRAINING and m[2] in GRADIENT_OPS), None)


def read_records(root: Finding, stage: int | None) -> int:
    """The lifecycle's floor for a record's shape that nothing places (`data_format`: a field
    missing, a file that does not parse, an empty batch): the stages before the one that first
    reads the data's records — the dataloader's, task dispatch. Start-up builds workers, models and
    communicators (DESIGN.md's stage 1); what reads a record is the data's path, wherever the
    dataset is built (labelled: EasyR1's `KeyError: 'problem'` and empty position ids, OpenRLHF's
    JSONDecodeError of a data file, open-instruct's missing `input_ids_prompt`, SkyRL's empty tail
    batch: tests/corpus/realworld21/2106, 2107, 2121, realworld22/2222, 2227). A dataset that is
    not there at all (None where a sampler wants one) is the configuration's, not a record's."""
    return STAGE_NO["task_dispatch"] - 1 if stage is None and root.category == "data_format" else 0


SILENCE = "silence"  # the signature id of a hang's root cause when no error was printed
SILENT_CATEGORY = "other"  # its category when its last lines belong to no error family, outside the collective stages
# Stages whose processes step together through collectives: the log-prob forward passes, the
# update's all-reduce. A run silent and idle there has ranks waiting in one for a rank that died or
# diverged, silent until NCCL's or HCCL's watchdog fires (10-30 min; torch ProcessGroupNCCL's
# timeout, HCCL_EXEC_TIMEOUT). Elsewhere it is `other`: no timeout fired. Task dispatch,
# trajectories and rewards wait on requests, tasks and agents, a wait with no timeout (of the
# labelled silent hangs there — an agent loop's tool, a reward function that cannot be pickled, a
# filter that found no reward spread — none is a `timeout`). Start-up waits on many things — a
# download, a port, Ray, a compile, a server's API, a rendezvous (which c10d and HCCL name when they
# wait: an error family then says so) — (labelled start-up hangs of ms-swift's and OpenRLHF's
# rollout servers, verl and Logic-RL: none was a collective's). So does a generation: an engine
# serves its clients' requests (a rollout server, an async queue) and steps its tensor-parallel
# ranks through collectives, and either can hold it (labelled: AReaL after a weight load and
# EasyR1's stalled `Processed prompts`, other; slime's, a collective's) — until the processes'
# stacks say which (the live session's evidence).
COLLECTIVE_STAGES = frozenset(STAGE_NO[s] for s in ("training_data", "actor_update"))


def silent_category(pb, stage: int, tail: list[str]) -> str:
    """The category of a silent hang at `stage` when nothing it printed says more than the work its
    last line names: in a collective stage, or in a generation's weight sync — the trainer
    broadcasting its weights into the engine's ranks (TRL's vllm-serve `POST /update_named_param/`
    then a PyNcclCommunicator broadcast, slime's update_weights_from_distributed, OpenRLHF's and
    verl's broadcasts and FSDP/Megatron gathers): labelled a collective's hang after a trainer's
    `POST /prepare_weights_update` (tests/corpus/realworld47/4723, `Transferring weights via NCCL...`
    before it) and after TRL's weight-push requests (realworld55/5523) —, a collective's; elsewhere
    `other`."""
    syncing = stage == STAGE_NO["completion"] and bool(tail) and names_collective_work(pb, tail[-1])
    return "distributed_comm_hang" if stage in COLLECTIVE_STAGES or syncing else SILENT_CATEGORY


ANSWERED = re.compile(r'"(?:GET|POST|PUT|DELETE|HEAD|PATCH) \S+ HTTP/[\d.]+" [23]\d\d\b')
# A request a server logged (uvicorn's, aiohttp's access line): its path names the work asked of it.
REQUEST = re.compile(r'"(?:GET|POST|PUT|PATCH) (?P<path>/[^\s?"]*)\S* HTTP/[\d.]+" \d{3}\b')


def _peeled(an, texts: list[str] | None = None) -> list:
    """A run's last lines (`texts`, else its tail) as Lines without Ray's and ranks' prefixes and
    without lines that say nothing: blank ones (a framing's empty record) and rules drawn with
    punctuation (`------`, `=====`: a report's frame, not its words)."""
    lines = [make_line(0, t, an.pb.prefixes, an.framing) for t in (an.tail if texts is None else texts)]
    return [ln for ln in lines if any(c.isalnum() for c in ln.text)]


# c10's backtrace of a C++ exception (c10/util/Backtrace.cpp: `frame #N: symbol + 0xOFF (0xADDR in
# library)`, innermost first; frame #0 is c10's own error constructor or check): a run whose last
# lines are one (its `Exception raised from …` head cut off or lost) says what failed by its
# innermost frame of named code — ProcessGroupNCCL's watchdog (`WorkNCCL::checkTimeout`) is a
# collective's timeout — not by the C library's thread start it ends with.
CPP_FRAME = re.compile(r"^frame #\d+: ")
CPP_UNNAMED = re.compile(r"^frame #\d+: (?:<unknown function>|(?:c10::)?(?:Error::Error|detail::|Warning::)|\?\?)")


def _backtrace_said(texts: list[str]) -> list[str]:
    """`texts` with a C++ backtrace they end on read as its innermost frame of named code."""
    start = len(texts)
    while start > 0 and CPP_FRAME.match(texts[start - 1]):
        start -= 1
    named = [t for t in texts[start:] if not CPP_UNNAMED.match(t)]
    return texts[:start] + named[:1] if named else texts


# a line that says something failed (an exception's type, a logger's ERROR, `failed`), not a metric
# of errors (`Error 0.0%`, `errors: 3`)
ERRORISH = re.compile(r"\b(?:\w*(?:Error|Exception)|ERROR|[Ee]rror|[Ff]ailed|FAILED|[Ff]atal|FATAL)\b(?![ :=]*[\d.]+%?)")


def _last_said(an) -> tuple[list[str], str, list[str], bool]:
    """A run's last lines (`_peeled`), the one that says most of them, the error families they
    belong to (nearest the end first), and whether its last words are a warning: that line a
    logger's record at its warning level, or a Python warning last (the warning, not its source
    line, is the one that says most when they are all such)."""
    lines = _peeled(an)
    tail = [ln.text for ln in lines[-3:]]
    # a warning says what went on, not where it stopped
    kept = _not_warned(lines)
    said = _backtrace_said([ln.text for ln in kept])
    warned = not said and [ln.text for ln in lines if PY_WARNING.match(ln.text)][-1:]
    # a bar's last count, then a warning its process printed as it went on (TRL's KL warning after a
    # step's bar: tests/corpus/realworld35/3505): the warning is the run's last word
    ends_warned = bool(lines) and (not kept or kept[-1] is not lines[-1])
    said = said or warned or tail
    # A server's access-log line of a request it answered (uvicorn's `"GET /v1/models HTTP/1.1" 200 OK`,
    # as vLLM's and SGLang's OpenAI servers print it) says the server is fine: the waiting is in what
    # printed before it, whichever process happened to flush last.
    waited = [t for t in said if not ANSWERED.search(t)]
    last = waited[-1] if waited else (said[-1] if said else "")
    if not ERRORISH.search(last):  # an error said just before the silence says more than the chatter after it
        last = next((t for t in reversed(waited[-3:]) if ERRORISH.search(t) and not reports(t)), last)
    key = canonical(last)
    for t in reversed(waited[:-1]):  # the same words over and over at the end: the first time is when it began
        if canonical(t) != key:
            break
        last = t
    cats = [c for c in (family(an.pb, "", t)[0] for t in reversed(said[-3:])) if c != "other"]
    return tail, last, cats, bool(warned) or ends_warned or LOGGED_WARNING.search(last) is not None


# Python's warnings print `path:N: CategoryWarning: message` (warnings.formatwarning), a message of
# several lines as it is, then the source line indented: vLLM's `connections.py:8: RuntimeWarning:
# Failed to read commit hash:` goes on `No module named 'vllm._version'` (tests/corpus/realworld5/627).
PY_WARNING = re.compile(r"^\S+?:\d+: \w*Warning: ")
LOGGED_WARNING = re.compile(r"\bWARN(?:ING)?\b")  # a logger's record at its warning level (`[WARNING:swift]`)
WARNING_LINES = 3  # the most lines a warning's message is taken to go on over


# A line that begins a record of its own, not a warning's message going on: a logger's error
# (`[RemoteInfEngine Rank 0] ERROR: Consumer thread failed` after the `RuntimeWarning` of the code a
# tool ran: tests/corpus/realworld53/5330), a traceback's head.
OWN_RECORD = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|^Traceback \(most recent call last\):")


def _not_warned(lines: list) -> list:
    """`lines` without Python warnings, the lines their messages go on over (of the same process,
    not indented, up to WARNING_LINES, none a record of its own: `OWN_RECORD`) and their source
    lines (the indented line that ends one, `  warnings.warn(`): a warning is no error's family."""
    out, going = [], {}  # process -> lines its warning's message may still go on over
    for ln in lines:
        indented = ln.text.startswith((" ", "\t"))
        if PY_WARNING.match(ln.text):
            going[ln.proc] = WARNING_LINES
        elif going.get(ln.proc) and not indented and not OWN_RECORD.search(ln.text):
            going[ln.proc] -= 1
        elif ln.proc in going and indented:  # its source line: the warning is over
            del going[ln.proc]
        else:
            going.pop(ln.proc, None)
            out.append(ln)
    return out


def waits(an) -> list[str] | None:
    """Where a silent run waits: the frames (outermost first) of the main thread of the last stack
    dump its log shows (py-spy's), when it was dumped after every stage marker."""
    blk = an.stack
    marks = [at for at, _ in an.reached.values()] + list(an.entered.values()) + [an.last_update or -1]
    return blk.main_stack if blk is not None and blk.start_no > max(marks) else None


def silence(an, quiet: float, stage: int) -> Finding:
    """The root cause of a run that went silent without an error: where its main thread waits when
    a stack dump shows it (the frame everyone waits on; in a collective, a collective's hang, as is
    the frame of a process its peers wait for in one, `stacks.waited_on`), else
    its last line, categorised by the error family its last lines belong to (a TCPStore wait is a
    collective hang), else, when its last words are a client retrying its request, by the server
    it cannot reach (`network_proxy`: TRL's vllm_client `Server is not up yet. Retrying in 2.0
    seconds...`, tests/corpus/realworld22/2208; slime's `retrying... (attempt 51/60)`, realworld13/1404),
    else, when its last words are a warning (Python's, or a logger's record at its warning level),
    `other` — a warning reports a value its process went on from (TRL's `KL divergence is starting to
    become negative`, realworld28/2827, realworld34/3426; ms-swift's `[WARNING:swift] Rollout logprobs
    count (208) does not match completion tokens count (207)`, realworld32/3227), no sign of a
    collective's wait —, else by the stage it hangs in (`silent_category`)."""
    tail, last, cats, warned = _last_said(an)
    frames, where = waits(an), "after this line"
    warned = warned and not frames
    if frames:
        last, coll, tail = waiting_frame(frames), collective(frames), [ln.text for ln in an.stack.lines]
        cats = ["distributed_comm_hang"] if coll or an.stack.waited_by else cats
        where = "; its main thread waits here" + (f", in the collective {coll}" if coll else "")
        if an.stack.waited_by:  # the process its peers wait for in a collective
            n, op = an.stack.waited_by
            where = (f"; {n} process(es) of its kind wait in the collective {op} for the one whose main thread "
                     "is here")
    return Finding(key=SILENCE, line_no=an.line_no, text=last,
                   category=cats[0] if cats else "network_proxy" if retrying(an) else
                   SILENT_CATEGORY if warned else silent_category(an.pb, stage, tail),
                   hint=f"The run printed nothing for {quiet:.0f}s {where}, in {STAGES[stage - 1]}: "
                        "see where its processes wait (the attempt's evidence: their stacks, states and last lines).",
                   stage=stage, outcome="hang", signature=SILENCE, detail=f"silent for {quiet:.0f}s",
                   lines=tail, context=an.tail[:-1][-8:])


ENDED = "ended"  # the signature id of the root cause of a run that ended early without an error printed
KILLED = frozenset((137, -9))  # SIGKILL as a shell (128 + 9) and as Python's subprocess report it


def ended(an, code: int | None, stage: int) -> Finding:
    """The root cause of a run that ended (exit status `code`) before the chain passed, with no
    error the rules know: its last line, categorised by the error family its last lines belong
    to; else a SIGKILL is `oom` (the host's OOM killer sends it and prints nothing into the run's
    log: the class of `host_oom_sigkill`), anything else `other`. Never `running`: the run is over."""
    tail, last, cats, _ = _last_said(an)
    killed = code in KILLED
    status = "no exit status" if code is None else f"exit status {code}" + (" (SIGKILL)" if killed else "")
    hint = (f"The run ended ({status}) before {STAGES[stage - 1]} passed and printed no error the rules know: "
            "its last lines and its workers' files (the post-mortem) say why.")
    if killed:
        hint += " A SIGKILL with nothing printed is most often the host's OOM killer: check dmesg and host memory."
    elif code == 0:
        hint += " It stopped on its own: a step or epoch count, an empty dataset, a flag that skips the stage."
    return Finding(key=ENDED, line_no=an.line_no, text=last or "(the run printed nothing)",
                   category=cats[0] if cats else "oom" if killed else "other", hint=hint, stage=stage,
                   outcome="crash", signature=ENDED, detail=status, lines=tail, context=an.tail[:-1][-8:])


def under_way(an, line_no: int) -> int | None:
    """The stage whose `during` marker came last before `line_no`, of those not passed by then
    (a stage passes when its own or a later stage's end marker follows its during marker: the
    trajectories done say their tasks were dispatched): the phase that began last is the one
    under way, whatever order a framework runs its phases in (NeMo-RL prepares the batch before
    it generates); after an actor update, only what began since it (a new step, a weight sync)
    counts (`entered` holds each stage's first during-marker of the latest step)."""
    after = an.last_update if an.last_update is not None and an.last_update < line_no else -1
    begun = [k for k, at in an.entered.items() if after < at < line_no
             and not any(j >= k and at < an.reached[j][0] < line_no for j in an.reached)]
    return max(begun, key=an.entered.__getitem__, default=None)


# A tqdm bar (`Compute log probs:  50%|█████     | 1/2 [00:18<00:18, 18.4s/it]`): its description
# names the phase it counts — tqdm's format_meter prints `{desc}: {percentage:3.0f}%|{bar}|`.
BAR = re.compile(r"(?P<desc>[A-Za-z][\w .()/-]*?):\s*(?P<pct>\d{1,3})%\|")


def bar_stage(pb, lines: list[str], requests_only: bool = False,
              first: bool = False) -> tuple[int, int] | None:
    """(stage, how many lines before the last of `lines` it was printed) of the phase the last
    progress bar among `lines` counts, when it was still counting (below 100 %) and its description
    names a stage's work: EasyR1's `Compute log probs`, verl-tool's `Async Generating sequences`,
    vLLM's `Processed prompts`… A bar whose description names no stage's work (`Running step`,
    `Training Progress`) says nothing; a finished one says its phase is over. Before any stage
    passed (`first`), one that names set-up counts it: transformers' `Loading checkpoint shards`
    (modeling_utils, as a model is built: tests/corpus/realworld67/6701, 6705, a host's OOM killer
    during it) — later, loading is also what a weight sync does. A server's request
    line counts as such a bar: the last request whose path names a stage's work (TRL's and
    ms-swift's rollout servers: `"POST /update_named_param/ HTTP/1.1" 200`, the weight sync;
    `/init_communicator/`, set-up) is what its client was doing; `/health` names nothing."""
    for back, text in enumerate(reversed(lines)):
        req = REQUEST.search(text)
        if req is not None and (stage := requested_stage(pb, req["path"])) is not None:
            return stage, back
        for m in [] if requests_only else reversed(list(BAR.finditer(text))):
            stage = named_stage(pb, m["desc"]) or (
                STAGE_NO["engine_start"] if first and names_set_up(pb, m["desc"]) else None)
            if stage is not None:
                return (stage, back) if int(m["pct"]) < 100 else None
    return None


def phase_under_way(an, line_no: int, lines: list[str], named: int | None = None) -> int | None:
    """The stage under way at `line_no`: the phase begun last, by a `during` marker (`under_way`)
    or by a progress bar still counting (or a request line) among `lines`, the lines up to it,
    when no stage marker came after it. A bar does not override a stage `named` by the failing
    process or its callers: phases overlap (an async pipeline scores one batch while it generates
    the next, its bars interleaved). A request line does: a server's log of the request it just
    answered says what its client had it do (`POST /init_communicator/` before an engine process's
    error: the weight-sync communicator's set-up, not a generation)."""
    bar = bar_stage(an.pb, lines, requests_only=named is not None,
                    first=not any(at < line_no for at, _ in an.reached.values()))
    if bar is not None:
        marks = [at for at, _ in an.reached.values()] + list(an.entered.values()) + [an.last_update or -1]
        if line_no - bar[1] > max((at for at in marks if at < line_no), default=-1):
            return bar[0]
    return under_way(an, line_no)


# What a message quotes names a symbol (`'reward_model'`, `'WeightUpdateMeta'`, a KeyError's key),
# which code mentions wherever it is built or used; the words outside the quotes describe the
# operation that failed (`Batch 62 generation timed out`, `a weight update is already active`).
# A family's message (a signature's: CUDA's out-of-memory report, NCCL's watchdog) is a library's
# fixed text about a resource, wherever it ran out (`environment variables` in torch's OOM advice).
QUOTED = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`""")


# A message that says something could not be loaded reports a set-up that failed, whatever it
# names: LLaMA-Factory's loader `Reward model is not correctly loaded.` (tests/corpus/realworld15/1623,
# realworld22/2223), vLLM's pynccl_wrapper `Failed to load NCCL library from …` (realworld10/1127),
# NeMo-RL's checkpoint loader `Failed to load model from '…'` (realworld7/844) — the reward model, the
# communicator and the checkpoint are the objects start-up builds. Once a stage passed, loading is a
# later phase's work (a weight sync loads weights): the words say no more then.
NOT_LOADED = re.compile(r"\bnot (?:been )?(?:correctly |properly |successfully )?loaded\b|"
                        r"\b(?:[Ff]ailed|[Uu]nable|[Cc]ould not|[Cc]annot|[Cc]an't) (?:to )?load\b")


def signature_of(pb, f: Finding):
    """The playbook signature a finding was made by (None: an error shape of no signature)."""
    return next((s for s in pb.source.signatures if s.id == f.signature), None)


def message_stage(pb, root: Finding, top: int) -> int | None:
    """The stage of work an error's message names, outside what it quotes, when no family's
    signature matched it — an exception's message, or a line of a generic error shape (`Error
    executing tool query_rag: …`, `ValueError: …` with no traceback): where a failure that no
    frame, process or marker places happened (the program's own message describes the operation
    it stopped); one that says something could not be loaded, while no stage has passed (`top`, the
    last stage passed, is 0), set-up's."""
    if root.exception:
        _, head, message = root.text.partition(f"{root.exception}: ")
    else:
        sig = signature_of(pb, root)
        head = root.signature is None or (sig is not None and sig.category is None)  # no family's
        message = LOOSE_EXC.sub("", root.text)  # an exception's own head (`ValueError: `) names no work
    message = CUT_NOTE.sub("", message)  # where its traceback stopped is a frame's, not the message's, say
    if (requested := failed_request(pb, [root.text, *root.lines[1:4]])) is not None:  # whatever family it is
        return requested
    if (root.signature and root.exception) or not head:
        return None
    if NOT_LOADED.search(message) and top == 0:  # after a stage passed, a load is a later phase's (a weight sync's)
        return STAGE_NO["engine_start"]
    if family(pb, root.exception, message)[0] == "config_mismatch":  # a check of settings names settings
        return None
    return named_stage(pb, PATHLIKE.sub(" ", QUOTED.sub(" ", MODEL_CLASS.sub(" ", message))))  # a model's class
    # names its architecture, not the phase that called it (`…ForConditionalGeneration.forward() got …`)


# A client's error names the request that failed by its URL — httpx's raise_for_status
# (`Server error '503 Service Unavailable' for url 'http://…/generate'`), requests' (`500 Server
# Error: … for url: http://…/v1/chat/completions`), aiohttp's ClientResponseError (`…, url='http://…'`),
# a framework's own report of the call (AReaL's `Endpoint: /areal_update_weights_xccl`): the path
# asks the server for a stage's work, as a server's request line does. A file's URL (a download:
# `…/resolve/main/adapter_config.json`) asks for a file, not for work.
URL_PATH = re.compile(r"""\bhttps?://[^\s/'"]+(?P<path>/[^\s'"?#,)]*)|\b[Ee]ndpoint: ?['"]?(?P<ep>/[\w/.-]+)""")


def failed_request(pb, texts: list[str]) -> int | None:
    """The stage of work the first request an error's lines name by its URL asks for."""
    for m in (m for t in texts for m in URL_PATH.finditer(t)):
        path = m["path"] or m["ep"]
        if "." not in path.rsplit("/", 1)[-1] and (stage := requested_stage(pb, path)) is not None:
            return stage
    return None


def consequence_stage(findings: list[Finding], root: Finding) -> int | None:
    """The stage of the first consequence after `root` that something places (its signature, its
    call path): the failure it reports is the root's, seen from the process that waited on it —
    vLLM's client raises EngineDeadError ("See stack trace (above) for the root cause",
    v1/engine/exceptions.py) in the call that was generating when the engine core died
    (tests/corpus/realworld21/2104, an ms-swift multi-turn rollout). Consequences only (the
    playbooks' `role: downstream`: an engine dead, a communicator aborted, placed by a signature
    or any path); a wrapper's own call path is read earlier, with the error's message (`waited_stage`)."""
    return next((f.stage for f in findings if f.line_no > root.line_no and f.role == "downstream"
                 and f.stage is not None), None)


DUMP_AFTER = 12  # lines: how far after a native crash's report its process's Python stack may begin


def dumped_stage(findings: list[Finding], root: Finding) -> int | None:
    """The stage of the stack the same process dumps just after `root`, a report of a native crash
    with no frames of its own: Ray's workers print a fatal signal twice — abseil's failure handler
    (`*** SIGFPE received at time=… ***` and its `PC: @ 0x…` addresses) and then Python's
    faulthandler (`Fatal Python error: Floating point exception`, `Stack (most recent call first):`
    and the frames the signal hit): tests/corpus/realworld64/6401 (in vLLM's logits), realworld34/3441
    (a reward function), realworld40/4001 (glibc's `free(): double free` before the abort's)."""
    if root.exception:
        return None
    return next((f.stage for f in findings if 0 < f.line_no - root.line_no <= DUMP_AFTER and f.procs & root.procs
                 and f.stage is not None and not f.by_context), None)


def waited_stage(findings: list[Finding], root: Finding) -> int | None:
    """The stage of the first wrapper after `root` that its own call path places: the caller's
    report of the failure (Ray's `RayTaskError(ActorDiedError)` raised in the driver's `ray.get`)
    names the call that waited on the failing process — verl's `fit` → `actor_rollout_wg.update_actor(batch)`
    when a worker vanished under the update (tests/corpus/realworld49/4921: the raylet's report of
    the dead worker, then the driver's; realworld50/5026, the same while verl's `Training Progress`
    bar, open since the first step, said a dispatch was under way); what that process printed just
    before (`context_stage`) may be any phase's words, a process name (`by_context`) its role, not the call."""
    return next((f.stage for f in findings if f.line_no > root.line_no and f.role == "wrapper"
                 and f.stage is not None and not f.by_context), None)


def called_stage(an, root: Finding) -> int | None:
    """The stage the call path of the collective a watchdog timed out in names: the first flight
    recorder's stack torch printed after `root` (`stacks.FLIGHT_HEAD`) — every rank of the group
    waits in that collective."""
    return next((st for frames in flights_after(an.flights, root.line_no)
                 if (st := path_stage(an.pb, [frames])) is not None), None)


def opened_stage(findings: list[Finding], root: Finding) -> int | None:
    """The stage of the last wrapper before `root` that something placed: a process's report of a
    call that failed in it (vLLM's engine core `Invocation of collective_rpc method failed`, after
    the request its server was answering) comes before the client's copy of the error, which
    carries the message in frames that wait on a future (tests/corpus/realworld42/4222)."""
    return next((f.stage for f in reversed(findings) if f.line_no < root.line_no and f.role == "wrapper"
                 and f.stage is not None), None)


def reported_stage(findings: list[Finding], root: Finding) -> int | None:
    """The stage the first wrapper of a failure after `root` places it in by its own signature: the
    caller's report of the failure says in which phase the process that raised it was — vLLM's
    client, `Engine core initialization failed. See root cause above` (v1/engine/utils.py
    wait_for_engine_startup) or `EngineCore failed to start.` (v1/engine/core.py
    run_engine_core), after the engine core's own error (tests/corpus/realworld36/3601: an
    assertion in the EngineCore_DP0 process, whose name says generation)."""
    return next((f.stage for f in findings if f.line_no > root.line_no and f.role in ("wrapper", "downstream")
                 and f.signature is not None), None)


CONTEXT_BACK = 5  # the lines before an error read for the work they name
PATHLIKE = re.compile(r"\S*/\S*")  # a path or a URL: the names of files, not of work
ENDED_WORK = re.compile(r"\b(?:[Cc]ompleted?|[Ff]inished|[Dd]one|[Ss]ucceeded|[Ss]uccessfully|took)\b")


# A line that says the run is loading or building something (LLaMA-Factory's `Load reward model from
# …` before a download's 401: tests/corpus/realworld29/2923; `Loading the rollout engine`,
# `Initializing the reward workers`): before any stage passed, that thing is being set up, whatever
# work it will do — as a message that says something could not be loaded (NOT_LOADED).
LOADING = re.compile(r"(?:^|[\]:] | - )"
                     r"(?:[Ll]oad(?:ing)?|[Bb]uild(?:ing)?|[Cc]reat(?:e|ing)|[Ii]nitiali[sz](?:e|ing)) ")


def context_stage(an, context: list[str], top: int) -> int | None:
    """The stage of work the lines just before an error name, nearest first, when nothing else
    places it: what the run said it was doing is where it failed (`Saving checkpoint to …` then
    the raylet's OOM kill: the update's checkpoint, tests/corpus/realworld10/1106). Their words
    outside what they quote and outside paths (`…/global_step_50/kl_loss_coef/…` names no phase);
    a line that reports a value (`• Avg Reward: 0.43`, a bar's `Compute log probs: 50%`) names
    what it measured, and one that says its work is over (`Number of Trajectories 16/16 completed`)
    names work done, not what the run went on to do: the look stops at either. Before any stage
    passed (`top`), a line that says it loads or builds what it names is that thing's set-up, and
    one that names a set-up call (`before init cache memory allocated: …`, then Ray's report of the
    dead worker: tests/corpus/realworld36/3644) is start-up's."""
    for ln in reversed(_peeled(an, context[-CONTEXT_BACK:])):
        if measures(ln.text) or ENDED_WORK.search(ln.text):
            return None
        words = PATHLIKE.sub(" ", QUOTED.sub(" ", ln.text))
        if (st := named_stage(an.pb, words)) is not None:
            return STAGE_NO["engine_start"] if top == 0 and LOADING.search(ln.text) else st
        if top == 0 and names_set_up(an.pb, words):
            return STAGE_NO["engine_start"]
    return None


def said_stage(an) -> int | None:
    """The stage of work a silent run's last line names — its words, else its process's name
    (`[Rollout] Finish generating sequences.`, `(AgentLoopWorker pid=1) … Execution failed: …`,
    `(RewardManager pid=1) scoring batch 3`): what a run printed last is what it was doing when it stopped.
    Its words outside what it quotes: a quoted name is a symbol, wherever it is used (vLLM's
    `Error in inspecting model architecture 'Qwen2_5_VLForConditionalGeneration'` as its engine is
    built: tests/corpus/realworld34/3442); a request's path names work (`Retrying request to
    /chat/completions`). A line of metrics (a step's report, `rollout 0: {'rollout/rewards': …}`)
    names every phase it measured, not the one under way: it says nothing."""
    lines = _peeled(an)
    if len(lines) > 1 and lines[-1].text.startswith((" ", "\t")) and PY_WARNING.match(lines[-2].text):
        lines.pop()  # a warning's source line (`  warnings.warn(`): the warning said it
    if not lines or reports(lines[-1].text):
        return None
    words = QUOTED.sub(" ", lines[-1].text)  # a quoted name is a symbol's (`'Qwen2_5_VLForConditionalGeneration'`)
    return named_stage(an.pb, words) or (named_stage(an.pb, lines[-1].actor) if lines[-1].actor else None)


# How a verdict's failed stage was found (its `stage_basis`), so that whoever reads it knows how far
# to trust it: `placed` — a signature, the failing call's frames or process, its error family;
# `stack` — where a silent run's main thread waits in a stack dump; `called` — where the collective a
# watchdog timed out in was called, by torch's flight recorder; `under way` — the phase a marker
# or a progress bar says had begun; `words` — what the error's message, the lines before it or a
# silent run's last line name; `lifecycle` — nothing places it: the stage after the last one the log
# shows passed (before any marker, start-up: DESIGN.md's convention), an assumption.
ASSUMED = "lifecycle"
BASIS_SAYS = {"placed": "where the error was raised", "stack": "where its main thread waits",
              "called": "where the collective it waits in was called",
              "under way": "the phase under way", "words": "what its lines name",
              ASSUMED: "assumed: nothing in the log places it"}


def unplaceable(pb, root: Finding, stage: int | None, top: int, floor: int) -> bool:
    """Whether a root cause's stage is left unknown rather than assumed, before any stage passed and
    with nothing placing it: an out-of-memory error, or a supervisor's report that a process died,
    or a device's fault inside a kernel (a signature's `phaseless`). Memory runs out where a run's
    usage peaks — a step's update or log-probs, a rollout's KV cache, host memory filling with a
    replay buffer — and a killer from outside (Ray's memory monitor, the kernel's oom-killer, a
    pod's limit) or an allocator's error with no frames says nothing of which; the start-up the
    lifecycle assumes (DESIGN.md) is not assumed for it. Of the 20 such errors in the labelled
    corpora (tests/corpus, 2026-12-06), 2 were labelled start-up, 5 the update, 2 other stages and
    11 unknowable: `null`, as DESIGN.md's contract allows for a stage the log cannot tell. Ray's
    report of a dead worker or actor (`The actor is dead because its worker process has died …
    potential root causes: (1) … OOM killer … (3) … SIGSEGV`) is the same kind of statement about
    any phase: of the 7 that nothing placed in the corpora, 4 were labelled unknowable, 1 start-up,
    1 a trajectory, 1 the update.
    A kernel that faults on the device (an illegal or misaligned address, its own assert, an NPU
    core's exception) faults where it runs — any phase computes —: of the 7 such faults nothing
    placed (2026-12-08), none was labelled start-up; 4 unknowable, 2 the completion, 1 the update."""
    if stage is not None or top or floor:
        return False
    sig = signature_of(pb, root)
    return root.category == "oom" or (sig is not None and sig.phaseless)


def basis_note(v: dict, brief: bool = False) -> str:
    """How a verdict's failed stage was found, as a parenthesis for one line (` (assumed: …)`);
    `brief`: only when it is assumed, in two words."""
    basis = v.get("stage_basis") if v.get("failed_stage") else None
    if brief:
        return " (stage assumed)" if basis == ASSUMED else ""
    return f" ({BASIS_SAYS[basis]})" if basis in BASIS_SAYS else ""


def silent_stage(an, top: int) -> tuple[int, str]:
    """(stage, basis) a run that went silent hangs in: the work its main thread's stack names,
    when a dump shows it (`waits`); else the phase under way at its end (a during marker, a bar
    still counting), else the work its last lines name, else the one after the last passed (`top`)."""
    if (frames := waits(an)) and (stage := path_stage(an.pb, [frames])):
        return stage, "stack"
    if stage := phase_under_way(an, an.line_no + 1, an.tail):
        return stage, "under way"
    if stage := said_stage(an):
        return stage, "words"
    return min(top + 1, len(STAGES)), ASSUMED


def silent_past(an, now: float | None, top: int) -> bool:
    """Whether the run has printed nothing for longer than the next stage's timeout."""
    timeout = an.pb.timeouts.get(top + 1)
    return bool(now is not None and an.last_ts is not None and timeout and now - an.last_ts > timeout)


# A client that retries a failed request says so, whichever library: urllib3's `Retrying (Retry(total=…))
# after connection broken`, the openai client's `Retrying request to /chat/completions in 0.4 seconds`,
# tenacity's `Retrying … in N seconds`, a framework's own `retrying... (attempt 51/60)` (slime's
# http_utils: tests/corpus/realworld13/1404), or that it is `trying again` (rl-swarm's `Can't retrieve
# round 95 stage 2 rewards; trying again in 5s`: tests/corpus/realworld54/5422). The error it retries
# did not end the run.
RETRYING = re.compile(r"\b(?:[Rr]etrying|[Tt]rying again)\b")
# …unless its count says that was the last try (slime's `retrying... (attempt 60/60, …)`): no retry follows
LAST_ATTEMPT = re.compile(r"\b[Aa]ttempt #?(\d+) ?(?:/|of) ?(\d+)\b")


def retrying(an) -> bool:
    """Whether the run's last lines are a client retrying a request, not for the last time."""
    return any(RETRYING.search(ln.text) and not any(int(k) >= int(n) for k, n in LAST_ATTEMPT.findall(ln.text))
               for ln in _peeled(an)[-3:])


def build_verdict(an, now: float | None) -> dict:
    findings = sorted(an.findings.values(), key=lambda f: f.line_no)
    healthy_update = an.last_healthy_update
    root = root_cause(findings, healthy_update)
    top = max(an.reached, default=0)
    failed: int | None = None
    basis: str | None = None
    if root is not None:
        outcome = root.outcome
        stage = root.stage
        if root.by_context and (reported := reported_stage(findings, root)) is not None:
            stage = reported  # a process's name says what it does once started, not whether it had
        basis = "placed" if stage is not None else None
        if stage is None and root.category == "distributed_comm_hang" and (called := called_stage(an, root)) is not None:
            stage, basis = called, "called"
        # what the error's own message names is the operation it stopped, whatever phase a bar or a
        # marker says had begun (`Error executing tool lookup: Timed out …` while a generation bar counts);
        # so is the call a caller's report of it waited in (`update_actor` while the step's bar counts)
        said = (message_stage(an.pb, root, top) or waited_stage(findings, root) or dumped_stage(findings, root)) \
            if stage is None else None
        if said is None and (stage is None or root.by_context or root.guessed):  # a stage under way says
            # more than a process's name, the callers or a training loop
            # (the lines before its block and the block's first: what was under way when it began)
            if (under := phase_under_way(an, root.first_no or root.line_no, root.context + root.lines[:1],
                                         stage)) is not None:
                stage, basis = under, "under way"
        if stage is None and (stage := said or reduced_stage([root.text]) or context_stage(an, root.context, top)
                              or consequence_stage(findings, root) or opened_stage(findings, root)) is not None:
            # words, not a path: the lifecycle bounds them; an error raised while scoring is the reward function's
            root, basis = replace(root, guessed=True, category=scored_category(root, stage)), "words"
        # the lifecycle bounds only a stage nothing names or a loop's guess: a path's or a signature's stands
        floor = max(first_pass(an.reached, root.line_no), set_up([root.text]), read_records(root, stage)) \
            if stage is None or root.guessed else 0
        failed = lifecycle_stage(stage, top, floor)
        basis = basis if stage == failed else ASSUMED
        if unplaceable(an.pb, root, stage, top, floor):
            failed, basis = None, None
        lsp = top if outcome == "wrong_result" or failed is None else min(top, failed - 1)
        if outcome == "crash" and silent_past(an, now, top) and retrying(an):
            outcome = "hang"  # its last word: a client retrying the request that failed, then nothing
    elif healthy_update is not None:
        outcome, lsp = "pass", top
    else:
        lsp = top
        if silent_past(an, now, top):
            outcome, (failed, basis) = "hang", silent_stage(an, max(top, set_up(an.tail)))
            root = silence(an, now - an.last_ts, failed)
        elif an.line_no == 0:
            outcome = "unknown"
        else:
            outcome = "running"
    statuses = stage_statuses(set(an.reached), failed)
    stages = []
    for no, name in enumerate(STAGES, 1):
        line_no, evidence = an.reached.get(no, (None, None))
        if no == failed and root is not None:
            line_no, evidence = root.line_no, root.text
        stages.append({"name": name, "status": statuses[no], "line_no": line_no,
                       "evidence": redact(evidence) if evidence else None})
    rc = None
    if root is not None:
        rc = root.to_dict() | {"stage": STAGES[failed - 1] if failed else None}
    return {
        "outcome": outcome,
        "last_stage_passed": lsp,
        "failed_stage": failed,
        "stage_basis": basis if failed else None,
        "stages": stages,
        "root_cause": rc,
        "findings": [f.to_dict() for f in findings[:20]],
        "metrics": _metrics_summary(an),
        "warnings": [{"line_no": w[0], "text": redact(w[1]), "count": w[2]} for w in list(an.warnings.values())[:20]],
        "lines": an.line_no,
    }


def _metrics_summary(an) -> dict:
    if not an.metric_steps:
        return {"steps": 0, "last": {}}
    names = sorted(an.metric_last)
    return {"steps": an.metric_steps, "last": {k: an.metric_last[k] for k in names},
            "first": {k: an.metric_first[k] for k in names}}


def jsonable(x):
    """The verdict as strict JSON allows it: NaN and infinities become the strings "nan", "inf"."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, list):
        return [jsonable(v) for v in x]
    return x
