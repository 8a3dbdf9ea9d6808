"""A deterministic multi-rank RL training log (verl + vLLM + Ray) of a requested size.

    write_log(path, size_bytes, seed)

Line shapes follow shared/reference/stack-vocabulary.md and corpus/realworld2: Ray actor
prefixes in ANSI colour, nested vLLM worker prefixes, `[rankN]:` torch lines, `\\r`-redrawn
tqdm bars, `[repeated Nx across cluster]`, verl `step:N - k:v - ...` lines, vLLM startup,
warnings; then, at the end, interleaved CUDA OOM tracebacks from several ranks and the Ray
and Hydra wrappers around them. Same seed and size, same bytes.
"""
import random
import time
from pathlib import Path

CY, GR, RS = "\x1b[36m", "\x1b[32m", "\x1b[0m"
RANKS = 16
T0 = 1749075900  # 2025-06-04 22:25:00 UTC
SITE = "/usr/local/lib/python3.10/dist-packages"

WORKER_MSGS = [
    lambda g: f"{SITE}/torch/cuda/__init__.py:{g.n(50, 900)}: FutureWarning: The pynvml package is deprecated. Please install nvidia-ml-py instead.",
    lambda g: "  import pynvml  # type: ignore[import]",
    lambda g: f"{SITE}/torch/utils/checkpoint.py:{g.n(80, 500)}: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.",
    lambda g: "  warnings.warn(",
    lambda g: f"kwargs: {{'n': 1, 'logprobs': 0, 'max_tokens': {g.n(256, 8192)}, 'detokenize': False, 'temperature': 1.0, 'top_k': -1, 'top_p': 1, 'ignore_eos': False}}",
    lambda g: f"[Gloo] Rank {g.n(0, RANKS)} is connected to {RANKS - 1} peer ranks. Expected number of connected peer ranks is : {RANKS - 1}",
    lambda g: f"After offload actor params and grad during compute_log_prob, memory allocated (GB): {g.f(20, 60):.2f}, memory reserved (GB): {g.f(60, 70):.2f}, device memory used/total (GB): {g.f(60, 79):.2f}/79.11",
    lambda g: "list(reward_extra_infos_dict.keys())=[]",
    lambda g: f"ERROR:2025-06-04 {g.hms()},{g.n(0, 1000):03d}:Error extracting answer for item {g.n(0, 99999)}",
    lambda g: "Error: <answer> tag not found.",
    lambda g: f"[{g.hms()} TP{g.n(0, 4)}] Downcasting torch.float32 to torch.bfloat16.",
    lambda g: f"  \"num_hidden_layers\": {g.n(2, 64)},",
    lambda g: f"Sleep mode freed {g.f(30, 60):.2f} GiB memory, {g.f(1, 9):.2f} GiB memory is still in use.",
    lambda g: f"WARNING {g.stamp()} [cuda.py:{g.n(90, 200)}] To see benefits of async output processing, enable CUDA graph. Since, enforce-eager is enabled, async output processor cannot be used",
]
VLLM_STARTUP = [
    "INFO {t} [default_loader.py:267] Loading weights took {a:.2f} seconds",
    "INFO {t} [gpu_model_runner.py:1892] Model loading took {b:.4f} GiB and {a:.6f} seconds",
    "INFO {t} [gpu_worker.py:276] Available KV cache memory: {c:.2f} GiB",
    "INFO {t} [kv_cache_utils.py:1087] GPU KV cache size: {k:,} tokens",
    "INFO {t} [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: {m:.2f}x",
    "INFO {t} [gpu_model_runner.py:2456] Graph capturing finished in {s} secs, took {d:.2f} GiB",
    "INFO {t} [core.py:210] init engine (profile, create kv cache, warmup model) took {e:.2f} seconds",
]
FRAMES = [
    ("/opt/verl/verl/single_controller/ray/base.py", 701, "func",
     "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
    ("/opt/verl/verl/single_controller/base/decorator.py", 430, "inner", "return func(*args, **kwargs)"),
    ("/opt/verl/verl/workers/megatron_workers.py", 612, "update_actor",
     "metrics = self.actor.update_policy(dataloader=dataloader)"),
    ("/opt/verl/verl/workers/actor/megatron_actor.py", 561, "update_policy",
     "metric_micro_batch = self.forward_backward_batch("),
    (f"{SITE}/megatron/core/pipeline_parallel/schedules.py", 274, "forward_step",
     "output_tensor, loss_func = forward_step_func(data_iterator, model)"),
    (f"{SITE}/torch/nn/modules/module.py", 1751, "_call_impl", "return forward_call(*args, **kwargs)"),
]


class Gen:
    """Random values, pids and a simulated clock for one run."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.workers = [self.n(20000, 400000) for _ in range(RANKS)]
        self.runner = self.n(20000, 400000)
        self.servers = [(self.n(20000, 400000), [self.n(20000, 400000) for _ in range(4)])
                        for _ in range(RANKS // 4)]
        self.t, self._sec, self._st = 0.0, -1, None
        self.step = 0

    def n(self, lo: int, hi: int) -> int:
        return self.r.randrange(lo, hi)

    def f(self, lo: float, hi: float) -> float:
        return self.r.uniform(lo, hi)

    def _tick(self) -> time.struct_time:
        if int(self.t) != self._sec:
            self._sec, self._st = int(self.t), time.gmtime(T0 + int(self.t))
        return self._st

    def stamp(self) -> str:  # vLLM logger: "06-04 22:25:57"
        return time.strftime("%m-%d %H:%M:%S", self._tick())

    def hms(self) -> str:
        return time.strftime("%H:%M:%S", self._tick())

    def ray(self, actor: str = "WorkerDict") -> str:
        pid = self.runner if actor == "TaskRunner" else self.r.choice(self.workers)
        return f"{CY}({actor} pid={pid}){RS} "

    def nested(self) -> str:
        srv, tps = self.r.choice(self.servers)
        tp = self.n(0, 4)
        return f"{CY}(vLLMHttpServer pid={srv}){RS} {CY}(Worker_TP{tp} pid={tps[tp]}){RS} "


# --- one line of each kind -------------------------------------------------------------------

def worker(g: Gen) -> str:
    return g.ray() + g.r.choice(WORKER_MSGS)(g)


def repeated(g: Gen) -> str:
    return f"{worker(g)}{GR} [repeated {g.n(2, RANKS)}x across cluster]{RS}"


def vllm_stats(g: Gen) -> str:
    return (f"{g.nested()}INFO {g.stamp()} [loggers.py:147] Engine 000: Avg prompt throughput: "
            f"{g.f(0, 9000):.1f} tokens/s, Avg generation throughput: {g.f(0, 3000):.1f} tokens/s, "
            f"Running: {g.n(0, 256)} reqs, Waiting: {g.n(0, 64)} reqs, GPU KV cache usage: "
            f"{g.f(0, 100):.1f}%, Prefix cache hit rate: {g.f(0, 100):.1f}%")


def rank_line(g: Gen) -> str:
    r = g.n(0, RANKS)
    if g.r.random() < 0.5:
        return (f"[rank{r}]:[W{g.stamp()[:5].replace('-', '')} {g.hms()}.{g.n(0, 10**9):09d} "
                f"ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank {r}]  using GPU {r % 8} to perform "
                "barrier as devices used by this process are currently unknown. This can potentially "
                "cause a hang if this rank to GPU mapping is incorrect.")
    return (f"[rank{r}]: {SITE}/torch/distributed/fsdp/_state_dict_utils.py:{g.n(700, 900)}: "
            "FutureWarning: Please use DTensor instead and we are deprecating ShardedTensor.")


def tqdm(g: Gen) -> str:
    total, k = g.n(64, 1024), 0
    bars = []
    for _ in range(g.n(3, 8)):
        k = min(total, k + g.n(1, total // 4 + 2))
        pct = 100 * k // total
        bar = ("█" * (pct // 10)).ljust(10)
        bars.append(f"Processed prompts: {pct:3d}%|{bar}| {k}/{total} [00:{g.n(0, 60):02d}<00:{g.n(0, 60):02d}, "
                    f"{g.f(1, 90):.2f}it/s, est. speed input: {g.f(100, 9000):.2f} toks/s, "
                    f"output: {g.f(100, 3000):.2f} toks/s]")
    return g.ray() + "\r".join(bars)


def warning(g: Gen) -> str:
    return (f"{g.nested()}WARNING {g.stamp()} [__init__.py:{g.n(1000, 1500)}] Default sampling parameters "
            "have been overridden by the model's Hugging Face generation config recommended from the "
            "model creator. If this is not intended, please relaunch vLLM instance with "
            "`--generation-config vllm`.")


KINDS = [worker, repeated, vllm_stats, rank_line, tqdm, warning]
WEIGHTS = [40, 10, 25, 10, 8, 7]


def step_body(g) -> str:
    """The next verl step line after its prefix (`g`: a generator with `f` and a `step` count)."""
    g.step += 1
    m = {"actor/pg_loss": g.f(-0.3, 0.3), "actor/kl_loss": g.f(0, 0.01), "actor/entropy": g.f(0.2, 1.5),
         "actor/grad_norm": g.f(0.1, 3), "actor/lr": 1e-6, "actor/pg_clipfrac": g.f(0, 0.01),
         "critic/score/mean": g.f(0, 1), "critic/score/max": 1.0, "critic/score/min": 0.0,
         "critic/rewards/mean": g.f(0, 1), "critic/advantages/mean": g.f(-0.1, 0.1),
         "response_length/mean": g.f(200, 2000), "response_length/clip_ratio": g.f(0, 0.2),
         "prompt_length/mean": g.f(100, 400), "perf/throughput": g.f(500, 3000),
         "perf/max_memory_allocated_gb": g.f(30, 70), "timing_s/gen": g.f(10, 120),
         "timing_s/reward": g.f(0.1, 5), "timing_s/old_log_prob": g.f(3, 30), "timing_s/ref": g.f(3, 30),
         "timing_s/adv": g.f(0.01, 1), "timing_s/update_actor": g.f(10, 90),
         "timing_s/update_weights": g.f(1, 10), "timing_s/step": g.f(40, 300),
         "training/global_step": g.step, "training/epoch": 0}
    body = " - ".join(f"{k}:{v:.3f}" if isinstance(v, float) else f"{k}:{v}" for k, v in m.items())
    return f"step:{g.step} - {body}"


def step_line(g: Gen) -> str:
    return g.ray("TaskRunner") + step_body(g)


def startup(g: Gen) -> list[str]:
    lines = [f"{g.ray('TaskRunner')}TaskRunner hostname: node-0, PID: {g.runner}"]
    for srv, tps in g.servers:
        for tp, pid in enumerate(tps):
            g.t += 2.5
            vals = dict(t=g.stamp(), a=g.f(2, 30), b=g.f(10, 40), c=g.f(20, 50), k=g.n(10**5, 10**6),
                        m=g.f(10, 200), s=g.n(5, 60), d=g.f(0.2, 2), e=g.f(20, 200))
            pre = f"{CY}(vLLMHttpServer pid={srv}){RS} {CY}(Worker_TP{tp} pid={pid}){RS} "
            lines += [pre + t.format(**vals) for t in VLLM_STARTUP]
    lines += [f"{g.ray('TaskRunner')}Total training steps: 5000", f"{g.ray('TaskRunner')}Training from scratch",
              f"{g.ray('TaskRunner')}validation generation end"]
    return lines


def crash(g: Gen) -> list[str]:
    """OOM tracebacks from four ranks, interleaved line by line, then the wrappers."""
    tbs, ranks = [], g.r.sample(range(RANKS), 4)
    for rank in ranks:
        pre = f"{CY}(WorkerDict pid={g.workers[rank]}){RS} "
        tb = [pre + "Traceback (most recent call last):"]
        for path, line, fn, code in FRAMES:
            tb += [f'{pre}  File "{path}", line {line}, in {fn}', f"{pre}    {code}"]
        tb.append(f"{pre}torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. "
                  f"GPU {rank % 8} has a total capacity of 79.10 GiB of which {g.f(0.1, 1.9):.2f} GiB is free. "
                  f"Of the allocated memory {g.f(60, 75):.2f} GiB is allocated by PyTorch.")
        tbs.append(tb)
    out = []
    while any(tbs):
        tb = g.r.choice([t for t in tbs if t])
        out.append(tb.pop(0))
    return out + [
        f"{g.ray('TaskRunner')}ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict."
        f"actor_rollout_update_actor() (pid={g.workers[ranks[0]]}, ip=10.0.0.2, actor_id=9f3c, repr=<WorkerDict>)",
        "Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'trainer.n_gpus_per_node=8']",
        "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace."]


def chunk(g: Gen, lines: int = 20000) -> bytes:
    buf = []
    for kind in g.r.choices(KINDS, WEIGHTS, k=lines):
        g.t += 0.01
        buf.append(step_line(g) if g.r.random() < 0.0005 else kind(g))
    return ("\n".join(buf) + "\n").encode()


def write_log(path: Path, size_bytes: int, seed: int = 0) -> None:
    g = Gen(seed)
    tail = "".join(ln + "\n" for ln in crash(g)).encode()
    budget = size_bytes - len(tail)
    with open(path, "wb") as f:
        written = f.write("".join(ln + "\n" for ln in startup(g)).encode())
        while written < budget:
            data = chunk(g)
            if written + len(data) > budget:  # last chunk: cut at a line end
                f.write(data[:data.rfind(b"\n", 0, budget - written) + 1])
                break
            written += f.write(data)
        f.write(tail)
