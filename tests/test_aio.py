"""harness.aio.wait_for keeps a cancellation that lands as the awaited work finishes (Python
3.11's asyncio.wait_for returns the result then and the cancel is lost: `harness stop` went
unheard until the run ended)."""

import asyncio

import pytest

from harness import aio


def race(wait_for) -> str:
    async def main():
        loop = asyncio.get_running_loop()
        work = loop.create_future()
        caller = asyncio.create_task(wait_for(work, 10))
        await asyncio.sleep(0)  # the caller waits on the work
        work.set_result("done")  # the work finishes ...
        caller.cancel()  # ... as the caller is cancelled
        try:
            return await caller
        except asyncio.CancelledError:
            return "cancelled"
    return asyncio.run(main())


def test_a_cancel_as_the_work_finishes_is_not_lost():
    assert race(aio.wait_for) == "cancelled"


def test_results_and_timeouts_are_as_asyncio_s():
    async def main():
        assert await aio.wait_for(asyncio.sleep(0, "x"), 1) == "x"
        with pytest.raises(asyncio.TimeoutError):
            await aio.wait_for(asyncio.sleep(5), 0.01)
        # after a cancel was caught (a session's clean-up), later waits work
        task = asyncio.current_task()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.sleep(1)
        assert await aio.wait_for(asyncio.sleep(0, "y"), 1) == "y"
    asyncio.run(main())


def test_a_cancel_lands_inside_the_work():
    """The work runs in the caller's task, so a cancel is raised inside it, where a recorded call
    marks itself cut short; raised after the work (asyncio.wait_for's own task), the call looked
    whole and the replay of a stopped session diverged."""
    async def main():
        seen, answer = [], asyncio.get_running_loop().create_future()

        async def work():
            try:
                seen.append(await answer)
            except asyncio.CancelledError:
                seen.append("cancelled inside")
                raise
        caller = asyncio.create_task(aio.wait_for(work(), 10))
        for _ in range(3):
            await asyncio.sleep(0)  # the caller is in the call, the work awaits its answer
        answer.set_result("answered")  # the answer comes ...
        caller.cancel()  # ... as the caller is cancelled
        with pytest.raises(asyncio.CancelledError):
            await caller
        return seen
    assert asyncio.run(main()) == ["cancelled inside"]


def test_a_timeout_after_a_caught_cancel_is_a_timeout():
    async def main():
        asyncio.current_task().cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.sleep(1)
        with pytest.raises(asyncio.TimeoutError):
            await aio.wait_for(asyncio.sleep(5), 0.01)
    asyncio.run(main())
