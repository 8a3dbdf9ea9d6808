"""Where a live process waits, from its stack (py-spy's dump: the harness collects one from a hung
run, and engineers paste them into issues): the collective it is in, when one is on the stack, and
the frame that waits — the innermost one outside the code that does the waiting (torch.distributed's
collectives, the standard library's locks, queues and sockets): the call everyone waits on."""

from __future__ import annotations

import re

from .blocks import FRAME

# The collectives proper (torch.distributed's ops and point-to-point calls, HCCL/NCCL's the same
# names): a run whose processes wait in one hangs in a collective. Other waits on other processes'
# work (a device synchronize, asyncio's wait_for, ray.get) may hang for any reason: not these.
COLLECTIVE_OPS = re.compile(r"all_?reduce|gather|scatter|broadcast|barrier|all_?to_?all|\bi?recv\b|\bi?send\b", re.I)
# Modules that only wait for another thread, process or peer: the standard library's, and
# torch.distributed's collective entry points (c10d's and its logging wrapper).
RELAY = re.compile(r"(?:^|/)(?:threading|queue|selectors|socket|subprocess)\.py$|/asyncio/|/concurrent/")
# Ray's internals under `ray.get` (`get`, `Worker.get_objects` in ray/_private/worker.py, its client
# and auto-init hooks; the compiled `_raylet.pyx`) wait for a remote task: the caller is the frame that waits.
# torch's operator dispatch (torch/_ops.py: `OpOverloadPacket.__call__`, `OpOverload.__call__`) only
# hands a call to the C++ op: the frame that called the op says which (`all_reduce`, a custom op's).
WAITING = re.compile(RELAY.pattern + r"|torch/distributed/(?:distributed_c10d|c10d_logger)\.py$"
                     r"|(?:^|/)ray/_private/|_raylet\.pyx$|(?:^|/)torch/_ops\.py$")


def collective(frames: list[str]) -> str | None:
    """The innermost collective on a stack of traceback-shaped frames (outermost first)."""
    return next((m[3] for fr in reversed(frames) if (m := FRAME.match(fr)) and COLLECTIVE_OPS.search(m[3])), None)


def waiting_frame(frames: list[str]) -> str:
    """The frame a stack waits in, as py-spy prints it (`func (path:line)`): the innermost one
    outside the waiting code (`WAITING`), else the innermost."""
    parsed = [m for fr in frames if (m := FRAME.match(fr))]
    own = [m for m in parsed if not WAITING.search(m[1])] or parsed
    return f"{own[-1][3]} ({own[-1][1]}:{own[-1][2]})" if own else ""
