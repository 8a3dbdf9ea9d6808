"""What an accelerator host is, read from real outputs: `npu-smi info` pasted in public
vllm-ascend issues (910B2/B3/B4 Atlas A2 hosts, and an Atlas A3 — 910C class — host with two
chips per NPU) and `nvidia-smi` captures kept in public repositories (GTX 1080 Ti on drivers
390 and 440, H100 and RTX 6000 Ada on 565 and 550); tests/corpus/accel/ names each source.
Then the whole probe through a real sshd with stand-in tools printing those outputs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.remote.hostinfo import (_npu_version, _nvidia_versions, host_script, parse_host, parse_npu_smi,
                                     parse_nvidia_smi, summary, versions_line)

ACCEL = Path(__file__).resolve().parent / "corpus" / "accel"
ROOT = Path(__file__).resolve().parent.parent


def output(name: str) -> str:
    return "\n".join(ln for ln in (ACCEL / name).read_text().splitlines() if not ln.startswith("# "))


# file: (devices, name, version, first device's (used, total) MB, last device's (index, chip, used))
NPU = {"npu-smi-1.txt": (8, "910B3", "25.3.rc1", (58626, 65536), (7, 0)),
       "npu-smi-2.txt": (16, "Ascend910", "25.2.3", (53444, 65536), (7, 1)),
       "npu-smi-3.txt": (8, "910B2", "24.1.0.3", (3375, 65536), (7, 0)),
       "npu-smi-4.txt": (4, "910B4", "24.1.rc3", (2859, 32768), (3, 0))}
NVIDIA = {"nvidia-smi-1.txt": (8, "GeForce GTX 108...", "390.25", "", (10807, 11178)),
          "nvidia-smi-2.txt": (8, "NVIDIA H100 80GB HBM3", "565.57.01", "CUDA 12.7", (1, 81559)),
          "nvidia-smi-3.txt": (2, "GeForce GTX 108...", "440.82", "CUDA 10.2", (10916, 11175)),
          "nvidia-smi-4.txt": (8, "NVIDIA RTX 6000 Ada Gene...", "550.127.05", "CUDA 12.4", (2, 49140))}


@pytest.mark.parametrize("name", sorted(NPU))
def test_npu_smi_tables_of_real_hosts(name):
    n, model, version, first, last = NPU[name]
    devices = parse_npu_smi(output(name))
    assert len(devices) == n and {d.name for d in devices} == {model} and {d.health for d in devices} == {"OK"}
    assert (devices[0].used_mb, devices[0].total_mb) == first
    assert (devices[-1].index, devices[-1].chip) == last
    assert _npu_version(output(name)) == version
    assert [d.index for d in devices] == sorted(d.index for d in devices)  # the process table is not read as devices


def test_a_910c_host_is_sixteen_dies_of_eight_npus():
    devices = parse_npu_smi(output("npu-smi-2.txt"))
    assert [(d.index, d.chip) for d in devices] == [(i, c) for i in range(8) for c in (0, 1)]
    assert devices[-1].used_mb == 50242 and devices[4].used_mb == 3128  # "50242/ 65536" and "3128 / 65536"
    assert round(sum(d.free_gb for d in devices), 1) == round(sum(65536 - d.used_mb for d in devices) / 1024, 1)


@pytest.mark.parametrize("name", sorted(NVIDIA))
def test_nvidia_smi_tables_of_real_hosts(name):
    n, model, driver, cuda, first = NVIDIA[name]
    devices = parse_nvidia_smi(output(name))
    assert len(devices) == n and devices[0].name == model and [d.index for d in devices] == list(range(n))
    assert (devices[0].used_mb, devices[0].total_mb) == first
    assert _nvidia_versions(output(name)) == (driver, cuda)


def _sections(npu: str = "", nvidia: str = "", cann: str = "", python: str = "") -> str:
    return f"== npu-smi\n{npu}\n== nvidia-smi\n{nvidia}\n== cann\n{cann}\n== python\n{python}\n== end\n"


def test_the_probe_output_says_what_a_maintainer_asks_for():
    cann = ("installed /usr/local/Ascend/ascend-toolkit/set_env.sh\n"
            "file :usr:local:Ascend:ascend-toolkit:latest:aarch64-linux:ascend_toolkit_install.info version=8.3.RC1\n"
            "file :usr:local:Ascend:driver:version.info Version=25.2.3\n")
    info = parse_host(_sections(npu=output("npu-smi-2.txt"), cann=cann,
                                python="3.11.6\npkg torch 2.7.1\npkg torch_npu 2.7.1\npkg vllm_ascend 0.11.0rc1"))
    assert (info.tool, len(info.devices), info.driver, info.toolkit) == ("npu-smi", 16, "25.2.3", "CANN 8.3.RC1")
    assert info.cann_installed and not info.cann_sourced  # installed, but nothing of it in the launch's env
    checks = {name: (ok, detail) for name, ok, detail in summary(info)}
    assert checks["accelerators"][0] and "16 × Ascend910 (npu-smi)" in checks["accelerators"][1]
    assert "#7.1 15/64 GB" in checks["accelerators"][1]
    assert not checks["cann"][0] and "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in checks["cann"][1]
    assert versions_line(info.as_event()) == ("python 3.11.6, torch 2.7.1, torch_npu 2.7.1, vllm_ascend 0.11.0rc1, "
                                              "driver 25.2.3, CANN 8.3.RC1")
    sourced = parse_host(_sections(npu=output("npu-smi-3.txt"), cann="env ASCEND_TOOLKIT_HOME=/x\n"))
    assert sourced.cann_sourced and dict((n, ok) for n, ok, _ in summary(sourced))["cann"]
    broken = parse_host(_sections(npu="dcmi module initialize failed. ret is -8005"))
    assert not dict((n, ok) for n, ok, _ in summary(broken))["accelerators"]
    assert "dcmi module initialize failed" in broken.raw_error
    gpu = parse_host(_sections(nvidia=output("nvidia-smi-2.txt"), python="3.10.12\npkg vllm 0.8.5"))
    assert (gpu.driver, gpu.toolkit, len(gpu.devices)) == ("565.57.01", "CUDA 12.7", 8) and "cann" not in \
        {n for n, _, _ in summary(gpu)}
    none = parse_host(_sections(python="3.11.7"))
    assert none.tool == "none" and dict((n, ok) for n, ok, _ in summary(none)) == {"accelerators": True,
                                                                                  "packages": True}


def standins(bin_dir: Path, tool: str, corpus_file: str) -> None:
    """A stand-in `npu-smi` / `nvidia-smi` on the host that prints a real host's output."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / f"{tool}.out").write_text(output(corpus_file) + "\n")
    script = bin_dir / tool
    script.write_text(f"#!/bin/sh\ncat {bin_dir / (tool + '.out')}\n")
    script.chmod(0o755)


