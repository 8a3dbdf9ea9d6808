"""Recording: every session writes `recording.jsonl` beside its journal — each remote call (command
with its output and exit status, file read with its bytes, write, stat) and each model request
with its reply and usage, with the controller's clock at start and end. It is what a replay
(issue 7) will serve back; log bytes per attempt and their arrival times are the recorded reads.

The wrappers delegate to the real Transport / Model and append one JSON line per call (flushed,
not fsync'd: a recording is for study and replay, the journal is what resume relies on).
The recording holds what the host and the model said, secrets included: it stays in the private
session directory; `harness export --scrub` (next) is how it leaves it.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import time
from pathlib import Path

from .remote.transport import CommandResult, FileStat, checked


class Recorder:
    def __init__(self, path: Path, clock=time.time):
        self.path, self.clock = Path(path), clock
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.fh = os.fdopen(fd, "a", encoding="utf-8")
        self.n = sum(1 for _ in open(self.path, encoding="utf-8"))

    def add(self, kind: str, t0: float, **fields) -> None:
        self.n += 1
        entry = {"n": self.n, "k": kind, "t0": round(t0, 6), "t1": round(self.clock(), 6), **fields}
        self.fh.write(json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.fh.flush()

    def close(self) -> None:
        self.fh.close()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class RecordingTransport:
    """A Transport that records every call it passes to `inner`."""

    def __init__(self, inner, recorder: Recorder):
        self.inner, self.rec = inner, recorder
        self.name = inner.name

    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        t0 = self.rec.clock()
        try:
            r = await self.inner.run(cmd, timeout=timeout, check=False, env=env, cwd=cwd)
        except Exception as e:
            self.rec.add("run", t0, cmd=cmd, cwd=cwd, env=env, timeout=timeout, error=f"{type(e).__name__}: {e}")
            raise
        self.rec.add("run", t0, cmd=cmd, cwd=cwd, env=env, timeout=timeout, result=dataclasses.asdict(r))
        return checked(r, check)

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        t0 = self.rec.clock()
        try:
            data = await self.inner.read(path, offset, size)
        except Exception as e:
            self.rec.add("read", t0, path=path, offset=offset, size=size, error=f"{type(e).__name__}: {e}")
            raise
        self.rec.add("read", t0, path=path, offset=offset, size=size, data=_b64(data))
        return data

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        t0 = self.rec.clock()
        try:
            await self.inner.write(path, data, mode)
        except Exception as e:
            self.rec.add("write", t0, path=path, mode=mode, data=_b64(data), error=f"{type(e).__name__}: {e}")
            raise
        self.rec.add("write", t0, path=path, mode=mode, data=_b64(data))

    async def stat(self, path: str) -> FileStat | None:
        t0 = self.rec.clock()
        st = await self.inner.stat(path)
        self.rec.add("stat", t0, path=path, stat=dataclasses.asdict(st) if st else None)
        return st

    async def close(self) -> None:
        await self.inner.close()


class RecordingModel:
    """A Model that records each request (messages, tools) and its reply and usage."""

    def __init__(self, inner, recorder: Recorder):
        self.inner, self.rec = inner, recorder
        self.name = inner.name

    def projected(self, messages: list[dict]) -> tuple[int, float]:
        return self.inner.projected(messages)

    async def complete(self, messages: list[dict], tools: list[dict]):
        t0 = self.rec.clock()
        try:
            reply = await self.inner.complete(messages, tools)
        except Exception as e:
            self.rec.add("model", t0, messages=messages, tools=[t["function"]["name"] for t in tools],
                         error=f"{type(e).__name__}: {e}")
            raise
        self.rec.add("model", t0, messages=messages, tools=[t["function"]["name"] for t in tools],
                     reply=reply.message, usage=dataclasses.asdict(reply.usage), cost=reply.cost,
                     retries=reply.retries)
        return reply


def read_recording(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
