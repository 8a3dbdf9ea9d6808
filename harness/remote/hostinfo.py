"""What an accelerator host is: its devices and their free memory (`npu-smi info` on Ascend,
`nvidia-smi` on NVIDIA), the CANN toolkit (installed, and sourced for the launch or not), the
driver and toolkit versions, and the versions of the packages a run imports — the first things
a framework's maintainers ask for. One remote script gathers it; pure functions read it.

    info = parse_host(await t.run(host_script(spec)).stdout)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field

# Distributions a run imports (their metadata names; `-` and `_` are the same to importlib).
PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend", "sglang", "verl", "ray", "transformers", "megatron-core",
            "mindspeed", "mindspeed_rl", "openrlhf", "trl", "deepspeed", "accelerate", "flash_attn", "numpy")
# Set by CANN's set_env.sh (ascend-toolkit/set_env.sh); any of them means it was sourced.
CANN_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH")
SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"  # a root install; ${HOME}/Ascend/… for others

# The interpreter's version, then "pkg NAME VERSION" for each of {names} installed: read from
# the *.dist-info directory names on sys.path (one listing each; importlib.metadata's own lookups
# cost ~60 ms a run), and from importlib.metadata for an egg-info whose name has no version.
_VERSIONS = """import os, sys
print(sys.version.split()[0])
key = lambda n: n.lower().replace("_", "-").replace(".", "-")
want, got, ask = {{key(n): n for n in {names!r}}}, {{}}, set()
for d in sys.path:
    try:
        entries = os.listdir(d or ".")
    except OSError:
        continue
    for f in entries:
        stem, dot, kind = f.rpartition(".")
        if kind not in ("dist-info", "egg-info"):
            continue
        name, _, ver = stem.partition("-")
        k = key(name)
        if k in want and k not in got:
            got[k] = ver.split("-")[0] if ver else ask.add(k)
for k in ask:
    try:
        import importlib.metadata as m
        got[k] = m.version(want[k])
    except Exception:
        pass
for k, n in want.items():
    if got.get(k):
        print("pkg", n, got[k])
