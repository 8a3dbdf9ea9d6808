"""The supervisor of a run handed to a scheduler (Ray Jobs, Slurm): standard library only.

The harness copies this file into the run dir and runs it as the run's detached command
(launch.py), so everything the process launcher does — the run dir, the pid, the exit code,
re-attaching, the marker sweep — holds for scheduled runs too:

    python3 jobsup.py run   job.json    submit, mirror the job's output to stdout, exit with its code
    python3 jobsup.py stop  job.json    ask the scheduler to stop the job and wait until it has
    python3 jobsup.py check job.json    can the scheduler be reached? (one line on stderr if not)
    python3 jobsup.py deaths job.json   a Ray job's dead and unplaced actors, their death causes

The verdict comes from the scheduler's state (Ray: PENDING/RUNNING/STOPPED/SUCCEEDED/FAILED;
Slurm: `scontrol show job`'s JobState and ExitCode), never from the log stream: `ray job logs`
stops following early and exits 0 for a failed job, and `sacct` needs accounting. On SIGTERM
the supervisor stops the job through the scheduler and goes on mirroring until it has ended.
The last line it prints, on stderr, says how the job ended: `harness: <kind> job <id> <STATE>…`.
While the scheduler holds the job back (QUEUED), the file `queued` beside job.json says so and
why (the controller does not count that silence towards a stall).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

POLL = 1.0  # seconds between two looks at the job's state
PATIENCE = 120.0  # seconds the scheduler may stay silent before the run counts as lost with it (conf: patience)
RAY_TERMINAL = {"STOPPED", "SUCCEEDED", "FAILED"}
# A job the scheduler has accepted but not started: Ray's PENDING (its supervisor actor and
# runtime env being set up), Slurm's PENDING (waiting for resources, priority, a begin time),
# CONFIGURING (its nodes booting) and REQUEUED.
QUEUED = {"PENDING", "CONFIGURING", "REQUEUED"}
# JobState values after which a Slurm job runs no more (squeue(1), "JOB STATE CODES")
SLURM_TERMINAL = {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                  "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT", "REVOKED", "SPECIAL_EXIT"}


# The API is the head's, inside the cluster: a proxy set for downloads (http_proxy on a login
# node) must not carry the supervisor's calls to it.
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Unreachable(Exception):
    """The scheduler did not answer: its message says where and what to check."""


def ray_token() -> str:
    """The cluster's auth token where Ray's own clients look for it: RAY_AUTH_TOKEN, the file
    RAY_AUTH_TOKEN_PATH names, ~/.ray/auth_token ("" when there is none). Ray 2.5x enables token
    authentication for a new `ray.init()` cluster, and for `ray start --head` once that file exists."""
    if token := os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return token
    for path in filter(None, (os.environ.get("RAY_AUTH_TOKEN_PATH"), os.path.expanduser("~/.ray/auth_token"))):
        try:
            with open(path, encoding="utf-8") as fh:
                if token := fh.read().strip():
                    return token
        except OSError:
            pass
    return ""


class Ray:
    """A Ray job through the Jobs REST API of the dashboard (what JobSubmissionClient speaks)."""

    def __init__(self, conf: dict):
        self.conf, self.url = conf, conf["address"].rstrip("/")
        self.id, self.log_at = conf["id"], 0
        self.headers = {"Content-Type": "application/json"}
        if token := ray_token():
            self.headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=self.headers)
        try:
            with NO_PROXY.open(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                said = "was refused" if "Authorization" in self.headers else "wants one"
                raise Unreachable(f"the Ray Jobs API at {self.url} uses token authentication and the token "
                                  f"{said} ({e.code}); keep the cluster's token in ~/.ray/auth_token on the host "
                                  "(`ray get-auth-token` prints it) or point RAY_AUTH_TOKEN_PATH at it") from None
            return e.code, {"message": e.read().decode(errors="replace")[:500]}
        except (OSError, ValueError) as e:
            raise Unreachable(f"the Ray Jobs API at {self.url} did not answer ({e}); is the head running "
                              "with its dashboard (`ray start --head --include-dashboard=true`)?") from None

    def check(self) -> None:
        self._call("GET", "/api/version")

    def submit(self) -> None:
        c = self.conf
        body = {"entrypoint": c["entrypoint"], "submission_id": self.id,
                "runtime_env": {"env_vars": c["env_vars"]}, "metadata": {"harness_run": self.id}}
        deadline = time.monotonic() + float(c.get("patience", PATIENCE))
        while True:  # a head just started answers 500 until its agent is up ("please try again later")
            code, answer = self._call("POST", "/api/jobs/", body)
            if code < 500 or time.monotonic() > deadline:
                break
            time.sleep(POLL)
        if code >= 400 and "already exists" not in answer.get("message", ""):
            raise Unreachable(f"the Ray Jobs API refused the job ({code}): {answer.get('message', '')}")

    def state(self) -> tuple[bool, int | None, str]:
        code, info = self._call("GET", f"/api/jobs/{self.id}")
        if code == 404:  # never submitted, or the head restarted and forgot it
            return True, None, "gone from the Ray cluster (not found: did the head restart?)"
        status = info.get("status", "?")
        text = status + (f" ({info['error_type']})" if info.get("error_type") else "")
        if (status in RAY_TERMINAL or status in QUEUED) and info.get("message"):  # without its copy of the log's tail
            text += ": " + info["message"].splitlines()[0].split(", last available logs")[0]
        exit_code = info.get("driver_exit_code")
        if exit_code is None and status in RAY_TERMINAL:
            exit_code = {"SUCCEEDED": 0, "STOPPED": 143}.get(status, 1)
        return status in RAY_TERMINAL, exit_code, text

    def stop(self) -> None:
        self._call("POST", f"/api/jobs/{self.id}/stop")

    def deaths(self) -> str:
        """The job's dead actors and why they died, and those still waiting for a node with what
        they asked for, from the state API (`ray list actors --detail`): Ray forgets them once the
        cluster moves on, so this is read before a relaunch."""
        code, info = self._call("GET", f"/api/jobs/{self.id}")
        job = info.get("job_id") if code == 200 else None
        if not job:
            return ""
        nodes = self._state_rows("nodes?detail=1&limit=1000")
        out = _dead_nodes(nodes, info.get("start_time") or 0)
        for a in self._state_rows("actors?detail=1&limit=1000&filter_keys=job_id"
                                  f"&filter_predicates=%3D&filter_values={job}"):
            if a.get("state") in UNPLACED:
                out.append(f"actor {a.get('class_name')} pid=0 waits to be placed ({a['state']}): {_asked(a, nodes)}")
            if a.get("state") != "DEAD":
                continue
            ctx = (a.get("death_cause") or {}).get("actor_died_error_context") or {}
            why = " ".join((ctx.get("error_message") or ctx.get("reason") or "no cause recorded").split())
            out.append(f"actor {a.get('class_name')} pid={a.get('pid')} node={ctx.get('node_ip_address', '?')} "
                       f"died: {why[:600]}" + (f" (never placed: {_asked(a, nodes)})" if ctx.get("never_started") else ""))
        return "\n".join(out)

    def _state_rows(self, query: str) -> list[dict]:
        """The rows of a state API listing (`ray list …`); none when it does not answer."""
        code, answer = self._call("GET", f"/api/v0/{query}")
        return (((answer.get("data") or {}).get("result") or {}).get("result") or []) if code == 200 else []

    def output(self) -> bytes:
        """What the driver printed since the last call: its log file on this node when it is here
        (the driver runs on the head unless told otherwise), else the API's whole log, cut."""
        path = self.conf.get("driver_log", "")
        if path and os.path.exists(path):
            return _read_from(self, path)
        code, answer = self._call("GET", f"/api/jobs/{self.id}/logs")
        data = (answer.get("logs") or "").encode() if code == 200 else b""
        new, self.log_at = data[self.log_at:], max(self.log_at, len(data))
        return new


