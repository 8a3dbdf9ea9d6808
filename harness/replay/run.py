"""Replay a fixture (or a session directory): the real Session, run once per recorded controller
process against that process's tape, on the recorded clock; then what it did is compared with
what the recorded controller did.

    outcome = await replay_fixture(Path("fixtures/sessions/all-faults"), scratch)
    outcome.ok     # the same verdicts, the same tool calls, the same end, and no divergence

Each process replays from the journal as the recorded process found it (its `start` entry says how
many events that was), so a session that was continued, stopped, or killed and resumed replays
process by process. A process the recording shows was killed (its tape ends with the session
still going) is replayed up to that point.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadInput
from ..record import FORMAT, read_recording
from ..session.controller import Session
from ..session.journal import Journal
from ..spec import load_spec
from .tape import Cut, Divergence, ReplayModel, ReplayTime, ReplayTransport, Tape


@dataclass
class Outcome:
    fixture: str
    session: str
    recorded_end: str | None
    replayed_end: str | None = None
    calls: int = 0  # recorded entries served
    processes: int = 0
    divergence: str | None = None
    differences: list[str] = field(default_factory=list)
    seconds: float = 0.0
    virtual_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.divergence is None and not self.differences


def load_fixture(path: Path) -> tuple:
    """(spec, recorded journal events, recording entries) of a fixture or session directory."""
    path = Path(path)
    for name in ("spec.yaml", "journal.jsonl", "recording.jsonl"):
        if not (path / name).is_file():
            raise BadInput(f"{path} is not a recorded session: it has no {name} "
                           "(give a directory written by `harness export`, or a session's directory)")
    entries = read_recording(path / "recording.jsonl")
    if not entries or entries[0].get("k") != "start" or entries[0].get("format") != FORMAT:
        raise BadInput(f"{path}/recording.jsonl is not a format-{FORMAT} recording "
                       "(recorded by an older harness); re-record the session")
    return load_spec(path / "spec.yaml"), Journal.read(path / "journal.jsonl"), entries


def processes(entries: list[dict]) -> list[tuple[dict, list[dict]]]:
    """The recording split by controller process: (its start entry, its calls)."""
    out: list[tuple[dict, list[dict]]] = []
    for e in entries:
        if e["k"] == "start":
            out.append((e, []))
        else:
            out[-1][1].append(e)
    return out


async def replay_fixture(path: Path, scratch: Path, ui=None) -> Outcome:
    """Replay the fixture at `path` in `scratch`/<session id> (the session's own name: run ids and
    ledger refs are made of it). `ui(ev, state, seconds)` sees each replayed event at its recorded
    time, in seconds since the recording began."""
    spec, recorded, entries = load_fixture(path)
    manifest = Path(path) / "fixture.json"
    scrubbed = manifest.is_file() and json.loads(manifest.read_text(encoding="utf-8")).get("scrubbed") is True
    aliases: dict[str, str] | None = {} if scrubbed else None
    sid = next((e["session"] for e in recorded if e["type"] == "session"), Path(path).name)
    ends = [e for e in recorded if e["type"] == "end"]
    out = Outcome(str(path), sid, ends[-1]["reason"] if ends else None)
    directory = Path(scratch) / sid
    directory.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    origin = next((e["t"] for e in entries if e["k"] == "clock"), 0.0)
    view = (lambda ev, st, now: ui(ev, st, None if now is None else now - origin)) if ui else None
    procs = processes(entries)
    for i, (start, calls) in enumerate(procs):
        upto = procs[i + 1][0]["journal_seq"] if i + 1 < len(procs) else None
        mine = [e for e in recorded if e["seq"] > start["journal_seq"] and (upto is None or e["seq"] <= upto)]
        out.processes += 1
        replayed, tape = await _one_process(spec, directory, start, calls, recorded, mine, view, aliases)
        out.calls += tape.i
        first = next((c for c in calls if c["k"] == "clock"), None)
        if first and tape.now is not None:
            out.virtual_seconds += tape.now - first["t"]
        if isinstance(tape.broken, Divergence):
            out.divergence = tape.broken.render()
            break
        cut = isinstance(tape.broken, Cut)
        out.differences += _compare(mine, replayed, cut, i + 1 if len(procs) > 1 else None, aliases or {})
        if tape.left and not tape.broken:
            out.divergence = Divergence(tape.left[0]["n"], tape.left[0], None, "after the replayed session ended").render()
            break
    ended = [e for e in Journal.read(directory / "journal.jsonl") if e["type"] == "end"]
    out.replayed_end = ended[-1]["reason"] if ended and not out.divergence else None
    out.seconds = time.monotonic() - t0
    return out


async def _one_process(spec, directory: Path, start: dict, calls: list[dict], recorded: list[dict],
                       mine: list[dict], ui, aliases: dict[str, str] | None) -> tuple[list[dict], Tape]:
    """Replay one controller process from the journal it started with; returns its new events.
    `aliases` (a scrubbed fixture): each replayed verdict's fingerprint maps to the recorded one."""
    with open(directory / "journal.jsonl", "w", encoding="utf-8") as fh:  # the journal as it found it
        fh.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in recorded if e["seq"] <= start["journal_seq"])
    ses: Session | None = None
    tape = Tape(calls, lambda: _where(ses), aliases)
    rt = ReplayTime(tape)
    model = ReplayModel(tape, start["model"], start.get("probes", False)) if start.get("model") else None
    fingerprints = {e["attempt"]: e["fingerprint"] for e in mine if e["type"] == "verdict"}

    def view(ev, st):
        if aliases is not None and ev["type"] == "verdict" and ev["attempt"] in fingerprints:
            aliases.setdefault(ev["fingerprint"], fingerprints[ev["attempt"]])
        if ui:
            ui(ev, st, tape.now)
    transport = ReplayTransport(tape)
    nodes = [(node, t, t.reopen) for node in spec.nodes for t in [ReplayTransport(tape, node=node.label)]]
    ses = Session(spec, directory, transport, model, offline=start["offline"], clock=rt.clock, sleep=rt.sleep,
                  ui=view, reopen=transport.reopen, process=start.get("process"), nodes=nodes)
    end = next((e for e in mine if e["type"] == "end"), None)
    if end and end["reason"] == "stopped":  # the stop came from outside: `harness stop` or Ctrl-C
        ses.keep_on_stop, ses.stop_detail = bool(end.get("kept_run")), end["detail"]
    try:
        await ses.run()
    except (Divergence, Cut):
        pass
    except asyncio.CancelledError:  # a recorded stop, raised at the call it was recorded in
        if not (end and end["reason"] == "stopped"):
            raise
    except Exception:  # a recorded controller error (a model refusing, a ledger failing), raised again
        if not (end and end["reason"] == "error"):
            raise
    finally:
        ses.journal.close()
    return [e for e in ses.journal.events() if e["seq"] > start["journal_seq"]], tape


