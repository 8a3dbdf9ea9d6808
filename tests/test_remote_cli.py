"""`harness doctor`, `harness trust` and `harness bench remote` through the real sshd lab."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=180)


def spec_file(tmp_path, lab, workdir, known_hosts=None, command="bash scripts/run.sh"):
    p = tmp_path / "harness.yaml"
    p.write_text(f"host: box\nssh_config: {lab.ssh_config}\nknown_hosts: {known_hosts or lab.known_hosts}\n"
                 f"workdir: {workdir}\nlaunch:\n  command: {command}\n  unset: [http_proxy]\n")
    return p


def test_doctor_passes_a_good_spec_line_by_line(ssh_lab, tmp_path):
    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    (work / "scripts" / "run.sh").write_text("echo run\n")
    r = harness("doctor", spec_file(tmp_path, ssh_lab, work))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines] == ["✓ ssh", "✓ workdir", "✓ git", "✓ python", "✓ accelerators",
                                                "✓ packages", "✓ launch"]


def test_doctor_names_what_is_wrong(ssh_lab, tmp_path):
    r = harness("doctor", spec_file(tmp_path, ssh_lab, tmp_path / "missing"))
    assert r.returncode == 1
    assert "✗ workdir:" in r.stdout and "does not exist" in r.stdout and "Traceback" not in r.stderr
    work = tmp_path / "w2"
    work.mkdir()
    r = harness("doctor", spec_file(tmp_path, ssh_lab, work, command="python train.py"))
    assert r.returncode == 1 and "✗ launch: train.py" in r.stdout


def test_unknown_host_then_trust_then_doctor(ssh_lab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    (work / "scripts" / "run.sh").write_text("echo run\n")
    spec = spec_file(tmp_path, ssh_lab, work, known_hosts=empty)
    r = harness("doctor", spec)
    assert r.returncode == 1 and "✗ ssh:" in r.stdout and "harness trust" in r.stdout and "SHA256:" in r.stdout
    r = harness("trust", "box", "--ssh-config", ssh_lab.ssh_config, "--known-hosts", empty)
    fp = r.stderr.split("--fingerprint ", 1)[-1].split("`", 1)[0]
    assert r.returncode == 2 and fp.startswith("SHA256:") and "nothing trusted" in r.stderr, r.stderr
    assert empty.read_text() == ""  # no terminal to ask on and no --fingerprint: nothing written
    r = harness("trust", "box", "--ssh-config", ssh_lab.ssh_config, "--known-hosts", empty, "--fingerprint", fp)
    assert r.returncode == 0 and "trusted box" in r.stdout and fp in r.stdout, r.stderr
    assert harness("doctor", spec).returncode == 0


def test_trust_asks_on_a_terminal(ssh_lab, tmp_path):
    """On a terminal `trust` shows the fingerprint and asks; `n` writes nothing, `y` trusts."""
    import pty

    known = tmp_path / "known_hosts"
    for answer, code in ((b"n\n", 2), (b"y\n", 0)):
        main, sub = pty.openpty()
        p = subprocess.Popen([sys.executable, "-m", "harness.cli", "trust", "box", "--ssh-config", str(ssh_lab.ssh_config), "--known-hosts",
                              str(known)], stdin=sub, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        os.close(sub)
        os.write(main, answer)  # typed ahead: the terminal keeps it until the question reads it
        out, err = p.communicate(timeout=60)
        os.close(main)
        assert p.returncode == code and b"trust it? [y/N]" in err and b"SHA256:" in err, (out, err)
    assert known.read_text() == ssh_lab.servers["box"].known_hosts_line() + "\n"


def test_bench_remote_prints_the_documented_json(ssh_lab):
    r = harness("bench", "remote", "--host", "box", "--ssh-config", ssh_lab.ssh_config,
                "--known-hosts", ssh_lab.known_hosts, "-n", "5", "--catch-up-mb", "4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["transport"] == "asyncssh"
    for op in ("run_true", "read_4k", "stat"):
        assert out["ops"][op]["p50_ms"] > 0 and out["ops"][op]["p95_ms"] >= out["ops"][op]["p50_ms"]
    assert out["baseline"]["exec_channel_per_command"]["p50_ms"] > 0
    assert out["follow_latency_ms"]["p50"] > 0
    assert out["catch_up"]["mb"] == 4 and out["catch_up"]["mb_per_s"] > 0


def test_bad_spec_is_one_line_with_file_line_and_field(tmp_path):
    p = tmp_path / "harness.yaml"
    p.write_text("host: box\nworkdir: relative/dir\nlaunch: {command: x}\n")
    r = harness("doctor", p)
    assert r.returncode == 2 and r.stderr.strip() == (
        f"error: {p}:2: workdir: workdir must be an absolute path on the host, got 'relative/dir'")


def test_preflight_reports_a_port_in_use_and_probes_devices(ssh_lab, tmp_path):
    import socket

    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    (work / "scripts" / "run.sh").write_text("echo run\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        p = spec_file(tmp_path, ssh_lab, work)
        p.write_text(p.read_text() + f"preflight: {{ports: [{port}], device_memory_gb: 10}}\n")
        r = harness("doctor", p)
    assert r.returncode == 1
    assert f"✗ ports: port(s) {port} in use" in r.stdout
    assert "devices:" in r.stdout  # probed, or said why not (no npu-smi / nvidia-smi here)


def test_busy_ports_parses_proc_net_tcp_hex():
    from harness.remote.preflight import busy_ports

    assert busy_ports("1F90 0050\n18EB", [8080, 80, 6379, 22]) == [8080, 80, 6379]