UNPLACED = ("DEPENDENCIES_UNREADY", "PENDING_CREATION")  # `ray list actors` states of an actor no node runs yet
OWN_RESOURCES = ("CPU", "GPU", "NPU", "memory", "object_store_memory")  # besides these, a node's resources name it


def _dead_nodes(nodes: list[dict], since_ms: int) -> list[str]:
    """Ray nodes that died while the job ran (rows of `ray list nodes --detail`), named by their
    custom resources (how a task is placed on a node) and address."""
    out = []
    for n in nodes:
        if n.get("state") != "DEAD" or (n.get("end_time_ms") or 0) < since_ms:
            continue
        own = [r for r in (n.get("resources_total") or {}) if r not in OWN_RESOURCES and not r.startswith("node:")]
        why = " ".join((n.get("state_message") or "no cause recorded").split())
        out.append(f"ray node {n.get('node_name') or n.get('node_ip')} id={str(n.get('node_id'))[:12]} "
                   f"resources={','.join(own) or '-'} died while the job ran: {why[:600]}")
    return out


def _asked(actor: dict, nodes: list[dict]) -> str:
    """What an actor Ray has not placed asked for, and which of that no live node offers."""
    asked = actor.get("required_resources") or {}
    offered: dict[str, float] = {}
    for n in nodes:
        if n.get("state") == "ALIVE":
            for r, amount in (n.get("resources_total") or {}).items():
                offered[r] = max(offered.get(r, 0.0), float(amount))
    short = [r for r, amount in asked.items() if offered.get(r, 0.0) < float(amount)]
    said = ", ".join(f"{r}={amount:g}" for r, amount in asked.items()) or "nothing"
    return f"it asked for {said}" + (f"; no live node offers {', '.join(short)}" if short else "")


