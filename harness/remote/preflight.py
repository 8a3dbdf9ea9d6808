"""Pre-flight probes before a launch, as the spec declares them: ports that must be free and
free memory on each accelerator (npu-smi on Ascend, nvidia-smi on NVIDIA, when present).
Each probe is one remote command; each result is one line."""

from __future__ import annotations

import shlex

from .doctor import Check
from .transport import Transport

# Listening TCP sockets from /proc (no ss/netstat needed): local port of state 0A (LISTEN).
_LISTENING = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == \"0A\" {split($2, a, \":\"); print a[2]}'"
# Free device memory in MiB per device, whichever tool the host has.
_DEVICE_FREE = (
    "if command -v nvidia-smi >/dev/null 2>&1; then echo tool=nvidia-smi; "
    "nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits; "
    "elif command -v npu-smi >/dev/null 2>&1; then echo tool=npu-smi; "
    # npu-smi's usage table prints HBM as 'used / total' (MB) per chip, e.g. '3282 / 65536'.
    # Unverified on a real Ascend host (none here): a guess at the table, free = total - used.
    "npu-smi info | awk '/\\/ [0-9]+ *\\|?$/ || /[0-9]+ *\\/ *[0-9]+/ {for (i = 1; i < NF; i++) "
    "if ($(i+1) == \"/\" && $(i+2) ~ /^[0-9]+$/ && $(i+2) > 10000) print $(i+2) - $i}'; "
    "else echo tool=none; fi")


def busy_ports(listening_hex: str, wanted: list[int]) -> list[int]:
    """The wanted ports that appear (hex) among listening sockets."""
    listening = {int(x, 16) for x in listening_hex.split() if x.strip()}
    return [p for p in wanted if p in listening]


async def preflight(t: Transport, probes) -> list[Check]:
    """Run the probes of `spec.preflight` (ports, device_memory_gb)."""
    out: list[Check] = []
    if probes.ports:
        r = await t.run(_LISTENING, timeout=20)
        busy = busy_ports(r.stdout, probes.ports)
        out.append(Check("ports", r.ok and not busy,
                         f"ports {', '.join(map(str, probes.ports))} are free" if r.ok and not busy else
                         f"port(s) {', '.join(map(str, busy))} in use: stop what listens there (a leftover run?)"
                         if busy else f"could not list listening ports: {r.tail(2)}"))
    if probes.device_memory_gb is not None:
        r = await t.run(_DEVICE_FREE, timeout=30)
        lines = r.stdout.split()
        tool = lines[0].removeprefix("tool=") if lines else "none"
        free = [int(x) / 1024 for x in lines[1:] if x.isdigit()]
        if tool == "none":
            out.append(Check("devices", True, "no npu-smi or nvidia-smi on the host: device memory not probed"))
        else:
            low = [f"#{i} {gb:.1f} GB" for i, gb in enumerate(free) if gb < probes.device_memory_gb]
            out.append(Check("devices", bool(free) and not low,
                             f"{len(free)} devices with ≥ {probes.device_memory_gb:g} GB free ({tool})" if free and not low
                             else f"too little free memory ({tool}): {', '.join(low)}; a leftover process may hold it"
                             if low else f"{tool} printed no memory figures: {shlex.quote(r.tail(2))}"))
    return out
