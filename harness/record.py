"""Recording: every session writes `recording.jsonl` beside its journal — each remote call (command
with its output and exit status, file read with its bytes, write, stat), each model request with
its reply and usage, and each reading of the controller's clock and each of its sleeps, in the
order the controller made them. A replay (harness/replay.py) serves them back in that order: the
controller is deterministic given what its calls return, so the same answers make it take the
same decisions, and hours of a night replay in seconds.

One JSON object per line: `n` (1, 2, …), `k` (the kind) and its fields —

    start      one per controller process: format, offline, model, journal_seq (events before it),
               process (the token naming its op directories and claims on the host)
    connect    a reconnection after a dropped connection (its error, if it failed)
    (run, read, write, stat and connect of a worker node of `nodes:` carry `node`, its label)
    run        cmd (or same_cmd: the entry with the same command), cwd, env, timeout,
               result{returncode, stdout, stderr, timed_out; command when it is not cmd}
    read       path, offset, size, data (base64)          write  path, mode, data (base64)
    stat       path, stat{size, mtime, mode, is_dir} | null
    model      messages, tools (names), reply{content, calls, message, usage, cost, retries}
    projected  tokens, money (a budget check's estimate)  clock  t      sleep  s

A call that raised has `error{type, message}` instead of its result; one cut short by a stop
(`harness stop`, Ctrl-C) has `cancelled: true`. Remote calls and model calls carry `t0`/`t1`
(wall clock around the call) for study; a replay never waits on them.

Lines are flushed, not fsync'd: a recording is for study and replay, the journal is what resume
relies on. The recording holds what the host and the model said, secrets included: it stays in
the private session directory (0600); `harness export --scrub` is how it leaves it.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import os
import time
from pathlib import Path

from .remote.transport import CommandResult, FileStat, checked
from .session.journal import Journal

FORMAT = 3


class Recorder:
    def __init__(self, path: Path, clock=time.time):
        self.path, self.clock = Path(path), clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        data = os.pread(fd, os.fstat(fd).st_size, 0)
        if data and not data.endswith(b"\n"):  # a line torn by a killed controller: cut it off
            os.ftruncate(fd, data.rfind(b"\n") + 1)
        self.fh = os.fdopen(fd, "a", encoding="utf-8")
        self.n = data.count(b"\n")
        self.cmds: dict[str, int] = {}  # command -> the entry that holds its text

    def add(self, kind: str, **fields) -> None:
        self.n += 1
        entry = {"n": self.n, "k": kind, **fields}
        self.fh.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.fh.flush()

    def call(self, kind: str, t0: float, **fields) -> None:
        """A remote or model call that ended now. A command run before (the launcher's status
        script, once a second for hours) is stored as `same_cmd` = the entry holding its text."""
        if kind == "run":
            if (first := self.cmds.get(fields["cmd"])) is not None:
                fields = {"same_cmd": first, **{k: v for k, v in fields.items() if k != "cmd"}}
            else:
                self.cmds[fields["cmd"]] = self.n + 1
        self.add(kind, t0=round(t0, 6), t1=round(self.clock(), 6), **fields)

    def close(self) -> None:
        self.fh.close()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _failure(e: BaseException) -> dict:
    if isinstance(e, (asyncio.CancelledError, KeyboardInterrupt)):
        return {"cancelled": True}
    return {"error": {"type": type(e).__name__, "message": str(e)}}


async def _recorded(rec: Recorder, kind: str, call: dict, coro, answer=lambda r: {}):
    """Await `coro` and record the call: with `answer(result)`, or how it failed."""
    t0 = rec.clock()
    try:
        result = await coro
    except BaseException as e:
        rec.call(kind, t0, **call, **_failure(e))
        raise
    rec.call(kind, t0, **call, **answer(result))
    return result


class RecordingTransport:
    """A Transport that records every call it passes to `inner`; a worker node's calls carry
    `node` (its label), the head's none."""

    def __init__(self, inner, recorder: Recorder, node: str | None = None):
        self.inner, self.rec = inner, recorder
        self.name = inner.name
        self.tag = {"node": node} if node else {}

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        def answer(r: CommandResult) -> dict:
            return {"result": {k: v for k, v in dataclasses.asdict(r).items() if not (k == "command" and v == cmd)}}
        r = await _recorded(self.rec, "run", {**self.tag, "cmd": cmd, "cwd": cwd, "env": env, "timeout": timeout},
                            self.inner.run(cmd, timeout=timeout, check=False, env=env, cwd=cwd), answer)
        return checked(r, check)

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        return await _recorded(self.rec, "read", {**self.tag, "path": path, "offset": offset, "size": size},
                               self.inner.read(path, offset, size), lambda data: {"data": _b64(data)})

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        await _recorded(self.rec, "write", {**self.tag, "path": path, "mode": mode, "data": _b64(data)},
                        self.inner.write(path, data, mode))

    async def stat(self, path: str) -> FileStat | None:
        return await _recorded(self.rec, "stat", {**self.tag, "path": path}, self.inner.stat(path),
                               lambda st: {"stat": dataclasses.asdict(st) if st else None})

    async def close(self) -> None:
        await self.inner.close()