def test_doctor_reads_the_host_through_sshd_with_a_stand_in_npu_smi(ssh_lab, tmp_path):
    standins(tmp_path / "bin", "npu-smi", "npu-smi-3.txt")
    work = tmp_path / "work"
    work.mkdir()
    spec = tmp_path / "harness.yaml"
    spec.write_text(f"host: box\nssh_config: {ssh_lab.ssh_config}\nknown_hosts: {ssh_lab.known_hosts}\n"
                    f"workdir: {work}\nlaunch:\n  command: python3 -c pass\n"
                    f"  env: {{PATH: '{tmp_path / 'bin'}:/usr/local/bin:/usr/bin:/bin', PYTHON: {sys.executable}}}\n"
                    "preflight: {device_memory_gb: 60}\n")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "doctor", str(spec)], capture_output=True, text=True,
                       cwd=ROOT, timeout=180)
    lines = {ln.split(":")[0]: ln for ln in r.stdout.splitlines()}
    assert "✓ accelerators" in lines and "8 × 910B2 (npu-smi)" in lines["✓ accelerators"], r.stdout
    assert "✓ devices" in lines and "8 devices with ≥ 60 GB free (npu-smi)" in lines["✓ devices"]
    assert "✗ cann" in lines and "set_env.sh is not sourced" in lines["✗ cann"]  # the launch would miss CANN
    assert "✓ packages" in lines and "python 3." in lines["✓ packages"]
    assert r.returncode == 1  # because of cann


def test_the_package_probe_reads_dist_info_names_and_an_egg_info_s_metadata(tmp_path):
    # a site directory as pip leaves it: dist-info directories (name escaped), an egg-info of a
    # `setup.py develop` checkout whose name carries no version (read from its PKG-INFO), and
    # look-alikes that are not the packages asked for
    site = tmp_path / "site"
    for d in ("torch-2.7.1.dist-info", "megatron_core-0.12.0rc3.dist-info", "vllm_ascend-0.11.0rc1.dist-info",
              "torchvision-0.22.1.dist-info", "ray-2.49.0-py3.11.egg-info"):
        (site / d).mkdir(parents=True)
    (site / "verl.egg-info").mkdir()
    (site / "verl.egg-info" / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: verl\nVersion: 0.5.0.dev0\n")
    work = tmp_path / "work"
    work.mkdir()
    script = host_script(str(work), {"PYTHONPATH": str(site), "PYTHON": sys.executable})
    out = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, timeout=60).stdout
    info = parse_host(out)
    assert info.python == sys.version.split()[0]
    mine = {k: v for k, v in info.packages.items() if k in ("torch", "megatron-core", "vllm_ascend", "verl", "ray")}
    assert mine == {"torch": "2.7.1", "megatron-core": "0.12.0rc3", "vllm_ascend": "0.11.0rc1", "verl": "0.5.0.dev0",
                    "ray": "2.49.0"}
    assert "torchvision" not in info.packages
