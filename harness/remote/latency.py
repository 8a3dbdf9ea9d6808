"""`harness bench remote`: latency of small operations through a transport, and of following a
log, as p50/p95 in ms. A figure printer; nothing here is asserted by tests."""

from __future__ import annotations

import asyncio
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
    """Append a line through one connection; time until a follower on another sees it."""
    seen: asyncio.Queue = asyncio.Queue()
    stop = asyncio.Event()

    async def follower():
        async for chunk in follow_host(spec, [Cursor(path)], interval=0.05, stop=stop):
            if chunk.data:
                seen.put_nowait(time.perf_counter())

    task = asyncio.create_task(follower())
    ms = []
    try:
        for i in range(n):
            t0 = time.perf_counter()
            await t.run(f"printf 'line {i}\\n' >> {path}")
            ms.append((await asyncio.wait_for(seen.get(), 10) - t0) * 1000)
    finally:
        stop.set()
        await task
    return {"p50": _stats(ms)["p50_ms"], "p95": _stats(ms)["p95_ms"], "n": n}


async def bench(spec: HostSpec, n: int = 300, warmup: int = 20, baseline_n: int = 30, follow_n: int = 30) -> dict:
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
        await t.run(f"rm -f {log}")
        return out
    finally:
        await t.run(f"rm -f {path}")
        await t.close()
