"""The run spec (`harness.yaml`): where the run lives, how it starts, what passing means, the
model the agent uses, what a session may spend and what the agent may touch. Every field has a
`description=`; `harness init` writes them all out as a commented template (spec_template.py).

    host: gpu1                 # an ~/.ssh/config alias or a host name
    transport: asyncssh        # asyncssh | paramiko | local
    workdir: /home/me/pangu-rl
    launch:
      command: bash scripts/run_pangu_grpo.sh
      env: {VLLM_LOGGING_LEVEL: INFO, RAY_DEDUP_LOGS: "0"}
      unset: [http_proxy, https_proxy, HTTP_PROXY, HTTPS_PROXY, all_proxy, ALL_PROXY]
      timeouts: {engine_start: 30m}
    cleanup: ["ray stop --force"]
    model: {base_url: "https://api.deepseek.com/v1", name: deepseek-chat, api_key_env: DEEPSEEK_API_KEY}
    budgets: {relaunches: 20, money: 20, wall_clock: 8h}

`load_spec(path, overrides)` applies `-c key.sub=value` overrides to the YAML tree before
validation (spec_load.py); `dump_spec` writes the resolved spec back as YAML.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal, Sequence
from urllib.parse import urlsplit

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from .chain import STAGES
from .patterns import valid_regex
from .redact import redact
from .remote.transport import ENV_NAME, HostSpec

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(v):
    """Seconds from a number or a string like "45", "90m", "8h", "1h30m", "2d"."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        s = v.strip().replace(" ", "")
        m = _DURATION.fullmatch(s)
        if re.fullmatch(r"\d+(?:\.\d+)?", s):
            return float(s)
        if s and m:
            return sum(float(x or 0) * k for x, k in zip(m.groups(), _UNITS.values()))
    raise ValueError(f"not a duration: {v!r}; give seconds or e.g. 45s, 90m, 8h, 1h30m")


def format_duration(seconds: float) -> str:
    """The shortest of "8h", "1h30m", "90s" that parse_duration reads back exactly."""
    if seconds <= 0 or seconds != int(seconds):
        return f"{seconds:g}"
    out, left = "", int(seconds)
    for unit, k in _UNITS.items():
        if left >= k:
            out, left = out + f"{left // k}{unit}", left % k
    return out


def _env_name(v: str) -> str:
    if not ENV_NAME.match(v):
        raise ValueError(f"not an environment variable name: {v!r}")
    return v


def _stage(v: str) -> str:
    if v not in STAGES:
        raise ValueError(f"unknown stage {v!r}; stages: {', '.join(STAGES)}")
    return v


def _playbook(v: str, info: ValidationInfo) -> str:
    """A playbook looked up along the playbook path (README: "Where playbooks are looked up"):
    a shipped one stays a name; any other becomes its absolute path, so the session's frozen spec
    reads the same file whatever $HARNESS_PLAYBOOKS says when it resumes."""
    from .errors import PlaybookError
    from .playbook import locate, where

    try:
        p = locate(v, Path((info.context or {}).get("base", ".")))
    except PlaybookError as e:
        rest = e.message.removeprefix("no such playbook")  # " in …, … nor shipped (…)", or " file"
        raise ValueError(f"no playbook {v!r}{rest if rest.startswith(' in ') else ': ' + e.message}") from None
    return v if where(p) == "shipped" and p.stem == v else str(p.resolve())