"""


@dataclass
class Device:
    index: int
    name: str
    used_mb: int
    total_mb: int
    chip: int = 0
    health: str = ""

    @property
    def free_gb(self) -> float:
        return max(0, self.total_mb - self.used_mb) / 1024


@dataclass
class HostInfo:
    tool: str = "none"  # npu-smi | nvidia-smi | none
    devices: list[Device] = field(default_factory=list)
    driver: str = ""
    toolkit: str = ""  # CANN toolkit or CUDA version
    cann_installed: bool = False
    cann_sourced: bool = False
    packages: dict[str, str] = field(default_factory=dict)
    python: str = ""
    raw_error: str = ""  # what the device tool said when it printed no table

    def as_event(self) -> dict:
        d = asdict(self)
        d["devices"] = [{k: v for k, v in asdict(x).items() if v not in ("", None)} for x in self.devices]
        return d


def host_script(workdir: str, env: dict[str, str], command: str = "", scripts: list[str] = (),
                unset: list[str] = ()) -> str:
    """One shell script printing `== section` blocks; it runs in the workdir with the launch's env
    (its PYTHON, if set, is the run's interpreter), so `cann` says what the run will see. The
    launch `command` and the `scripts` it names are searched for a `set_env.sh`."""
    exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in env.items())
    exports += f"unset {' '.join(unset)}; " if unset else ""
    names = tuple(PACKAGES)
    python = '"${PYTHON:-python3}"'
    greps = "".join(f"grep -qs 'set_env\\.sh' {shlex.quote(p)} && echo 'launch sources set_env.sh'; " for p in scripts)
    return (
        f"cd {shlex.quote(workdir)} 2>/dev/null; {exports}"
        "echo '== npu-smi'; command -v npu-smi >/dev/null 2>&1 && npu-smi info 2>&1 | head -c 65536; "
        "echo '== nvidia-smi'; command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi 2>&1 | head -c 65536; "
        "echo '== cann'; "
        f"for v in {' '.join(CANN_VARS)}; do eval \"x=\\${{$v:-}}\"; [ -n \"$x\" ] && echo \"env $v=$x\"; done; "
        f"for f in {SET_ENV} \"$HOME/Ascend/ascend-toolkit/set_env.sh\"; do [ -f \"$f\" ] && echo \"installed $f\"; done; "
        "for f in /usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info "
        "/usr/local/Ascend/ascend-toolkit/latest/version.cfg /usr/local/Ascend/driver/version.info; do "
        "[ -f \"$f\" ] && sed -n 's/^/file '\"$(echo \"$f\" | tr / :)\"' /p' \"$f\" | head -20; done; "
        f"printf '%s\\n' {shlex.quote(command)} | grep -q 'set_env\\.sh' && echo 'launch sources set_env.sh'; {greps}"
        f"echo '== python'; {python} -c {shlex.quote(_VERSIONS.format(names=names))} 2>/dev/null; "
        "echo '== end'\n")


async def host_info(t, spec) -> HostInfo:
    """The host as the spec's launch will see it (one remote command over transport `t`)."""
    from .doctor import script_paths

    cmd = spec.launch.command
    r = await t.run(host_script(spec.workdir, dict(spec.launch.env), cmd, script_paths(cmd), spec.launch.unset),
                    timeout=60)
    return parse_host(r.stdout)


def sections(out: str) -> dict[str, str]:
    found, name, lines = {}, None, []
    for ln in out.splitlines():
        if ln.startswith("== "):
            if name is not None:
                found[name] = "\n".join(lines)
            name, lines = ln[3:].strip(), []
        else:
            lines.append(ln)
    if name is not None:
        found[name] = "\n".join(lines)
    return found


def parse_host(out: str) -> HostInfo:
    s = sections(out)
    info = HostInfo()
    npu, nv = s.get("npu-smi", "").strip(), s.get("nvidia-smi", "").strip()
    if npu:
        info.tool, info.devices = "npu-smi", parse_npu_smi(npu)
        info.driver = _npu_version(npu)
    elif nv:
        info.tool, info.devices = "nvidia-smi", parse_nvidia_smi(nv)
        info.driver, info.toolkit = _nvidia_versions(nv)
    if info.tool != "none" and not info.devices:
        info.raw_error = " ".join((npu or nv).split())[:300]
    cann = s.get("cann", "")
    info.cann_installed = "installed " in cann or any(ln.startswith("env ") for ln in cann.splitlines())
    info.cann_sourced = any(ln.startswith(("env ", "launch sources")) for ln in cann.splitlines())
    toolkit = re.search(r"^file \S*ascend_toolkit_install\.info (?:version|Version)=(\S+)", cann, re.M) or \
        re.search(r"^file \S*version\.cfg .*?(\d+\.\d+\.[\w.]+)", cann, re.M)
    if toolkit:
        info.toolkit = "CANN " + toolkit.group(1)
    driver = re.search(r"^file \S*driver:version\.info Version=(\S+)", cann, re.M)
    if driver:
        info.driver = driver.group(1)
    py = s.get("python", "").splitlines()
    if py and re.fullmatch(r"\d+\.\d+\.\d+\S*", py[0].strip()):
        info.python = py[0].strip()
    info.packages = dict(ln.split(" ", 2)[1:] for ln in py if ln.startswith("pkg ") and ln.count(" ") >= 2)
    return info


# ------------------------------------------------------------------ npu-smi
_ROW = re.compile(r"^\|(.*)\|\s*$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def parse_npu_smi(text: str) -> list[Device]:
    """The devices of `npu-smi info`'s table: a row `| <npu> <name> | <health> | …` then a row per
    chip `| <chip> [<phy id>] | <bus id> | … <HBM used> / <HBM total> |` (the last pair: HBM, or
    DDR on cards without HBM). The process table below it is not read."""
    devices: list[Device] = []
    npu = name = health = None
    for raw in text.splitlines():
        m = _ROW.match(raw.strip())
        if not m:
            continue
        cells = [c.strip() for c in m.group(1).split("|")]
        if len(cells) < 3:
            continue
        head = cells[0].split()
        if len(head) >= 2 and head[0].isdigit() and not _looks_bus(cells[1]):  # an NPU's first row
            npu, name, health = int(head[0]), head[1], cells[1].split()[0] if cells[1] else ""
        elif head and head[0].isdigit() and npu is not None and _looks_bus(cells[1]):  # a chip's row
            pairs = _PAIR.findall(cells[-1])
            if pairs:
                used, total = map(int, pairs[-1])
                devices.append(Device(npu, name or "", used, total, chip=int(head[0]), health=health or ""))
        elif raw.lstrip().startswith("| NPU") and "Process" in raw:
            break  # the process table
    return devices


def _looks_bus(cell: str) -> bool:
    return bool(re.match(r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d", cell.strip()))


def _npu_version(text: str) -> str:
    m = re.search(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)", text)
    return m.group(2) if m else ""


# ------------------------------------------------------------------ nvidia-smi
_GPU = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
_MEM = re.compile(r"(\d+)MiB\s*/\s*(\d+)MiB")


def parse_nvidia_smi(text: str) -> list[Device]:
    """The devices of `nvidia-smi`'s default table: `| <gpu> <name> <persistence> | <bus id> …`
    then a row holding `<used>MiB / <total>MiB`."""
    devices, pending = [], None
    for ln in text.splitlines():
        if m := _GPU.match(ln):
            pending = (int(m.group(1)), m.group(2).strip())
            continue
        if pending and (mem := _MEM.search(ln)):
            devices.append(Device(pending[0], pending[1], int(mem.group(1)), int(mem.group(2))))
            pending = None
        if "Processes:" in ln:
            break
    return devices


def _nvidia_versions(text: str) -> tuple[str, str]:
    d = re.search(r"Driver Version:\s*(\S+)", text)
    c = re.search(r"CUDA Version:\s*(\S+)", text)
    return (d.group(1) if d else ""), ("CUDA " + c.group(1) if c else "")


# ------------------------------------------------------------------ lines for people
def summary(info: HostInfo) -> list[tuple[str, bool, str]]:
    """Doctor's checks: (name, ok, detail)."""
    out = []
    if info.tool == "none":
        out.append(("accelerators", True, "no npu-smi or nvidia-smi on the host (a CPU run?)"))
    elif not info.devices:
        out.append(("accelerators", False, f"{info.tool} printed no device table: {info.raw_error or '(nothing)'}"))
    else:
        free = ", ".join(f"#{d.index}{'.' + str(d.chip) if _multi_chip(info) else ''} {d.free_gb:.0f}/"
                         f"{d.total_mb / 1024:.0f} GB" for d in info.devices)
        names = sorted({d.name for d in info.devices})
        out.append(("accelerators", True, f"{len(info.devices)} × {'/'.join(names)} ({info.tool}); free: {free}"))
    versions = [x for x in (f"driver {info.driver}" if info.driver else "", info.toolkit) if x]
    if info.tool == "npu-smi" or info.cann_installed:
        ok = info.cann_sourced
        out.append(("cann", ok, ("CANN environment set for the launch" if ok else
                                 f"CANN's set_env.sh is not sourced for the launch: add `source {SET_ENV} &&` "
                                 "to launch.command (or source it in the run script)")
                    + (f"; {', '.join(versions)}" if versions else "")))
    elif versions:
        out.append(("driver", True, ", ".join(versions)))
    if info.packages or info.python:
        pk = ", ".join(f"{k} {v}" for k, v in info.packages.items())
        out.append(("packages", True, f"python {info.python or '?'}" + (f"; {pk}" if pk else "")))
    else:
        out.append(("packages", False, "could not run python in the workdir to read package versions"))
    return out


def _multi_chip(info: HostInfo) -> bool:
    return len({d.index for d in info.devices}) < len(info.devices)


def versions_line(ev: dict) -> str:
    """The versions of a `host` journal event in one line (for the report)."""
    parts = [f"python {ev['python']}"] if ev.get("python") else []
    parts += [f"{k} {v}" for k, v in (ev.get("packages") or {}).items()]
    parts += [x for x in (f"driver {ev['driver']}" if ev.get("driver") else "", ev.get("toolkit") or "") if x]
    return ", ".join(parts)


def devices_line(ev: dict) -> str:
    devs = ev.get("devices") or []
    if not devs:
        return "no accelerator seen" if ev.get("tool") in (None, "none") else f"{ev['tool']}: no device table"
    names = sorted({d.get("name", "?") for d in devs})
    total = sum(d.get("total_mb", 0) for d in devs) / 1024
    return f"{len(devs)} × {'/'.join(names)} ({total:.0f} GB in all, {ev['tool']})"
