"""asyncio helpers the standard library gets wrong on the Python versions we support."""

from __future__ import annotations

import asyncio


async def wait_for(aw, timeout: float | None):
    """`asyncio.wait_for` that never loses a cancellation. On Python 3.11, when the awaited work
    finishes just as the caller is cancelled, wait_for returns its result and the cancel is gone
    (CPython gh-86296, fixed in 3.12): `harness stop` cancelling a session then went unheard until
    the run ended. A cancel that arrived during the call is raised after it."""
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0
    result = await asyncio.wait_for(aw, timeout)
    if task is not None and task.cancelling() > before:
        raise asyncio.CancelledError
    return result
