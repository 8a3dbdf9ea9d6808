"""asyncio helpers the standard library gets wrong on the Python versions we support."""

from __future__ import annotations

import asyncio
import sys


async def wait_for(aw, timeout: float | None):
    """`asyncio.wait_for` that never loses a cancellation and runs the work in the caller's task.

    On Python 3.11, `asyncio.wait_for` wraps a coroutine in a task of its own: a cancel that
    arrives before that task first runs kills the coroutine before its first line (a recorded
    call then left no trace in the recording, and its replay diverged), and when the work finishes
    just as the caller is cancelled it returns the result and the cancel is gone (CPython
    gh-86296, fixed in 3.12): `harness stop` then went unheard until the run ended. With
    `asyncio.timeout` (3.11.3+) the work runs in the caller's task, so a cancel lands inside it; a
    cancel that arrived during the call is raised after it. Older Pythons keep `asyncio.wait_for`."""
    if sys.version_info < (3, 11, 3):  # no asyncio.timeout, or one that mistakes a caught cancel
        return await asyncio.wait_for(aw, timeout)
    task = asyncio.current_task()
    before = task.cancelling()
    async with asyncio.timeout(timeout):
        result = await aw
    if task.cancelling() > before:
        raise asyncio.CancelledError
    return result
