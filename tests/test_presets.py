"""`harness init --preset NAME`: a commented spec for each real stack that loads as written, says
why for every value, and passes `harness doctor` against a real sshd on loopback where stand-ins
play the host's tools (npu-smi / nvidia-smi printing a real host's output, CANN's set_env.sh)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.spec import load_spec
from harness.spec_template import presets
from test_hostinfo import standins

ROOT = Path(__file__).resolve().parent.parent
HARNESS = Path(sys.executable).parent / "harness"
ASCEND = {"mindspeed-rl", "pangu-910c"}
PRESETS = ["mindspeed-rl", "openrlhf", "pangu-910c", "rllm", "trl", "verl"]


def init(tmp_path: Path, name: str, *args: str) -> Path:
    out = tmp_path / f"{name}.yaml"
    r = subprocess.run([str(HARNESS), "init", "--preset", name, "-o", str(out), *args], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"wrote {out} (preset {name})" in r.stdout and "harness doctor" in r.stdout
    return out


def test_every_preset_is_listed():
    assert presets() == PRESETS


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_loads_as_written_and_says_why_for_every_value(tmp_path, name):
    spec = load_spec(init(tmp_path, name, "--host", "gpu1", "--workdir", "/srv/rl"))
    assert (spec.host, spec.transport, spec.workdir) == ("gpu1", "asyncssh", "/srv/rl")
    assert spec.launch.timeouts["engine_start"] >= 20 * 60  # a 20-minute graph compile is not a hang
    assert spec.launch.stall >= 600 and spec.launch.devices >= 8 and spec.cleanup == []
    assert spec.launch.env.get("PYTHONUNBUFFERED") == "1" and spec.preflight.device_memory_gb
    text = (tmp_path / f"{name}.yaml").read_text()
    lines = text.splitlines()
    for i, line in enumerate(lines):  # a value: a comment on its line or right above it
        if re.match(r"\s*[A-Za-z_][\w.-]*:\s*[^\s>#]", line):
            above = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            assert "#" in line or above.lstrip().startswith("#"), f"{name}: no reason given for `{line.strip()}`"
    assert "pkill" not in re.sub(r"#.*", "", text) and "ray stop" not in re.sub(r"#.*", "", text)
    if name in ASCEND:
        assert "set_env.sh" in spec.launch.command and "ASCEND_PROCESS_LOG_PATH" in spec.launch.command
        assert int(spec.launch.env["HCCL_CONNECT_TIMEOUT" if name == "pangu-910c" else "ASCEND_GLOBAL_LOG_LEVEL"]) > 0


def test_the_pangu_preset_is_the_story_s_host():
    text = (ROOT / "harness" / "presets" / "pangu-910c.yaml").read_text()
    for fact in ("TP 8 / DP 2 / EP 16", "TP 4 / PP 4", "16-die", "pangu-ascend-rl", "devices: 16"):
        assert fact in text, fact


def test_bad_preset_arguments_are_one_line(tmp_path):
    for args, says in ((["--preset", "nope"], "no preset 'nope'; there are: mindspeed-rl"),
                       (["--preset", "verl", "--host", "gpu1"], "--workdir: give the absolute path"),
                       (["--preset", "verl", "--host", "gpu1", "--workdir", "rel/dir"], "is not an absolute path")):
        r = subprocess.run([str(HARNESS), "init", *args, "-o", str(tmp_path / "x.yaml")], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "x.yaml").exists()


@pytest.mark.parametrize("name", PRESETS)
def test_doctor_passes_each_preset_on_a_loopback_host_with_stand_ins(ssh_lab, tmp_path, name):
    work, bin_dir, ascend = tmp_path / "work", tmp_path / "bin", tmp_path / "Ascend"
    work.mkdir()
    (work / "train_grpo.py").write_text("print('stand-in')\n")  # what the trl preset's command names
    if name in ASCEND:
        standins(bin_dir, "npu-smi", "npu-smi-3.txt")  # 8 idle 910B2: 60 GB free each
        for kit in ("ascend-toolkit", "nnal/atb"):
            (ascend / kit).mkdir(parents=True)
            (ascend / kit / "set_env.sh").write_text("export ASCEND_TOOLKIT_HOME=/stand/in\n")
    else:
        standins(bin_dir, "nvidia-smi", "nvidia-smi-2.txt")  # 8 idle H100
    path = init(tmp_path, name, "--host", "box", "--workdir", str(work))
    data = yaml.safe_load(path.read_text())  # the lab's ssh config, and the stand-ins on PATH
    data |= {"ssh_config": str(ssh_lab.ssh_config), "known_hosts": str(ssh_lab.known_hosts)}
    data["launch"]["env"] |= {"PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"}
    if name in ASCEND:
        data["launch"]["env"]["ASCEND_ROOT"] = str(ascend)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    r = subprocess.run([str(HARNESS), "doctor", str(path)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    names = [ln.split(":")[0] for ln in r.stdout.splitlines()]
    assert names[:5] == ["✓ ssh", "✓ workdir", "✓ git", "✓ python", "✓ ports"] and "✓ devices" in names
    assert ("✓ cann" in names) == (name in ASCEND) and "✓ packages" in names
    assert ("8 × 910B2 (npu-smi)" if name in ASCEND else "8 × NVIDIA H100 80GB HBM3 (nvidia-smi)") in r.stdout
