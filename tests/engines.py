"""Real schedulers on this machine for tests: a Ray head with its Jobs API on loopback, and
Slurm's slurmctld + slurmd (with munge) on a minimal single-node slurm.conf.

Everything an engine starts carries `HARNESS_TEST_ENGINE=<its dir>` in its environment (the
daemons inherit it and so do the workers and jobs they start), so stop() kills exactly what the
test started and nothing else of the machine's (no `ray stop --force`, which kills every Ray).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from sshd import free_port

MARK = "HARNESS_TEST_ENGINE"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def ray_bin() -> str | None:
    here = Path(sys.executable).parent / "ray"
    return str(here) if here.exists() else shutil.which("ray")


def marked(tag: str) -> list[int]:
    """Pids of live processes whose environment carries MARK=tag."""
    want, pids = f"{MARK}={tag}".encode(), []
    for environ in glob.glob("/proc/[0-9]*/environ"):
        with contextlib.suppress(OSError):
            if want in Path(environ).read_bytes().split(b"\0"):
                pids.append(int(environ.split("/")[2]))
    return [p for p in pids if p != os.getpid()]


def kill_marked(tag: str, grace: float = 5.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked(tag):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while marked(tag) and time.monotonic() < deadline:
            time.sleep(0.1)


def wait_http(url: str, timeout: float = 90.0) -> dict:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with NO_PROXY.open(url, timeout=5) as r:
                return json.loads(r.read() or b"{}")
        except (OSError, ValueError) as e:
            last = e
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in {timeout:g}s: {last}")


class RayHead:
    """`ray start --head --block` on 127.0.0.1 with free ports and its own temp dir."""

    def __init__(self):
        # short: Ray's unix sockets live under the temp dir (a socket path has ~107 bytes)
        self.dir = tempfile.mkdtemp(prefix="hray", dir="/tmp")
        self.port, self.dash = free_port(), free_port()
        self.address = f"http://127.0.0.1:{self.dash}"
        self.proc: subprocess.Popen | None = None

    def start(self) -> RayHead:
        env = {**os.environ, MARK: self.dir, "RAY_USAGE_STATS_ENABLED": "0"}
        for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
            env.pop(name, None)
        argv = [ray_bin(), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dash}", "--include-dashboard=true",
                "--num-cpus=2", f"--temp-dir={self.dir}", "--disable-usage-stats",
                # every port its own: a head torn down a moment ago, or another node, holds the defaults
                *[f"--{name}={free_port()}" for name in (
                    "object-manager-port", "node-manager-port", "ray-client-server-port",
                    "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port",
                    "metrics-export-port")]]
        self.proc = subprocess.Popen(argv, env=env, stdout=open(f"{self.dir}/start.log", "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_http(f"{self.address}/api/version")
            wait_http(f"{self.address}/api/jobs/")
        except RuntimeError:
            self.stop()
            raise
        return self

    def jobs(self) -> list[dict]:
        with NO_PROXY.open(f"{self.address}/api/jobs/", timeout=10) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        kill_marked(self.dir)
        if self.proc:
            self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


SLURM_CONF = """\
ClusterName=htest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
CredType=cred/munge
# in a container: no cgroups to track or bind with
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
KillWait={kill_wait}
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def slurm_missing() -> str | None:
    for tool in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel"):
        if not (shutil.which(tool) or os.path.exists(f"/usr/sbin/{tool}")):
            return tool
    return None


class SlurmLab:
    """munged, slurmctld and slurmd (Debian's packages) on a single-node slurm.conf of their own:
    own ports, own munge socket and key, nothing of the machine's /etc used. Needs root."""

    def __init__(self, kill_wait: int = 5):
        self.dir = tempfile.mkdtemp(prefix="hslurm", dir="/tmp")
        self.conf = f"{self.dir}/slurm.conf"
        self.kill_wait = kill_wait

    def _daemon(self, *argv: str) -> None:
        exe = shutil.which(argv[0]) or f"/usr/sbin/{argv[0]}"
        env = {**os.environ, MARK: self.dir, "SLURM_CONF": self.conf}
        subprocess.Popen([exe, *argv[1:]], env=env, stdout=open(f"{self.dir}/{argv[0]}.out", "wb"),
                         stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> SlurmLab:
        import socket

        d = Path(self.dir)
        (d / "state").mkdir()
        (d / "spool").mkdir()
        (d / "munge.key").write_bytes(os.urandom(1024))
        os.chmod(d / "munge.key", 0o600)
        (d / "slurm.conf").write_text(SLURM_CONF.format(
            host=socket.gethostname(), ctld_port=free_port(), d_port=free_port(), dir=self.dir,
            kill_wait=self.kill_wait, cpus=os.cpu_count()))
        self._daemon("munged", "--foreground", f"--socket={d}/munge.sock", f"--key-file={d}/munge.key",
                     f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed",
                     "--force")
        deadline = time.monotonic() + 10
        while not (d / "munge.sock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        self._daemon("slurmctld", "-D", "-f", self.conf)
        self._daemon("slurmd", "-D", "-f", self.conf, "-N", socket.gethostname())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if "idle" in self.scontrol("show", "node").stdout.lower():
                return self
            time.sleep(0.3)
        out = "".join(p.read_text()[-500:] for p in d.glob("*.out"))
        self.stop()
        raise RuntimeError(f"slurm did not come up in 60s: {out}")

    def scontrol(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "SLURM_CONF": self.conf})

    def stop(self) -> None:
        kill_marked(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
