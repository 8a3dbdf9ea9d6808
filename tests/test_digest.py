"""The digest a model reads: bounded, redacted, built around the root cause."""

from harness.analyze import Analyzer, build_digest
from harness.playbook import load_playbook
from harness.redact import redact

SECRET_LINES = [
    "export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx",
    "HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCD",
    "curl -H 'Authorization: Bearer eyJhbGciOi.J9eyJzdWIiOiIxMjM0.c2lnbmF0dXJl'",
    "db password: hunter2hunter2",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
    "-----END OPENSSH PRIVATE KEY-----",
    "pip install --index-url https://alice:s3cretpass@pypi.example/simple x",
]
SECRETS = ["sk-proj-abcdefghijklmnopqrstuvwx", "hf_abcdefghijklmnopqrstuvwxyzABCD", "eyJhbGciOi", "hunter2hunter2",
           "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "s3cretpass"]


def digest_of(text, max_tokens=4000):
    a = Analyzer(load_playbook("verl"))
    a.feed(text.encode())
    a.finish()
    return build_digest(a.verdict(), a, max_tokens), a


def oom_log(ranks=16, noise=2000):
    lines = [f"(WorkerDict pid=9) INFO step progress line {i}" for i in range(noise)]
    lines += SECRET_LINES
    lines += ["(WorkerDict pid=9) the last line before the error"]
    for r in range(ranks):
        lines += [f"(WorkerDict pid={100 + r}) Traceback (most recent call last):",
                  f'(WorkerDict pid={100 + r})   File "/verl/workers/fsdp_workers.py", line 782, in compute_log_prob',
                  f"(WorkerDict pid={100 + r})     output = self.actor.compute_log_prob(data=data)",
                  f"(WorkerDict pid={100 + r}) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {r}.00 GiB."]
    lines += [f"(TaskRunner pid=1) tail line {i}" for i in range(30)]
    return "\n".join(lines) + "\n"


def test_digest_is_bounded_and_keeps_the_essentials():
    for max_tokens in (300, 1000, 4000):
        d, _ = digest_of(oom_log(), max_tokens)
        assert len(d) <= max_tokens * 4
        assert "torch.OutOfMemoryError: CUDA out of memory" in d
    d, _ = digest_of(oom_log(), 4000)
    assert "seen 16x" in d
    assert d.count("in compute_log_prob") == 1  # the traceback once, not 16 times
    assert "the last line before the error" in d.split("## lines before the error")[1]
    assert "tail line 29" in d.split("## tail")[1]
    assert "failed_stage=6 (training_data)" in d


def test_a_short_log_s_last_lines_reach_the_digest_whole():
    """A run silent after what it printed: the digest's tail holds its last lines — beyond the 20 the
    verdict reads (a py-spy dump pasted after the line that matters) — and each whole while the
    budget holds them (a step's metrics, the telling value last)."""
    metrics = "{" + ", ".join(f"'metric/m{i}': 0.{i:04d}" for i in range(60)) + ", 'rewards/format_reward': 0.0}"
    dump = [f"    frame_{i} (pkg/mod_{i}.py:{i})" for i in range(35)]
    d, _ = digest_of("\n".join(["step 1 started", metrics, "| 30%   41C  P8  18W / 230W |  18528MiB / 24564MiB |",
                                 "Thread 1 (idle): \"MainThread\"", *dump]) + "\n")
    tail = d.split("## tail")[1]
    assert metrics in tail and "18528MiB / 24564MiB" in tail and dump[-1].strip() in tail
    assert len(metrics) > 400  # longer than a line other lines are clipped to when the budget is short


def test_secrets_never_reach_the_digest():
    d, a = digest_of(oom_log(noise=5), 4000)
    assert "<redacted" in d or "<private-key>" in d
    for s in SECRETS:
        assert s not in d


def test_redact_spares_ordinary_keys():
    assert redact("{'TOKENIZERS_PARALLELISM': 'true'}") == "{'TOKENIZERS_PARALLELISM': 'true'}"
    assert redact("max_tokens: 4096, max_new_tokens=512") == "max_tokens: 4096, max_new_tokens=512"
    assert redact("api_key=abcd1234efgh") == "api_key=<redacted>"


def _watchdog(rank: int, seq: int, op: str, pg: int = 0) -> str:
    return (f"(WorkerDict pid={300 + rank}) [rank{rank}]:[E1013 11:12:31.456700123 ProcessGroupNCCL.cpp:2068] "
            f"[PG ID {pg} PG GUID {pg}(default_pg) Rank {rank}] Process group watchdog thread terminated with exception: "
            f"[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.")


def test_the_collectives_the_ranks_wait_in_read_together():
    """Sixteen ranks' watchdogs: fifteen in the update's all-reduce #420, one in a broadcast #419 —
    the ranks diverged and rank 7 is the odd one out; ranks that agree wait for a rank not among them
    (or the collective itself); numbers count per process group, so two groups' watchdogs are read
    apart; HCCL's notify waits that name the remote rank they wait for are counted."""
    dogs = [_watchdog(r, 419, "BROADCAST") if r == 7 else _watchdog(r, 420, "ALLREDUCE") for r in range(16)]
    said = digest_of("step:3 - actor/pg_loss:0.1\n" + "\n".join(dogs) + "\n")[0].split("\n## ")
    part = next(p for p in said if p.startswith("collectives the ranks wait in"))
    assert "ALLREDUCE #420: ranks 0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15" in part, part
    assert "BROADCAST #419: rank 7" in part and "the odd one out: rank 7 (BROADCAST #419)" in part, part
    # two groups, each agreeing within itself: no divergence
    dogs = [_watchdog(r, 420, "ALLREDUCE") for r in range(4)] + [_watchdog(r, 77, "_ALLGATHER_BASE", pg=2) for r in (0, 1)]
    part = next(p for p in digest_of("\n".join(dogs) + "\n")[0].split("\n## ") if p.startswith("collectives"))
    assert "group 0: ALLREDUCE #420: ranks 0, 1, 2, 3" in part and "group 2: _ALLGATHER_BASE #77: ranks 0, 1" in part, part
    assert "diverged" not in part and part.count("wait in the same collective") == 2, part
    # one rank's watchdog alone says nothing of the others; HCCL names the peer it waits for
    hccl = ["[ERROR] RUNTIME(37774,python):2025-09-15-01:33:15.281.764 EI0002: [PID: 37774] 2025-09-15-01:33:15.281.764 "
            "The wait execution of the Notify register times out. Reason: The Notify register has not received the "
            f"Notify record from remote rank: [5]. base information: [streamID:[2], taskID[{t}]]" for t in (8318, 8319)]
    digest = digest_of(_watchdog(3, 420, "ALLREDUCE") + "\n" + "\n".join(hccl) + "\n")[0]
    part = next(p for p in digest.split("\n## ") if p.startswith("collectives"))
    assert part.splitlines()[1:] == ["HCCL's notify waits name the remote rank they wait for: rank 5 (2x)"], part


def test_a_long_root_cause_line_reaches_the_digest_whole():
    """An assertion that prints a container's repr makes a root line of thousands of characters
    (Megatron's hook check: `… is not empty, it is: {…}`); the digest shows it whole, however long
    the lines around it, up to the root line's own limit — its end may be what tells."""
    handles = ", ".join(f"Graph{i}(): <Handle object at 0x{i:012x}>" for i in range(70))
    root = f"AssertionError: the pre-hook handles are not empty, they are: {{{handles}}}"
    frames = "".join(f'  File "/srv/tinyrl/layers/block{i}.py", line {i}, in forward\n    return self.inner(x)  '
                     f'# {"·" * 300}\n' for i in range(12))
    text = ("step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.3\nTraceback (most recent call last):\n"
            f'{frames}  File "/srv/tinyrl/graphs.py", line 88, in reset\n    assert not self.handles\n{root}\n')
    assert len(root) > 2400
    said, _ = digest_of(text)
    assert root in said.splitlines()[said.splitlines().index("## root cause") + 1], said[:600]


def test_the_last_thing_a_run_said_stays_in_the_digest_however_routine():
    """verl's register-center wait is noise in a healthy start, and dropped from the digest — but
    not the last one before the error: the wait that ran out is what the run was doing."""
    wait = "Waiting for register center actor ab12_register_center to be ready. Elapsed time: {} seconds out of 1000 seconds."
    log = "\n".join([wait.format(30), wait.format(480), wait.format(990),
                     "Traceback (most recent call last):",
                     '  File "/srv/verl/trainer/main_ppo.py", line 193, in run',
                     "    trainer.init_workers()"]) + "\n"
    d, _ = digest_of(log)
    assert wait.format(990) in d and wait.format(30) not in d, d
