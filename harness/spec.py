"""The run spec (`harness.yaml`): where the run lives and how it starts. This is its first
part — the host, the workdir, the launch command and its environment, the logs, cleanup and
pre-flight probes; the loop's budgets, model and policy join it later.

    host: gpu1                 # an ~/.ssh/config alias or a host name
    transport: asyncssh        # asyncssh | paramiko | local
    workdir: /home/me/pangu-rl
    launch:
      command: bash scripts/run_pangu_grpo.sh
      env: {VLLM_LOGGING_LEVEL: INFO, RAY_DEDUP_LOGS: "0"}
      unset: [http_proxy, https_proxy, HTTP_PROXY, HTTPS_PROXY, all_proxy, ALL_PROXY]
      logs: [logs/actor.log]   # more logs to follow, relative to workdir (the run's own log always is)
    cleanup: ["ray stop --force"]
    preflight: {ports: [6379, 8000], device_memory_gb: 50}
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import SpecError
from .remote.transport import ENV_NAME, HostSpec
from .yamlfile import load_model



class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Launch(_Model):
    command: str = Field(..., min_length=1, description="the shell command that starts the run, run in workdir")
    env: dict[str, str] = Field(default_factory=dict, description="variables set for the run")
    unset: list[str] = Field(default_factory=list, description="variables removed from the run's environment")
    logs: list[str] = Field(default_factory=list, description="more log files to follow, relative to workdir")

    @field_validator("env", "unset")
    @classmethod
    def _names(cls, v):
        bad = [k for k in v if not ENV_NAME.match(k)]
        if bad:
            raise ValueError(f"not an environment variable name: {bad[0]!r}")
        return v


class Preflight(_Model):
    ports: list[int] = Field(default_factory=list, description="ports that must be free before a launch")
    device_memory_gb: float | None = Field(None, description="free memory each accelerator must have (npu-smi/nvidia-smi)")


class RunSpec(_Model):
    host: str = Field(..., min_length=1, description="an ~/.ssh/config alias or a host name")
    user: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    key: str | None = Field(None, description="private key file (else the ssh config's IdentityFile)")
    transport: Literal["asyncssh", "paramiko", "local"] = "asyncssh"
    ssh_config: str | None = Field(None, description="default ~/.ssh/config")
    known_hosts: str | None = Field(None, description="default ~/.ssh/known_hosts")
    workdir: str = Field(..., min_length=1, description="absolute path of the code on the host")
    launch: Launch
    cleanup: list[str] = Field(default_factory=list, description="commands run after a stop, e.g. `ray stop --force`")
    preflight: Preflight = Field(default_factory=Preflight)

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/"):
            raise ValueError(f"workdir must be an absolute path on the host, got {v!r}")
        return v.rstrip("/") or "/"

    def host_spec(self) -> HostSpec:
        return HostSpec(host=self.host, user=self.user, port=self.port, key=self.key, transport=self.transport,
                        ssh_config=self.ssh_config, known_hosts=self.known_hosts)


def load_spec(path: Path) -> RunSpec:
    return load_model(Path(path), RunSpec, "run spec (host:, workdir:, launch:, …)", error=SpecError)
