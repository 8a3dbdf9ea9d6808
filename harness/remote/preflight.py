"""Pre-flight probes before a launch, as the spec declares them: ports that must be free and
free memory on each accelerator (from npu-smi on Ascend, nvidia-smi on NVIDIA: hostinfo.py).
Each result is one line."""

from __future__ import annotations

from .doctor import Check
from .hostinfo import HostInfo
from .transport import Transport

# Listening TCP sockets from /proc (no ss/netstat needed): local port of state 0A (LISTEN).
_LISTENING = "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == \"0A\" {split($2, a, \":\"); print a[2]}'"
def busy_ports(listening_hex: str, wanted: list[int]) -> list[int]:
    """The wanted ports that appear (hex) among listening sockets."""
    listening = {int(x, 16) for x in listening_hex.split() if x.strip()}
    return [p for p in wanted if p in listening]


async def preflight(t: Transport, probes, info: HostInfo) -> list[Check]:
    """Run the probes of `spec.preflight` (ports; device_memory_gb against `info`'s devices)."""
    out: list[Check] = []
    if probes.ports:
        r = await t.run(_LISTENING, timeout=20)
        busy = busy_ports(r.stdout, probes.ports)
        out.append(Check("ports", r.ok and not busy,
                         f"ports {', '.join(map(str, probes.ports))} are free" if r.ok and not busy else
                         f"port(s) {', '.join(map(str, busy))} in use: stop what listens there (a leftover run?)"
                         if busy else f"could not list listening ports: {r.tail(2)}"))
    if probes.device_memory_gb is not None:
        want, tool = probes.device_memory_gb, info.tool
        if tool == "none":
            out.append(Check("devices", True, "no npu-smi or nvidia-smi on the host: device memory not probed"))
        elif not info.devices:
            out.append(Check("devices", False, f"{tool} printed no device table: {info.raw_error or '(nothing)'}"))
        else:
            low = [f"#{d.index}" + (f".{d.chip}" if d.chip else "") + f" {d.free_gb:.1f} GB"
                   for d in info.devices if d.free_gb < want]
            out.append(Check("devices", not low, f"{len(info.devices)} devices with ≥ {want:g} GB free ({tool})"
                             if not low else f"too little free memory ({tool}): {', '.join(low)}; "
                             "a leftover process may hold it"))
    return out
