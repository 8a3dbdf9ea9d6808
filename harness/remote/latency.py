"""`harness bench remote`: latency of small operations through a transport, and of following a
log, as p50/p95 in ms. A figure printer; nothing here is asserted by tests."""

from __future__ import annotations

import asyncio
import random
import secrets
import statistics
import time

from .follow import Cursor, follow_host
from .transport import HostSpec, connect


def _stats(ms: list[float]) -> dict:
    q = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else ms * 99
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(q[94], 3), "n": len(ms)}


async def _timed(op, n: int) -> dict:
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        await op()
        ms.append((time.perf_counter() - t0) * 1000)
    return _stats(ms)


async def _follow_latency(spec: HostSpec, t, path: str, n: int) -> dict:
    """Append a line through one connection; time until a follower on another (`follow_host`,
    its default interval) sees it. Each line is written at a random moment of the follower's
    cycle, as a run's lines are (right after the previous one was seen, each would wait a whole
    interval). The time of the write is when the writing command returned, less half its
    round trip."""
    seen: asyncio.Queue = asyncio.Queue()
    stop = asyncio.Event()

    async def follower():
        async for chunk in follow_host(spec, [Cursor(path)], stop=stop):
            if chunk.data:
                seen.put_nowait(time.perf_counter())

    task = asyncio.create_task(follower())
    ms, rng = [], random.Random(n)
    try:
        for i in range(n):
            await asyncio.sleep(rng.uniform(0, 0.1))
            t0 = time.perf_counter()
            await t.run(f"printf 'line {i}\\n' >> {path}")
            t1 = time.perf_counter()
            ms.append((await asyncio.wait_for(seen.get(), 10) - (t0 + t1) / 2) * 1000)
    finally:
        stop.set()
        await task
    return {"p50": _stats(ms)["p50_ms"], "p95": _stats(ms)["p95_ms"], "n": n}


async def _catch_up(spec: HostSpec, t, path: str, mb: int) -> dict:
    """A follower (re)connecting behind a log of `mb` MiB: how fast it reads up to the end."""
    line = b"(WorkerDict pid=4242, ip=10.0.0.2) " + b"x" * 200 + b"\n"
    block = line * ((1 << 20) // len(line))
    await t.write(f"{path}.blk", block)
    await t.run(f"for i in $(seq {mb}); do cat {path}.blk; done > {path}", timeout=600)
    size = len(block) * mb
    got, stop = 0, asyncio.Event()
    t0 = time.perf_counter()
    async for chunk in follow_host(spec, [Cursor(path)], stop=stop):
        got += len(chunk.data)
        if got >= size:
            stop.set()
    dt = time.perf_counter() - t0
    await t.run(f"rm -f {path}.blk")
    return {"mb": mb, "seconds": round(dt, 3), "mb_per_s": round(size / dt / (1 << 20), 1)}


async def bench(spec: HostSpec, n: int = 300, warmup: int = 20, baseline_n: int = 30, follow_n: int = 100,
                catch_up_mb: int = 256) -> dict:
    t = await connect(spec)
    path = f".harness-bench-{secrets.token_hex(4)}"
    try:
        await t.write(path, secrets.token_bytes(4096))
        for _ in range(warmup):
            await asyncio.gather(t.run("true"), t.read(path), t.stat(path))
        out = {"transport": t.name, "host": spec.host, "ops": {
            "run_true": await _timed(lambda: t.run("true"), n),
            "read_4k": await _timed(lambda: t.read(path), n),
            "stat": await _timed(lambda: t.stat(path), n)}, "baseline": {}}
        conn = getattr(t, "conn", None)
        if baseline_n and conn is not None and hasattr(conn, "create_session"):  # asyncssh: a channel per command
            out["baseline"]["exec_channel_per_command"] = await _timed(lambda: conn.run("true"), baseline_n)
        log = f"{path}.log"
        await t.write(log, b"")
        out["follow_latency_ms"] = await _follow_latency(spec, t, log, follow_n)
        if catch_up_mb:
            out["catch_up"] = await _catch_up(spec, t, log, catch_up_mb)
        await t.run(f"rm -f {log}")
        return out
    finally:
        await t.run(f"rm -f {path}")
        await t.close()