class Slurm:
    """A Slurm batch job through sbatch / scontrol / scancel (no accounting needed)."""

    def __init__(self, conf: dict):
        self.conf, self.id, self.log_at, self.job = conf, conf["id"], 0, conf.get("job", "")

    def _cmd(self, *argv: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unreachable(f"{argv[0]} failed ({e}); is Slurm's client installed and SLURM_CONF right?") from None

    def check(self) -> None:
        r = self._cmd("scontrol", "ping")
        if r.returncode != 0 or "UP" not in r.stdout:
            raise Unreachable("slurmctld does not answer `scontrol ping`: "
                              + (r.stdout + r.stderr).strip().replace("\n", "; "))

    def submit(self) -> None:
        c = self.conf
        r = self._cmd("sbatch", "--parsable", f"--job-name=harness-{self.id}", f"--chdir={c['workdir']}",
                      f"--output={c['out']}", *c.get("options", []), c["script"])
        if r.returncode != 0:
            raise Unreachable("sbatch refused the job: " + r.stderr.strip().replace("\n", "; "))
        self.job = r.stdout.strip().split(";")[0]  # "jobid" or "jobid;cluster"
        _put(c["job_file"], self.job)

    def state(self) -> tuple[bool, int | None, str]:
        r = self._cmd("scontrol", "show", "job", "-o", self.job)
        if r.returncode != 0 and "Invalid job id" in r.stderr:  # gone from slurmctld's memory (MinJobAge) before
            return True, 1, f"gone from the queue ({r.stderr.strip()})"  # we saw it end
        if r.returncode != 0:  # slurmctld down or restarting: ridden out for `patience`, then the run is lost
            raise Unreachable("slurmctld does not answer `scontrol show job`: "
                              + (r.stdout + r.stderr).strip().replace("\n", "; "))
        fields = dict(re.findall(r"(\w+)=(\S*)", r.stdout))
        state, reason = fields.get("JobState", "?"), fields.get("Reason", "None")
        code, _, sig = fields.get("ExitCode", "0:0").partition(":")
        exit_code = 128 + int(sig) if sig.isdigit() and int(sig) else int(code) if code.isdigit() else 1
        text = f"{state} job {self.job}" + (f" ({reason})" if reason not in ("None", "") else "")
        return state in SLURM_TERMINAL, exit_code, text

    def stop(self) -> None:
        if self.job:
            self._cmd("scancel", self.job)

    def output(self) -> bytes:
        return _read_from(self, self.conf["out"]) if os.path.exists(self.conf["out"]) else b""


def _read_from(job, path: str) -> bytes:
    with open(path, "rb") as f:
        f.seek(job.log_at)
        data = f.read(8 << 20)
    job.log_at += len(data)
    return data


def _put(path: str, value: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(value + "\n")
    os.replace(path + ".tmp", path)


def _mirror(job) -> None:
    while data := job.output():
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


def _queue(path: str, text: str) -> None:
    """Say in the run dir whether the scheduler still holds the job back (and why), so the
    controller does not take its silence for a hang."""
    if text:
        _put(path, text)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def run(job, stop_wait: float, queued: str) -> int:
    stopping: list[float] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(time.monotonic()))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(time.monotonic()))
    job.submit()
    patience = float(job.conf.get("patience", PATIENCE))
    asked, failing, said = False, None, None
    while True:
        try:
            _mirror(job)
            ended, code, text = job.state()
            failing = None
            waiting = "" if ended else text if text.split(" ", 1)[0].rstrip(":") in QUEUED else ""
            if waiting != said:
                _queue(queued, waiting)
                said = waiting
        except Unreachable as e:  # a loaded head, a restarting slurmctld: wait a while
            failing = failing or time.monotonic()
            if time.monotonic() - failing > patience:
                sys.stderr.write(f"harness: {e}; gave up after {patience:g}s\n")
                return 2
            time.sleep(POLL)
            continue
        if ended:
            break
        if stopping and not asked:
            job.stop()
            asked = True
        if stopping and time.monotonic() - stopping[0] > stop_wait + 30:
            text, code = f"{text}, still not ended {stop_wait + 30:g}s after it was asked to stop", 143
            break
        time.sleep(POLL)
    _queue(queued, "")
    time.sleep(POLL)  # the scheduler may flush the last lines just after the state changes
    with contextlib.suppress(Unreachable):
        _mirror(job)
    sys.stderr.write(f"harness: {job.conf['kind']} job {job.id} {text}\n")
    return code if code is not None else 1


