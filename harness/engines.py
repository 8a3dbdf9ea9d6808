"""Throwaway schedulers on this machine, for `harness demo --ray|--slurm` and the tests: a Ray
head with its Jobs API on 127.0.0.1, and Slurm's munged + slurmctld + slurmd on a single-node
slurm.conf of their own. Each takes free ports and a directory of its own under /tmp, so a Ray
or Slurm the machine already runs is neither used nor disturbed:

    with LocalRay() as head:        head.address (the Jobs API), head.dir (its temp dir)
    with LocalSlurm() as lab:       lab.conf (for SLURM_CONF), lab.scontrol(...)

Everything an engine starts carries `HARNESS_ENGINE=<its dir>` in its environment (the daemons
inherit it, and so do the workers and jobs they start), so stop() ends exactly what it started
(never `ray stop --force`, which ends every Ray of the machine's user).
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from .errors import BadInput

MARK = "HARNESS_ENGINE"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
START_TIMEOUT = 90.0  # seconds for a head or slurmd to come up on a loaded 2-core machine


def free_port() -> int:
    return free_ports(1)[0]


def _ephemeral() -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (ip_local_port_range)."""
    with contextlib.suppress(OSError, ValueError):
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    return 32768, 60999


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free now (held together while chosen, so none is handed out twice),
    outside the kernel's range for outgoing connections: a port a server is told to take a moment
    later is not also handed to some connection's own end meanwhile (on a busy machine the kernel
    picks from that range hundreds of times a second)."""
    low, high = _ephemeral()
    pool = range(max(1024, low - 12000), low) if low - 1024 >= 4000 else range(high + 1, 65536)
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for port in random.sample(pool, min(len(pool), 200)):
            s = stack.enter_context(socket.socket())
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken
                continue
            ports.append(port)
            if len(ports) == n:
                return ports
    raise BadInput(f"no {n} free ports on 127.0.0.1 outside {low}-{high}: end some servers and retry")


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


def wait_http(url: str, timeout: float = START_TIMEOUT, headers: dict | None = None) -> dict:
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            with NO_PROXY.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as r:
                return json.loads(r.read() or b"{}")
        except (OSError, ValueError) as e:
            last = e
            time.sleep(0.3)
    raise RuntimeError(f"{url} did not answer in {timeout:g}s: {last}")


def _own_ports() -> list[str]:
    """Every port of a Ray node its own: a head torn down a moment ago, or another node, holds the
    defaults."""
    names = ("object-manager-port", "node-manager-port", "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
             "runtime-env-agent-port", "metrics-export-port", "min-worker-port", "max-worker-port")
    ports = free_ports(len(names) - 2) + [0, 0]
    return [f"--{name}={port}" for name, port in zip(names, ports)]


class _Engine:
    dir = ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self):
        raise NotImplementedError

    def stop(self) -> None:
        kill_marked(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)


class LocalRay(_Engine):
    """`ray start --head --block` on 127.0.0.1 with free ports and its own temp dir."""

    def __init__(self, system: dict | None = None, token: str | None = None):
        """`system`: Ray system settings for the whole cluster, as RAY_<name> variables
        (e.g. {"health_check_period_ms": 500}: a dead node noticed in seconds). `token`: the
        cluster uses token authentication with it; none: authentication off, said explicitly,
        since Ray 2.5x turns it on for a head whenever ~/.ray/auth_token exists (which any local
        `ray.init()` of the machine's user writes)."""
        self.system = {f"RAY_{k}": str(v) for k, v in (system or {}).items()}
        self.system |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token} if token else {"RAY_AUTH_MODE": "disabled"}
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        # short: Ray's unix sockets live under the temp dir (a socket path has ~107 bytes)
        self.dir = tempfile.mkdtemp(prefix="hray", dir="/tmp")
        self.port, self.dash, self.client = free_ports(3)
        self.address = f"http://127.0.0.1:{self.dash}"
        self.proc: subprocess.Popen | None = None
        self.nodes: dict[str, subprocess.Popen] = {}  # worker nodes by name

    def start(self) -> LocalRay:
        if ray_bin() is None:
            raise BadInput("no `ray` on this machine: pip install 'harness[ray]' (ray[default])")
        env = self._env(self.dir)
        argv = [ray_bin(), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dash}", "--include-dashboard=true",
                "--num-cpus=2", f"--temp-dir={self.dir}", "--disable-usage-stats",
                f"--ray-client-server-port={self.client}", *_own_ports()]
        with open(f"{self.dir}/start.log", "wb") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_http(f"{self.address}/api/version", headers=self.headers)
            wait_http(f"{self.address}/api/jobs/", headers=self.headers)
        except RuntimeError as e:
            said = Path(f"{self.dir}/start.log").read_text(errors="replace").strip().splitlines()[-1:]
            self.stop()
            raise BadInput(f"the local Ray head did not come up: {e}; {' '.join(said)}") from None
        return self

    def _env(self, mark: str) -> dict:
        """A Ray process's environment: the cluster's settings, the mark its stop looks for, no
        proxy (the nodes talk to each other on loopback)."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")}
        return env | self.system | {MARK: mark, "RAY_USAGE_STATS_ENABLED": "0"}

    def add_node(self, name: str, resources: dict | None = None) -> str:
        """A worker node of this cluster (Ray runs several nodes on one machine), with a temp dir
        of its own, as another machine's would be: its workers' and raylet's logs are there,
        not in the head's. Resource `name` (1) lets a task be placed on it. Returns its temp dir;
        stop() ends it with the head, stop_node(name) alone (as a node that dies)."""
        node_dir = f"{self.dir}/{name}"
        os.makedirs(node_dir)
        res = json.dumps({name: 1, **(resources or {})})
        argv = [ray_bin(), "start", f"--address=127.0.0.1:{self.port}", "--block", "--node-ip-address=127.0.0.1",
                f"--node-name={name}", "--num-cpus=1", f"--temp-dir={node_dir}", f"--resources={res}",
                "--disable-usage-stats", *_own_ports()]
        with open(f"{node_dir}/start.log", "wb") as log:
            self.nodes[name] = subprocess.Popen(argv, env=self._env(node_dir), stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if any(name in n.get("resources_total", {}) for n in self.alive_nodes()):
                return node_dir
            time.sleep(0.5)
        said = Path(f"{node_dir}/start.log").read_text(errors="replace").strip().splitlines()[-1:]
        raise BadInput(f"the local Ray node {name} did not join in {START_TIMEOUT:g}s; {' '.join(said)}")

    def stop_node(self, name: str, sig: int = signal.SIGKILL) -> None:
        """End a worker node's processes at once (SIGKILL: the node dies, as a machine does), and
        wait until the cluster has noticed (its health check): a job started after this does not
        hear of the death as news."""
        for pid in marked(f"{self.dir}/{name}"):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and any(name in n.get("resources_total", {}) for n in self.alive_nodes()):
            time.sleep(0.5)

    def alive_nodes(self) -> list[dict]:
        """The cluster's live nodes, from the state API (`ray list nodes`)."""
        try:
            rows = wait_http(f"{self.address}/api/v0/nodes?detail=1&limit=100", 10, self.headers)
            rows = rows["data"]["result"]["result"]
        except (RuntimeError, KeyError, TypeError):
            return []
        return [n for n in rows if n.get("state") == "ALIVE"]

    def jobs(self) -> list[dict]:
        return wait_http(f"{self.address}/api/jobs/", 10, self.headers)

    def stop(self) -> None:
        for name in self.nodes:
            kill_marked(f"{self.dir}/{name}")
        super().stop()
        for p in [self.proc, *self.nodes.values()]:
            if p:
                p.wait(10)


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


