"""Follow log files on a host from a byte offset: new complete lines are pushed to the caller
soon after they are written; truncation and rotation are noticed; the offset is the caller's
to store, so a follow resumed after a reconnect neither loses nor repeats a byte.

Polling (stat, then read from the offset) over the transport's open connection: with the
persistent SFTP session a poll costs about a millisecond (one stat when nothing is new), so
`follow_host` looks every 0.03 s (a line reaches the caller within ~35 ms on a LAN) and, while a
backlog is there (after a reconnect), reads on without pausing.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from .. import aio
from .transport import Transport

HEAD = 256  # bytes of the file's start kept to recognise a rotated (replaced) file


@dataclass
class Cursor:
    """Where a follow stands in one file. `offset` counts bytes delivered (whole lines only)."""

    path: str
    offset: int = 0
    head: bytes = b""  # the first bytes seen, to tell the same file from a new one


@dataclass
class Chunk:
    path: str
    offset: int  # byte offset of `data` in the file
    data: bytes  # whole lines (ends with a newline), or the final partial line at `flush`
    reset: str = ""  # "truncated" or "rotated" when the file started over before this chunk
    more: bool = False  # the read was capped at max_bytes: more is there already (catching up)


async def poll(t: Transport, cur: Cursor, max_bytes: int = 16 << 20) -> Chunk | None:
    """One look at the file: the new complete lines since `cur.offset`, or None."""
    st = await t.stat(cur.path)
    if st is None:
        return None
    if st.size == cur.offset and cur.offset:  # nothing new; a same-size replacement shows once it grows
        return None
    reset = ""
    if st.size < cur.offset:
        reset = "truncated"
    elif cur.head and cur.offset:
        head = await t.read(cur.path, 0, min(len(cur.head), st.size))
        if head != cur.head[: len(head)]:
            reset = "rotated"
    if reset:
        cur.offset, cur.head = 0, b""
    if st.size == cur.offset:
        return Chunk(cur.path, cur.offset, b"", reset) if reset else None
    data = await t.read(cur.path, cur.offset, min(st.size - cur.offset, max_bytes))
    if not cur.head:
        cur.head = (data[:HEAD] if cur.offset == 0 else cur.head)
    cut = data.rfind(b"\n") + 1
    if cut == 0:
        return Chunk(cur.path, cur.offset, b"", reset) if reset else None
    chunk = Chunk(cur.path, cur.offset, data[:cut], reset, more=st.size - cur.offset > max_bytes)
    cur.offset += cut
    return chunk


async def follow(t: Transport, cursors: list[Cursor], interval: float = 0.2, stop: asyncio.Event | None = None):
    """Yield Chunks from several files on one host until `stop` is set."""
    stop = stop or asyncio.Event()
    while not stop.is_set():
        for cur in cursors:
            chunk = await poll(t, cur)
            if chunk is not None:
                yield chunk
        try:
            await aio.wait_for(stop.wait(), interval)
        except asyncio.TimeoutError:
            pass


async def follow_host(spec, cursors: list[Cursor], interval: float = 0.03, stop: asyncio.Event | None = None,
                      backoff: tuple[float, float] = (0.1, 5.0), max_failures: int | None = None):
    """Like `follow`, on a host of its own connection that survives being lost (network drop,
    sshd restart, a sleeping laptop): reconnect with backoff, resume from the cursors. The
    remote run never notices. A host-key problem is never retried; `max_failures` bounds how
    many failed attempts in a row are tolerated (None: until stopped)."""
    from ..errors import HostKeyError, TransportError
    from .transport import connect

    stop = stop or asyncio.Event()
    t, delay, failures = None, backoff[0], 0
    try:
        while not stop.is_set():
            try:
                if t is None:
                    t = await connect(spec)
                more = False
                for cur in cursors:
                    chunk = await poll(t, cur)
                    if chunk is not None:
                        more |= chunk.more
                        yield chunk
                delay, failures, pause = backoff[0], 0, 0 if more else interval  # catching up: at once
            except HostKeyError:
                raise
            except TransportError:
                failures += 1
                if max_failures is not None and failures > max_failures:
                    raise
                await _close(t)
                t, pause, delay = None, delay, min(delay * 2, backoff[1])
            try:
                await aio.wait_for(stop.wait(), pause)
            except asyncio.TimeoutError:
                pass
    finally:
        await _close(t)


async def _close(t) -> None:
    if t is not None:
        try:
            await t.close()
        except Exception:  # noqa: BLE001 - the connection is already gone
            pass


async def follow_hosts(hosts: list[tuple[object, list[Cursor]]], interval: float = 0.03,
                       stop: asyncio.Event | None = None, **kw):
    """Follow logs on several hosts at once: yields (host spec, Chunk) as they come, each host
    on its own resilient connection (`follow_host`)."""
    stop = stop or asyncio.Event()
    queue: asyncio.Queue = asyncio.Queue()

    async def one(spec, cursors):
        try:
            async for chunk in follow_host(spec, cursors, interval, stop, **kw):
                await queue.put((spec, chunk))
        finally:
            await queue.put((spec, None))

    tasks = [asyncio.create_task(one(spec, cursors)) for spec, cursors in hosts]
    try:
        open_hosts = len(tasks)
        while open_hosts:
            spec, chunk = await queue.get()
            if chunk is None:
                open_hosts -= 1
            else:
                yield spec, chunk
    finally:
        stop.set()
        for t in tasks:
            if not t.done():
                t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for t in tasks:  # a host that failed for good (e.g. its host key) is the caller's to know
            if not t.cancelled() and t.exception() is not None:
                raise t.exception()
