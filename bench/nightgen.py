"""A deterministic log shaped like a real multi-rank RL night (verl + vLLM + Megatron on Ray).

    write_night(path, size_bytes, seed=0, ranks=16, error_every=1000)

The shape, line by line (weights in KINDS):
- almost every line carries Ray's prefix in colour, `(WorkerDict pid=N, ip=A)`, or two of them
  nested, `(vLLMHttpServer pid=N, ip=A) (Worker_TP1 pid=M, ip=A)`; under them a torch `[rankN]:`
  head (often with a glog head, `[W604 22:25:57.123456789 ProcessGroupNCCL.cpp:4561]`) or a
  logger head (`INFO 06-04 22:25:57 [loggers.py:147]`, `[2025-06-04 22:25:57,123][verl][INFO]`);
- vLLM's per-interval engine stats and request logging, tqdm bars redrawn with `\\r`;
- the same few warnings over and over, some as Ray's `[repeated Nx across cluster]`;
- one verl step line (`step:N - actor/pg_loss:… - …`, 26 metrics) every ~2,000 lines;
- one real error line in `error_every` lines, of the kinds a night survives: a vLLM request that
  failed (`ERROR … [serving_chat.py] Error in chat completion`), a reward worker's caught
  traceback, `NCCL WARN` retries, `ERROR:root:` answer-extraction failures, asyncio's
  `Task exception was never retrieved`;
- at the end: interleaved CUDA OOM tracebacks of four ranks and the Ray / Hydra wrappers (the
  verdict: crash, failed stage actor_update, the OOM as root cause).
Same seed and parameters, same bytes. Stdlib only.
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from loggen import step_body  # noqa: E402  (the same verl step line)

CY, GR, RS = "\x1b[36m", "\x1b[32m", "\x1b[0m"
T0 = 1749075900  # 2025-06-04 22:25:00 UTC
SITE = "/usr/local/lib/python3.10/dist-packages"


class Night:
    def __init__(self, seed: int, ranks: int):
        self.r = random.Random(seed)
        self.ranks = ranks
        self.ips = [f"10.0.{i // 8}.{10 + i // 8}" for i in range(ranks)]
        self.workers = [self.n(20000, 400000) for _ in range(ranks)]
        self.runner = self.n(20000, 400000)
        self.servers = [(self.n(20000, 400000), [self.n(20000, 400000) for _ in range(4)])
                        for _ in range(max(1, ranks // 4))]
        self.t, self.step, self._sec, self._st = 0.0, 0, -1, None

    def n(self, lo: int, hi: int) -> int:
        return self.r.randrange(lo, hi)

    def f(self, lo: float, hi: float) -> float:
        return self.r.uniform(lo, hi)

    def tick(self) -> time.struct_time:
        if int(self.t) != self._sec:
            self._sec, self._st = int(self.t), time.gmtime(T0 + int(self.t))
        return self._st

    def vllm_head(self, level: str = "INFO") -> str:  # vLLM's logger
        return f"{level} {time.strftime('%m-%d %H:%M:%S', self.tick())} "

    def py_head(self, level: str = "INFO") -> str:  # a hydra / logging head
        return f"[{time.strftime('%Y-%m-%d %H:%M:%S', self.tick())},{self.n(0, 1000):03d}][verl][{level}] - "

    def glog(self, r: int, kind: str = "W") -> str:
        return (f"[rank{r}]:[{kind}{time.strftime('%m%d %H:%M:%S', self.tick())}.{self.n(0, 10**9):09d} "
                f"ProcessGroupNCCL.cpp:{self.n(600, 4600)}] ")

    def worker(self, r: int | None = None) -> tuple[int, str]:
        r = self.n(0, self.ranks) if r is None else r
        return r, f"{CY}(WorkerDict pid={self.workers[r]}, ip={self.ips[r]}){RS} "

    def server(self) -> str:
        i = self.n(0, len(self.servers))
        srv, tps = self.servers[i]
        tp = self.n(0, 4)
        ip = self.ips[min(i * 4, self.ranks - 1)]
        return f"{CY}(vLLMHttpServer pid={srv}, ip={ip}){RS} {CY}(Worker_TP{tp} pid={tps[tp]}, ip={ip}){RS} "

    def runner_pre(self) -> str:
        return f"{CY}(TaskRunner pid={self.runner}){RS} "


# --- the lines of a night ---------------------------------------------------------------------

def engine_stats(g: Night) -> str:
    return (f"{g.server()}{g.vllm_head()}[loggers.py:123] Engine 000: Avg prompt throughput: "
            f"{g.f(0, 9000):.1f} tokens/s, Avg generation throughput: {g.f(0, 3000):.1f} tokens/s, "
            f"Running: {g.n(0, 256)} reqs, Waiting: {g.n(0, 64)} reqs, GPU KV cache usage: "
            f"{g.f(0, 100):.1f}%, Prefix cache hit rate: {g.f(0, 100):.1f}%")


def request_log(g: Night) -> str:
    rid = f"chatcmpl-{g.r.getrandbits(64):016x}"
    if g.r.random() < 0.5:
        return (f"{g.server()}{g.vllm_head()}[logger.py:43] Received request {rid}: prompt: "
                f"'<|im_start|>user\\nSolve {g.n(1, 999)} + {g.n(1, 999)}.<|im_end|>', params: "
                f"SamplingParams(n=1, temperature=1.0, top_p=1.0, max_tokens={g.n(256, 8192)}), "
                f"prompt_token_ids: None, lora_request: None.")
    return f'{g.server()}{g.vllm_head()}[launcher.py:77] 127.0.0.1:{g.n(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def rank_nccl(g: Night) -> str:
    r, pre = g.worker()
    return (f"{pre}{g.glog(r)}[PG ID 0 PG GUID 0 Rank {r}]  using GPU {r % 8} to perform barrier as "
            "devices used by this process are currently unknown. This can potentially cause a hang if "
            "this rank to GPU mapping is incorrect.")


def rank_warning(g: Night) -> str:
    r, pre = g.worker()
    return (f"{pre}[rank{r}]: {SITE}/torch/distributed/fsdp/_state_dict_utils.py:{g.n(700, 900)}: "
            "FutureWarning: Please use DTensor instead and we are deprecating ShardedTensor.")


def megatron_info(g: Night) -> str:
    r, pre = g.worker()
    return (f"{pre}{g.py_head()}[megatron_actor.py:{g.n(300, 600)}] rank {r}: micro batch "
            f"{g.n(0, 64)}/64, tokens {g.n(1000, 40000)}, memory allocated (GB): {g.f(20, 60):.2f}, "
            f"reserved (GB): {g.f(60, 70):.2f}")


def repeated_warning(g: Night) -> str:
    _, pre = g.worker()
    return (f"{pre}{SITE}/torch/utils/checkpoint.py:{g.n(80, 500)}: UserWarning: torch.utils.checkpoint: "
            f"the use_reentrant parameter should be passed explicitly.{GR} [repeated {g.n(2, g.ranks + 1)}x "
            f"across cluster]{RS}")


def vllm_warning(g: Night) -> str:
    return (f"{g.server()}{g.vllm_head('WARNING')}[__init__.py:{g.n(1000, 1500)}] Default sampling "
            "parameters have been overridden by the model's Hugging Face generation config recommended "
            "from the model creator. If this is not intended, please relaunch vLLM instance with "
            "`--generation-config vllm`.")


def progress(g: Night) -> str:
    total, k, bars = g.n(64, 1024), 0, []
    for _ in range(g.n(3, 8)):
        k = min(total, k + g.n(1, total // 4 + 2))
        pct = 100 * k // total
        bars.append(f"Processed prompts: {pct:3d}%|{('█' * (pct // 10)).ljust(10)}| {k}/{total} "
                    f"[00:{g.n(0, 60):02d}<00:{g.n(0, 60):02d}, {g.f(1, 90):.2f}it/s, est. speed input: "
                    f"{g.f(100, 9000):.2f} toks/s, output: {g.f(100, 3000):.2f} toks/s]")
    return g.worker()[1] + "\r".join(bars)


def plain(g: Night) -> str:
    return g.worker()[1] + g.r.choice([
        "list(reward_extra_infos_dict.keys())=[]",
        f"Sleep mode freed {g.f(30, 60):.2f} GiB memory, {g.f(1, 9):.2f} GiB memory is still in use.",
        f"kwargs: {{'n': 1, 'logprobs': 0, 'max_tokens': {g.n(256, 8192)}, 'detokenize': False}}",
        f"[Gloo] Rank {g.n(0, g.ranks)} is connected to {g.ranks - 1} peer ranks. Expected number of "
        f"connected peer ranks is : {g.ranks - 1}",
    ])


KINDS = [engine_stats, request_log, rank_nccl, rank_warning, megatron_info, repeated_warning,
         vllm_warning, progress, plain]
WEIGHTS = [10, 30, 8, 6, 14, 6, 6, 8, 12]


def error_lines(g: Night) -> list[str]:
    """One survived error, of a kind real nights print (a traceback is several lines)."""
    kind = g.n(0, 5)
    if kind == 0:
        return [f"{g.server()}{g.vllm_head('ERROR')}[serving_chat.py:{g.n(900, 1300)}] Error in chat "
                f"completion stream generator."]
    if kind == 1:
        _, pre = g.worker()
        return [pre + "Traceback (most recent call last):",
                f'{pre}  File "/opt/verl/verl/utils/reward_score/math.py", line {g.n(20, 90)}, in compute_score',
                f"{pre}    value = float(extracted)",
                f"{pre}ValueError: could not convert string to float: '{g.n(1, 99)}/{g.n(1, 99)}'"]
    if kind == 2:
        r, pre = g.worker()
        return [f"{pre}node-{r // 8}:{g.workers[r]}:{g.workers[r] + 17} [{r % 8}] NCCL WARN Call to "
                f"ibv_reg_mr failed, retrying ({g.n(1, 4)}/5)"]
    if kind == 3:
        return [f"{g.worker()[1]}ERROR:root:Error extracting answer for item {g.n(0, 99999)}"]
    return [f"{g.runner_pre()}Task exception was never retrieved",
            f"{g.runner_pre()}future: <Task finished name='Task-{g.n(100, 9999)}' coro=<AsyncLLM.generate() "
            f"done> exception=CancelledError()>"]


def step_line(g: Night) -> str:
    return g.runner_pre() + step_body(g)


def startup(g: Night) -> list[str]:
    lines = [f"{g.runner_pre()}TaskRunner hostname: node-0, PID: {g.runner}"]
    for srv, tps in g.servers:
        for tp, pid in enumerate(tps):
            g.t += 2.5
            pre = f"{CY}(vLLMHttpServer pid={srv}){RS} {CY}(Worker_TP{tp} pid={pid}){RS} {g.vllm_head()}"
            lines += [f"{pre}[default_loader.py:267] Loading weights took {g.f(2, 30):.2f} seconds",
                      f"{pre}[gpu_worker.py:276] Available KV cache memory: {g.f(20, 50):.2f} GiB",
                      f"{pre}[kv_cache_utils.py:1087] GPU KV cache size: {g.n(10**5, 10**6):,} tokens",
                      f"{pre}[core.py:210] init engine (profile, create kv cache, warmup model) took "
                      f"{g.f(20, 200):.2f} seconds"]
    return lines + [f"{g.runner_pre()}Total training steps: 5000", f"{g.runner_pre()}validation generation end"]


def crash(g: Night) -> list[str]:
    tbs, ranks = [], g.r.sample(range(g.ranks), min(4, g.ranks))
    frames = [("/opt/verl/verl/workers/megatron_workers.py", 612, "update_actor",
               "metrics = self.actor.update_policy(dataloader=dataloader)"),
              ("/opt/verl/verl/workers/actor/megatron_actor.py", 561, "update_policy",
               "metric_micro_batch = self.forward_backward_batch(")]
    for r in ranks:
        _, pre = g.worker(r)
        tb = [pre + "Traceback (most recent call last):"]
        for path, no, fn, code in frames:
            tb += [f'{pre}  File "{path}", line {no}, in {fn}', f"{pre}    {code}"]
        tb.append(f"{pre}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {r % 8} "
                  f"has a total capacity of 79.10 GiB of which {g.f(0.1, 1.9):.2f} GiB is free.")
        tbs.append(tb)
    out = []
    while any(tbs):
        out.append(g.r.choice([t for t in tbs if t]).pop(0))
    return out + [f"{g.runner_pre()}ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict."
                  f"actor_rollout_update_actor() (pid={g.workers[ranks[0]]}, ip={g.ips[ranks[0]]})",
                  "Error executing job with overrides: ['algorithm.adv_estimator=grpo']",
                  "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."]


def chunk(g: Night, error_every: int, lines: int = 20000) -> bytes:
    buf: list[str] = []
    for kind in g.r.choices(KINDS, WEIGHTS, k=lines):
        g.t += 0.01
        x = g.r.random()
        if x < 1 / error_every:
            buf += error_lines(g)
        elif x < 1 / error_every + 0.0005:
            buf.append(step_line(g))
        else:
            buf.append(kind(g))
    return ("\n".join(buf) + "\n").encode()


def write_night(path: Path, size_bytes: int, seed: int = 0, ranks: int = 16, error_every: int = 1000) -> None:
    g = Night(seed, ranks)
    tail = "".join(ln + "\n" for ln in crash(g)).encode()
    budget = size_bytes - len(tail)
    with open(path, "wb") as f:
        written = f.write("".join(ln + "\n" for ln in startup(g)).encode())
        while written < budget:
            data = chunk(g, error_every)
            if written + len(data) > budget:
                f.write(data[:data.rfind(b"\n", 0, budget - written) + 1])
                break
            written += f.write(data)
        f.write(tail)


if __name__ == "__main__":
    write_night(Path(sys.argv[1]), int(float(sys.argv[2]) * (1 << 20)))