class LocalSlurm(_Engine):
    """munged, slurmctld and slurmd (Debian's packages) on a single-node slurm.conf of their own:
    own ports, own munge socket and key, nothing of the machine's /etc used. Needs root."""

    def __init__(self, kill_wait: int = 5):
        self.dir = tempfile.mkdtemp(prefix="hslurm", dir="/tmp")
        self.conf = f"{self.dir}/slurm.conf"
        self.kill_wait = kill_wait

    def _daemon(self, *argv: str) -> None:
        exe = shutil.which(argv[0]) or f"/usr/sbin/{argv[0]}"
        env = {**os.environ, MARK: self.dir, "SLURM_CONF": self.conf}
        with open(f"{self.dir}/{argv[0]}.out", "wb") as log:
            subprocess.Popen([exe, *argv[1:]], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self) -> LocalSlurm:
        missing = slurm_missing() or (os.geteuid() != 0 and "root")
        if missing:
            raise BadInput(f"a local Slurm needs {missing}: as root, apt-get install slurm-wlm munge")
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
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if "idle" in self.scontrol("show", "node").stdout.lower():
                return self
            time.sleep(0.3)
        said = " ".join(line for p in sorted(d.glob("*.out")) for line in p.read_text().splitlines()[-2:])
        self.stop()
        raise BadInput(f"the local Slurm did not come up in {START_TIMEOUT:g}s: {said}")

    def scontrol(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "SLURM_CONF": self.conf})