Duration = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]
EnvName = Annotated[str, AfterValidator(_env_name)]
StageName = Annotated[str, AfterValidator(_stage)]
Regex = Annotated[str, AfterValidator(valid_regex)]
NonEmpty = Annotated[str, Field(min_length=1)]
PlaybookRef = Annotated[str, Field(min_length=1), AfterValidator(_playbook)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")  # no populate_by_name: YAML has one spelling per field


class RayJob(_Model):
    address: str = Field("http://127.0.0.1:8265", description="the Ray Jobs API (the head's dashboard) as seen "
                         "from the host; the head's own loopback by default, where `ray start --head` serves it")
    temp_dir: str = Field("/tmp/ray", description="the head's Ray temp dir (`ray start --temp-dir`), where the "
                          "driver's log is read from; the API's log is polled when it is not on the host")
    stop_wait: Duration = Field(60, description="seconds Ray gives the driver between SIGTERM and SIGKILL "
                                "(RAY_JOB_STOP_WAIT_TIME_S): Ray's default of 3 s is too short for a trainer "
                                "tearing down its collectives or writing a checkpoint")
    patience: Duration = Field(120, description="seconds the scheduler may stay silent (not answer, or answer a "
                               "submission with an error of its own) before the run counts as lost with it")
    python: str = Field("python3", description="the host's Python (3.8+, standard library only) that runs the "
                        "job's supervisor")


class SlurmJob(_Model):
    options: list[str] = Field(default_factory=list, examples=[["--nodes=2", "--gres=gpu:8", "--time=8:00:00"]],
                               description="sbatch options")
    script: str | None = Field(None, examples=["run.sbatch"], description="a batch script of yours, relative to "
                               "workdir, submitted as it is instead of the one the harness writes around `command`")
    stop_wait: Duration = Field(60, description="seconds to wait for the job to leave the queue after scancel "
                                "(more than slurm.conf's KillWait, 30 s by default)")
    patience: Duration = Field(120, description="seconds the scheduler may stay silent (not answer, or answer a "
                               "submission with an error of its own) before the run counts as lost with it")
    python: str = Field("python3", description="the host's Python (3.8+, standard library only) that runs the "
                        "job's supervisor")


class Launch(_Model):
    command: str = Field(..., min_length=1, description="the shell command that starts the run, run in workdir "
                         "(via ray-job: the job's entrypoint; via slurm: the batch script's body)")
    via: Literal["process", "ray-job", "slurm"] = Field(
        "process", description="process: a detached process group on the host; ray-job: a job submitted to the "
        "Ray Jobs API of a running cluster; slurm: an sbatch job")
    ray: RayJob = Field(default_factory=RayJob, description="the Ray Jobs API, for via: ray-job")
    slurm: SlurmJob = Field(default_factory=SlurmJob, description="sbatch, for via: slurm")
    env: dict[EnvName, str] = Field(default_factory=dict, examples=[{"RAY_DEDUP_LOGS": "0"}],
                                    description="variables set for the run")
    unset: list[EnvName] = Field(default_factory=list, examples=[["http_proxy", "https_proxy", "all_proxy"]],
                                 description="variables removed from the run's environment")
    logs: list[str] = Field(default_factory=list, examples=[["logs/actor.log"]],
                            description="more logs to follow, relative to workdir (the run's own log always is)")
    timeouts: dict[StageName, Duration] = Field(
        default_factory=dict, examples=[{"engine_start": "30m"}],
        description="seconds of silence in a stage before it counts as hung, per stage; overrides the playbook's")
    stall: Duration = Field(600, description="seconds of silence before checking whether the run's processes still "
                            "use CPU (a silent graph compilation is not a hang)")
    settle: Duration = Field(20, description="seconds to let the run finish printing and exit after its first "
                             "error before stopping it")
    devices: int = Field(1, ge=0, description="accelerators the run occupies, for accelerator-hours")


class Preflight(_Model):
    ports: list[int] = Field(default_factory=list, examples=[[6379, 8000]],
                             description="ports that must be free before a launch")
    device_memory_gb: float | None = Field(None, examples=[50],
                                           description="free memory (GB) each accelerator must have; none: not probed")


class Passing(_Model):
    actor_updates: int = Field(2, ge=1, description="healthy actor updates (no metric rule broken) that make the "
                               "chain pass; 2 by default: the second step is the first to run on weights synced "
                               "into the rollout engine after an update, where many bring-up failures appear")


class ModelSpec(_Model):
    base_url: str = Field(..., examples=["https://api.deepseek.com/v1"],
                          description="an OpenAI-compatible endpoint (vLLM, DeepSeek, Qwen, Ollama, OpenAI)")
    name: str = Field(..., min_length=1, examples=["deepseek-chat"], description="the model name the endpoint serves")
    api_key_env: str | None = Field(None, examples=["DEEPSEEK_API_KEY"],
                                    description="the NAME of the environment variable holding the API key "
                                    "(never the key itself); none: the endpoint needs no key")
    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature")
    price_in: float = Field(0.0, ge=0, description="money per million input tokens, for the money budget")
    price_out: float = Field(0.0, ge=0, description="money per million output tokens")
    max_tokens: int = Field(4096, ge=1, description="most tokens one reply may have")
    timeout: Duration = Field(120, description="seconds one model call may take")
    max_retries: int = Field(6, ge=0, description="retries (with backoff) on 429, 5xx and timeouts")
    actions: Literal["auto", "tools", "text"] = Field(
        "auto", description="how the agent acts: native tool calls, a ```bash block per reply (any chat model), "
        "or auto: one probe with a tool decides (a refusal of tools or no tool call back: text)")

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str) -> str:
        u = urlsplit(v.strip())
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {v!r}")
        if u.password or u.username:
            raise ValueError("no credentials in the URL: put the key in an environment variable and give its "
                             "name in api_key_env")
        return v.strip()

    @field_validator("api_key_env")
    @classmethod
    def _key_name(cls, v: str | None) -> str | None:
        if v is not None and looks_secret(v):  # the message must not repeat it
            raise ValueError("this looks like a key: put the key in an environment variable and give its name")
        return v if v is None else _env_name(v)

    def api_key(self) -> str | None:
        """The key, read from the environment now (never stored)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


def looks_secret(v: str) -> bool:
    """A key pasted where a variable name belongs: a known key shape or long random-looking text."""
    mixed = all(re.search(c, v) for c in (r"[a-z]", r"[A-Z]", r"\d"))
    return (v.startswith(("sk-", "sk_")) or redact(v) != v or (len(v) >= 20 and mixed)
            or (len(v) >= 32 and not re.fullmatch(r"[A-Z0-9_]+", v)))


class Budgets(_Model):
    relaunches: int = Field(20, ge=0, description="relaunches of the run over the session")
    agent_steps: int = Field(200, ge=0, description="agent tool calls over the session")
    agent_steps_per_attempt: int = Field(40, ge=1, description="agent tool calls between two relaunches")
    tokens: int = Field(2_000_000, ge=0, description="model tokens (input + output) over the session")
    money: float = Field(20.0, ge=0, description="money spent on the model (model.price_in/price_out)")
    wall_clock: Duration = Field(8 * 3600, description="the session's wall time: seconds or 90m, 8h, 1h30m")
    accelerator_hours: float | None = Field(None, ge=0, examples=[64],
                                            description="launch.devices × run time, in hours; none: unlimited")
    stuck_after: int = Field(3, ge=1, description="the same failure fingerprint this many times in a row ends "
                             "the session as stuck")
    infra_retries: int = Field(2, ge=0, description="cleanup-and-retry of infrastructure failures (a port in use, "
                               "a leftover process) per attempt, with no model call")


class PolicySpec(_Model):
    deny: list[Regex] = Field(default_factory=list, examples=[[r"\bsudo\b"]],
                              description="more regexes of commands the agent may not run (the built-in list "
                              "always applies)")
    protected: list[NonEmpty] = Field(default_factory=list, examples=[["checkpoints/", "/data/datasets"]],
                                      description="read-only paths, absolute or relative to workdir")


class LedgerSpec(_Model):
    exclude: list[NonEmpty] = Field(default_factory=list, examples=[["checkpoints/", "*.pt"]],
                                    description="more paths or globs the attempt ledger (shadow git) ignores")


class Connection(_Model):
    keepalive: Duration = Field(15, description="seconds between SSH keepalives on an idle connection (a NAT "
                                "must not drop it during a silent compilation); 3 unanswered: the link is dead")
    grace: Duration = Field(1800, description="how long the host may stay unreachable before the session ends "
                            "as `unreachable` (the run on the host is left as it is)")
    node_grace: Duration = Field(60, description="how long a worker node of `nodes:` may stay unreachable before "
                                 "the attempt fails as an infrastructure failure naming it (while a node is out "
                                 "of reach its logs wait, so this is kept short)")


class Node(_Model):
    host: str = Field(..., min_length=1, description="an ~/.ssh/config alias or a host name")
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9][\w.-]*$", examples=["w1"],
                             description="the node's label in merged logs and verdicts; none: its host")
    role: Literal["worker"] = Field("worker", description="worker: it joins the cluster the head (`host`) runs "
                                    "(the launch is always on the head)")
    user: str | None = Field(None, description="login user; none: the ssh config's, else yours")
    port: int | None = Field(None, ge=1, le=65535, description="SSH port; none: the ssh config's, else 22")
    key: str | None = Field(None, description="private key file; none: the ssh config's")
    workdir: str | None = Field(None, description="absolute path of the code on this node; none: the head's")
    logs: list[str] = Field(default_factory=list, examples=[["logs/worker.log"]],
                            description="logs on this node to follow, relative to its workdir")
    ray_temp_dir: str | None = Field(None, description="this node's Ray temp dir, where the post-mortem reads "
                                     "its workers' and raylet's logs; none: launch.ray.temp_dir")

    @property
    def label(self) -> str:
        return self.name or self.host

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"workdir must be an absolute path on the node, got {v!r}")
        return v if v is None else (v.rstrip("/") or "/")


class RunSpec(_Model):
    host: str = Field(..., min_length=1, description="an ~/.ssh/config alias or a host name")
    user: str | None = Field(None, examples=["me"], description="login user; none: the ssh config's, else yours")
    port: int | None = Field(None, ge=1, le=65535, examples=[22],
                             description="SSH port; none: the ssh config's, else 22")
    key: str | None = Field(None, examples=["~/.ssh/id_ed25519"],
                            description="private key file; none: the ssh config's")
    transport: Literal["asyncssh", "paramiko", "local"] = Field(
        "asyncssh", description="asyncssh | paramiko | local (the controller on the host itself)")
    ssh_config: str | None = Field(None, examples=["~/.ssh/config"], description="ssh config file; none: ~/.ssh/config")
    known_hosts: str | None = Field(None, examples=["~/.ssh/known_hosts"],
                                    description="known_hosts file; none: the ssh config's or the default")
    connection: Connection = Field(default_factory=Connection, description="keeping the link to the host")
    workdir: str = Field(..., min_length=1, description="absolute path of the code on the host")
    launch: Launch = Field(..., description="how the run starts")
    nodes: list[Node] = Field(default_factory=list, examples=[[{"host": "gpu2", "name": "w1", "logs": ["logs/w1.log"]}]],
                              description="the worker nodes of a multi-node run, each reached like `host` (the "
                              "head, where the run is launched) with its own host, name, user, port, key, workdir, "
                              "logs and ray_temp_dir (README: \"Many nodes\"); cleanup, logs, post-mortem and "
                              "doctor's checks run on each; a node lost mid-run is an infrastructure failure that "
                              "names it")
    cleanup: list[str] = Field(default_factory=list, examples=[["ray stop --force"]],
                               description="commands run after a stop, e.g. `ray stop --force` (on the head, then "
                               "on each node of `nodes:`)")
    preflight: Preflight = Field(default_factory=Preflight, description="probes before a launch (also in doctor)")
    playbooks: list[PlaybookRef] = Field(default_factory=list, examples=[["verl"]],
                                      description="playbook names (looked up in this file's directory, "
                                      "$HARNESS_PLAYBOOKS, ~/.config/harness/playbooks, then the shipped ones) or "
                                      "YAML files (relative to this file), all merged in order (none given, the "
                                      "playbook is detected from the log)")
    passing: Passing = Field(default_factory=Passing, alias="pass_rule", description="when the chain passes")
    keep_run: bool = Field(False, description="leave the run alive after the chain passes")
    model: ModelSpec | None = Field(None, description="the LLM the agent uses; none: declared fixes only")
    budgets: Budgets = Field(default_factory=Budgets, description="what a session may spend; the first limit "
                             "reached ends it")
    policy: PolicySpec = Field(default_factory=PolicySpec, description="what the agent may not do")
    ledger: LedgerSpec = Field(default_factory=LedgerSpec, description="the shadow git ledger of attempts")
    notify: list[str] = Field(default_factory=list, examples=[["$HARNESS_NOTIFY_URL"]],
                              description="apprise URLs to tell when a session ends, or $NAME of an environment "
                              "variable holding one (URLs carry tokens)")

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"workdir must be an absolute path on the host, got {v!r}")
        return v.rstrip("/") or "/"

    @field_validator("notify")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for url in v:
            if not ("://" in url or (url.startswith("$") and ENV_NAME.match(url[1:].strip("{}")))):
                raise ValueError(f"not an apprise URL (scheme://…) nor $NAME of a variable: {url!r}")
        return v

    @field_validator("nodes")
    @classmethod
    def _labels(cls, v: list[Node], info: ValidationInfo) -> list[Node]:
        seen = {info.data.get("host")}
        for node in v:
            if node.label in seen:
                raise ValueError(f"two nodes are called {node.label!r}: give each a distinct `name`")
            seen.add(node.label)
        return v

    def host_spec(self, node: Node | None = None) -> HostSpec:
        """How to reach the head, or `node` (its own host, user, port and key; the rest is the head's)."""
        src = node or self
        return HostSpec(host=src.host, user=src.user, port=src.port, key=src.key, transport=self.transport,
                        ssh_config=self.ssh_config, known_hosts=self.known_hosts,
                        keepalive=self.connection.keepalive)


def load_spec(path: Path, overrides: Sequence[str] = ()) -> RunSpec:
    """Read `path`, apply `-c key.sub=value` overrides, validate; errors name file:line:field or the override."""
    from .spec_load import load

    return load(Path(path), overrides)


def dump_spec(spec: RunSpec) -> str:
    """The resolved spec as YAML (to freeze into a session). It holds no secret: the model key is
    only an environment variable's name; notify URLs are redacted all the same."""
    data = spec.model_dump(mode="json", by_alias=True)
    data["notify"] = [redact(u) for u in data["notify"]]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)