def recording_opener(connect, recorder: Recorder, node: str | None = None):
    """`reopen()` for the reconnecting layer: `connect()` again, recorded as a `connect` entry,
    and the new connection recorded like the first."""
    async def reopen():
        inner = await _recorded(recorder, "connect", {"node": node} if node else {}, connect())
        return RecordingTransport(inner, recorder, node)
    return reopen


class RecordingModel:
    """A Model that records each request (messages, tools) with its reply and usage, and each
    budget estimate it gives."""

    def __init__(self, inner, recorder: Recorder):
        self.inner, self.rec = inner, recorder
        self.name, self.probes = inner.name, getattr(inner, "probes", False)

    def projected(self, messages: list[dict]) -> tuple[int, float]:
        tokens, money = self.inner.projected(messages)
        self.rec.add("projected", tokens=tokens, money=money)
        return tokens, money

    async def complete(self, messages: list[dict], tools: list[dict]):
        def answer(reply) -> dict:
            return {"reply": {"content": reply.content, "calls": [dataclasses.asdict(c) for c in reply.tool_calls],
                              "message": reply.message, "usage": dataclasses.asdict(reply.usage),
                              "cost": reply.cost, "retries": reply.retries, "adapted": list(reply.adapted)}}
        return await _recorded(self.rec, "model", {"messages": messages, "tools": [t["function"]["name"] for t in tools]},
                               self.inner.complete(messages, tools), answer)


class RecordingTime:
    """The controller's clock and sleep, recorded: a replay hands back the same readings, so
    every decision that depends on time (settle, stall, budgets) comes out the same."""

    def __init__(self, recorder: Recorder, clock=time.time, sleep=asyncio.sleep):
        self.rec, self._clock, self._sleep = recorder, clock, sleep

    def clock(self) -> float:
        t = self._clock()
        self.rec.add("clock", t=t)
        return t

    async def sleep(self, seconds: float) -> None:
        try:
            await self._sleep(seconds)
        except BaseException as e:
            self.rec.add("sleep", s=seconds, **_failure(e))
            raise
        self.rec.add("sleep", s=seconds)


def read_recording(path: Path) -> list[dict]:
    """The entries, each whole (`same_cmd` resolved to `cmd`); a torn last line (the controller
    killed mid-write) is left out, a corrupt one before it is a JournalError naming the line."""
    entries, cmds = [], {}
    for e in Journal.read(path) if Path(path).exists() else []:
        if "same_cmd" in e:
            e = {"cmd": cmds[e.pop("same_cmd")], **e}
        elif e.get("k") == "run":
            cmds[e["n"]] = e["cmd"]
        entries.append(e)
    return entries