def _where(ses) -> str:
    if ses is None or not ses.state.attempts:
        return "before the first attempt"
    a = ses.state.attempts[-1]
    if a.verdict is None:
        return f"attempt {a.n}, while it ran"
    return f"attempt {a.n}, after its verdict: {a.verdict['outcome']}" + \
        (f" at stage {a.verdict['failed_stage']}" if a.verdict.get("failed_stage") else "")


# What must come out the same: the verdicts, the tool calls (and the fixes and cleanups that
# stand in for them), how the session ended.
SAME = {"verdict": ("attempt", "outcome", "failed_stage", "last_stage_passed", "reason", "fingerprint"),
        "tool": ("attempt", "step", "name", "arguments", "refused", "end"),
        "fix": ("attempt", "signature", "kind", "applied", "already", "files"),
        "cleanup": ("attempt", "commands", "ok"),
        "unreachable": ("attempt",), "reachable": ("attempt",),
        "end": ("reason",)}


def key_events(events: list[dict]) -> list[dict]:
    return [{"type": e["type"], **{k: e.get(k) for k in SAME[e["type"]]}} for e in events if e["type"] in SAME]


def _compare(recorded: list[dict], replayed: list[dict], cut: bool, process: int | None,
             aliases: dict[str, str]) -> list[str]:
    """Where the replayed events differ from the recorded ones (a killed process: up to its cut)."""
    a, b = key_events(recorded), key_events(replayed)
    for e in b:
        if e["type"] == "verdict":
            e["fingerprint"] = aliases.get(e["fingerprint"], e["fingerprint"])
    if cut:  # the recorded process was killed: its events end where its tape did
        b = b[:len(a)]
    out, tag = [], f"process {process}: " if process else ""
    for i in range(max(len(a), len(b))):
        x, y = (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
        if x != y:
            out.append(f"{tag}event {i + 1}: recorded {_show(x)}\n{' ' * (len(tag) + 7 + len(str(i + 1)))}replayed {_show(y)}")
    return out


def _show(e: dict | None) -> str:
    return "(none)" if e is None else json.dumps(e, ensure_ascii=False)

