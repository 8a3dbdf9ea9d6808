"""The recording served back in order. `Tape.take(kind, call)` hands the controller the next
recorded entry when it is the same call the recorded controller made (same command, path, bytes
written, model request…), and stops the replay with a `Divergence` — what was expected, what
came, and a diff of the two — when it is not. ReplayTransport, ReplayModel and ReplayTime are the
controller's host, model and clock made of a tape: nothing runs, nothing is sent, nothing sleeps.

Divergence and Cut are BaseExceptions, like CancelledError: the controller turns the errors of
its calls into text for the model or into verdicts, and a replay that has left its recording must
not be mistaken for a host that failed.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import difflib
import json

from .. import errors
from ..agent.model import Reply, ToolCall, Usage
from ..remote.transport import CommandResult, FileStat, checked

KEYS = {"run": ("node", "cmd", "cwd", "env", "timeout"), "read": ("node", "path", "offset", "size"),
        "write": ("node", "path", "mode", "data"), "stat": ("node", "path"), "model": ("messages", "tools"),
        "projected": (), "clock": (), "sleep": ("s",), "connect": ("node",)}


class Divergence(BaseException):
    """The replayed controller made a call the recording does not have at this point."""

    def __init__(self, n: int, expected: dict | None, actual: dict | None, where: str):
        self.n, self.expected, self.actual, self.where = n, expected, actual, where
        super().__init__(self.render())

    def render(self, max_lines: int = 40) -> str:
        exp, act = describe(self.expected), describe(self.actual)
        head = [f"diverged at recorded call {self.n} ({self.where}):",
                f"  recorded: {exp.splitlines()[0]}", f"  replayed: {act.splitlines()[0]}"]
        if "\n" not in exp and "\n" not in act:  # the two lines above say it all
            return "\n".join(head)
        diff = list(difflib.unified_diff(exp.splitlines(), act.splitlines(), "recorded", "replayed", lineterm="", n=2))
        if len(diff) > max_lines:
            diff = diff[:max_lines] + [f"… {len(diff) - max_lines} more diff lines"]
        return "\n".join(head + [f"  {ln}" for ln in diff])


class Cut(BaseException):
    """The recording ends here without the session ending: the recorded controller was killed."""


def describe(entry: dict | None) -> str:
    """An entry (or a call) as text whose lines diff well: the call on the first line, then its
    long parts (the bytes written, the model's messages) line by line."""
    if entry is None:
        return "(nothing: the session ended)"
    k = entry.get("k")
    if k == "run":
        env = f" env={json.dumps(entry['env'], sort_keys=True)}" if entry.get("env") else ""
        first = entry["cmd"].split("\n", 1)[0]
        first = first if len(first) <= 100 else first[:99] + "…"
        return f"run `{first}` (cwd={entry.get('cwd')}, timeout={entry.get('timeout')}{env}):\n{entry['cmd']}"
    if k == "write":
        data = base64.b64decode(entry["data"]).decode("utf-8", "replace")
        return f"write {entry['path']} (mode={entry.get('mode')}, {len(data)} chars):\n{data}"
    if k == "read":
        return f"read {entry['path']} from {entry['offset']} (size={entry.get('size')})"
    if k == "model":
        return f"model request ({len(entry['messages'])} messages, tools {entry['tools']}):\n" + \
            json.dumps(entry["messages"], indent=1, ensure_ascii=False)
    if k == "projected":
        return "projected (the budget check before a model request)"
    fields = {key: entry[key] for key in KEYS.get(k, ()) if key in entry}
    return f"{k} {json.dumps(fields)}" if fields else str(k)


class Tape:
    """One controller process's entries, taken in order. `aliases` (replayed -> recorded text)
    is for a scrubbed fixture: a failure fingerprint is a hash of the root-cause text, so one
    whose text held a scrubbed value differs from the recorded one; the replay maps it back."""

    def __init__(self, entries: list[dict], where=lambda: "", aliases: dict[str, str] | None = None):
        self.entries, self.i, self.where, self.now = entries, 0, where, None
        self.broken: BaseException | None = None
        self.aliases = aliases if aliases is not None else {}

    @property
    def left(self) -> list[dict]:
        return self.entries[self.i:]

    def take(self, kind: str, call: dict) -> dict:
        if self.broken:  # the session's cleanup after a divergence: the same answer again
            raise self.broken
        if self.i >= len(self.entries):
            self.broken = Cut()
            raise self.broken
        e = self.entries[self.i]
        if self.aliases:
            call = {key: _aliased(value, self.aliases, key == "data") for key, value in call.items()}
        if e["k"] != kind or any(e.get(key) != call.get(key) for key in KEYS[kind]):
            self.broken = Divergence(e.get("n", self.i + 1), e, {"k": kind, **call}, self.where())
            raise self.broken
        self.i += 1
        if e.get("cancelled"):  # the recorded controller was stopped during this call
            raise asyncio.CancelledError()
        if "error" in e:
            raise _rebuild(e["error"])
        return e


def _aliased(value, aliases: dict[str, str], b64: bool = False):
    """`value` with every alias replaced, in strings however deep (and in base64 bytes)."""
    if b64 and isinstance(value, str):
        return base64.b64encode(_aliased(base64.b64decode(value).decode("utf-8", "surrogateescape"),
                                         aliases).encode("utf-8", "surrogateescape")).decode()
    if isinstance(value, str):
        for new, old in aliases.items():
            value = value.replace(new, old)
        return value
    if isinstance(value, list):
        return [_aliased(v, aliases) for v in value]
    if isinstance(value, dict):
        return {k: _aliased(v, aliases) for k, v in value.items()}
    return value


def _rebuild(err: dict) -> Exception:
    """The recorded exception, of the same class when it is one of ours or a builtin one (the
    controller handles FileNotFoundError, TransportError… differently)."""
    cls = getattr(errors, err["type"], None) or getattr(builtins, err["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = errors.HarnessError
    exc = cls.__new__(cls)
    Exception.__init__(exc, err["message"])
    return exc


class ReplayTransport:
    """The head (`node` None) or a worker node, as recorded."""

    def __init__(self, tape: Tape, name: str = "replay", node: str | None = None):
        self.tape, self.name, self.node = tape, name, node

    def _take(self, kind: str, call: dict) -> dict:
        return self.tape.take(kind, {"node": self.node, **call} if self.node else call)

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        e = self._take("run", {"cmd": cmd, "cwd": cwd, "env": env, "timeout": timeout})
        return checked(CommandResult(**{"command": cmd, **e["result"]}), check)

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        return base64.b64decode(self._take("read", {"path": path, "offset": offset, "size": size})["data"])

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        self._take("write", {"path": path, "mode": mode, "data": base64.b64encode(data).decode()})

    async def stat(self, path: str) -> FileStat | None:
        st = self._take("stat", {"path": path})["stat"]
        return FileStat(**st) if st else None

    async def close(self) -> None:
        pass

    async def reopen(self) -> "ReplayTransport":
        """A reconnection, as recorded (raising the recorded error when it failed)."""
        self._take("connect", {})
        return self


class ReplayModel:
    def __init__(self, tape: Tape, name: str, probes: bool = False):
        self.tape, self.name, self.probes = tape, name, probes

    def projected(self, messages: list[dict]) -> tuple[int, float]:
        e = self.tape.take("projected", {})
        return e["tokens"], e["money"]

    async def complete(self, messages: list[dict], tools: list[dict]) -> Reply:
        r = self.tape.take("model", {"messages": messages, "tools": [t["function"]["name"] for t in tools]})["reply"]
        return Reply(r["content"], [ToolCall(**c) for c in r["calls"]], Usage(**r["usage"]), r["cost"],
                     r["message"], r["retries"], tuple(r.get("adapted", ())))


class ReplayTime:
    """The recorded clock: each reading is the one the recorded controller got; sleeping is free."""

    def __init__(self, tape: Tape):
        self.tape = tape

    def clock(self) -> float:
        self.tape.now = self.tape.take("clock", {})["t"]
        return self.tape.now

    async def sleep(self, seconds: float) -> None:
        self.tape.take("sleep", {"s": seconds})