def stop(job, stop_wait: float) -> int:
    """Ask for the stop and wait until the job has ended (bounded): 0 when it has."""
    if isinstance(job, Slurm) and not job.job:
        return 0  # never submitted
    job.stop()
    deadline = time.monotonic() + stop_wait + 10
    while time.monotonic() < deadline:
        if job.state()[0]:
            return 0
        time.sleep(POLL)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("run", "stop", "check", "deaths"):
        sys.stderr.write("usage: jobsup.py run|stop|check|deaths JOB.json\n")
        return 2
    with open(argv[2]) as f:
        conf = json.load(f)
    for name in conf.get("unset", []):  # stop and check see the scheduler as the run does (SLURM_CONF…)
        os.environ.pop(name, None)
    os.environ.update(conf.get("env", {}))
    if conf["kind"] == "slurm" and os.path.exists(conf["job_file"]):
        with open(conf["job_file"]) as f:
            conf["job"] = f.read().strip()
    job = Ray(conf) if conf["kind"] == "ray" else Slurm(conf)
    try:
        if argv[1] == "check":
            job.check()
            return 0
        if argv[1] == "deaths":
            print(job.deaths() if isinstance(job, Ray) else "")
            return 0
        if argv[1] == "run":
            return run(job, float(conf.get("stop_wait", 60)), os.path.join(os.path.dirname(argv[2]), "queued"))
        return stop(job, float(conf.get("stop_wait", 60)))
    except Unreachable as e:
        sys.stderr.write(f"harness: {e}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
