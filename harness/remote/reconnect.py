"""The session's one way to its host: a Transport that survives losing its connection.

    link = Reconnecting(transport, reopen, clock=clock, sleep=sleep, grace=1800, on_change=view)
    await link.run("…")    # the connection drops: reconnect with backoff, then the same call again

Every remote call a session makes (launch, poll, stat, read, stop, cleanup, ledger, the agent's
tools, evidence) goes through here. A ConnectionLost is weather: the connection is closed and
reopened with exponential backoff (1 s doubling to 30 s) and the call is made again; only a host
still unreachable `grace` seconds after the first failure raises HostUnreachable. Anything else
(a host key, an authentication failure) is raised at once. A call that hangs on a dead link is
bounded too — files by `op_timeout`, a command by its own timeout plus `op_timeout` — and past
that the link counts as lost.

Calls are made again exactly as they were, so every call must be safe to repeat: reads, stats and
atomic writes are; a command that is not is sent guarded (once.py: run once, a repeat attaches to
the first run) or is idempotent by construction (the launcher's claim and detach scripts).

`on_change("down", since=, error=)` is called when an outage begins, `on_change("up", after=)`
when it ends; the clock and sleep are the session's (recorded), so a replay retraces an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from .. import aio
from ..errors import ConnectionLost, HostUnreachable
from .transport import CommandResult, FileStat, checked

BACKOFF = (1.0, 30.0)  # first and longest pause between reconnection attempts, seconds


class Reconnecting:
    def __init__(self, transport, reopen=None, *, clock=time.time, sleep=asyncio.sleep, grace: float = 1800.0,
                 op_timeout: float = 120.0, backoff: tuple[float, float] = BACKOFF, on_change=None):
        self.t, self.reopen, self.clock, self.sleep = transport, reopen, clock, sleep
        self.name = transport.name
        self.grace, self.op_timeout, self.backoff = grace, op_timeout, backoff
        self.on_change = on_change or (lambda what, **kw: None)
        self.down_since: float | None = None  # when the current outage began
        self.down_total = 0.0  # seconds of outages that ended
        self.error = ""  # why the link is (or was last) down
        self._gen, self._lock = 0, asyncio.Lock()

    def down_seconds(self, now: float) -> float:
        """Seconds without a connection so far, the current outage included."""
        return self.down_total + (now - self.down_since if self.down_since is not None else 0.0)

    # ------------------------------------------------------------------ the Transport contract
    async def run(self, cmd: str, *, timeout: float | None = None, check: bool = False,
                  env: dict[str, str] | None = None, cwd: str | None = None) -> CommandResult:
        bound = None if timeout is None else timeout + self.op_timeout
        r = await self._call(lambda t: t.run(cmd, timeout=timeout, check=False, env=env, cwd=cwd), bound)
        return checked(r, check)

    async def read(self, path: str, offset: int = 0, size: int | None = None) -> bytes:
        return await self._call(lambda t: t.read(path, offset, size), self.op_timeout)

    async def write(self, path: str, data: bytes, mode: int | None = None) -> None:
        await self._call(lambda t: t.write(path, data, mode), self.op_timeout)

    async def stat(self, path: str) -> FileStat | None:
        return await self._call(lambda t: t.stat(path), self.op_timeout)

    async def close(self) -> None:
        if self.t is not None:
            await self.t.close()

    # ------------------------------------------------------------------ losing and finding the link
    async def _call(self, fn, bound: float | None):
        while True:
            gen, t = self._gen, self.t
            if t is None:
                await self._reconnect(gen)
                continue
            try:
                return await (fn(t) if bound is None else aio.wait_for(fn(t), bound))
            except ConnectionLost as e:
                await self._lost(gen, e)
            except asyncio.TimeoutError:  # no answer at all: a dead link the keepalives missed
                await self._lost(gen, ConnectionLost(f"{self.name}: no answer in {bound:g}s"))

    async def _lost(self, gen: int, e: ConnectionLost) -> None:
        if self.reopen is None:
            raise e
        if self.down_since is None:
            self.down_since, self.error = self.clock(), " ".join(str(e).split())
            self.on_change("down", since=self.down_since, error=self.error)
        await self._reconnect(gen)

    async def _reconnect(self, gen: int) -> None:
        async with self._lock:
            if gen != self._gen:  # another call reconnected meanwhile
                return
            old, self.t = self.t, None
            if self.down_since is None:
                self.down_since = self.clock()
            if old is not None:
                with contextlib.suppress(Exception):
                    await aio.wait_for(old.close(), 10)
            delay = self.backoff[0]
            while True:
                try:
                    self.t = await self.reopen()
                    break
                except ConnectionLost as e:
                    self.error = " ".join(str(e).split())
                left = self.grace - (self.clock() - self.down_since)
                if left <= 0:
                    raise HostUnreachable(f"{self.name} unreachable for {_span(self.grace)} (connection.grace): "
                                          f"{self.error}")
                await self.sleep(min(delay, left))
                delay = min(delay * 2, self.backoff[1])
            self._gen += 1
            after = self.clock() - self.down_since
            self.down_total += after
            self.down_since = None
            self.on_change("up", after=after)


def _span(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
