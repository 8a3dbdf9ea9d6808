"""A stack dump in a log (py-spy's: what the harness gathers from a hung run, and what engineers
paste into issues) says where a silent run waits: its stage from the main thread's call path, a
collective's hang when a collective is on it, and the frame everyone waits on. Dumps of real hung
processes, taken with the real py-spy."""

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.analyze import Analyzer, build_digest
from harness.playbook import load_playbook
from test_callpath import verdict_of

pytestmark = pytest.mark.xdist_group("test_stacks")
SPY = Path(sys.executable).parent / "py-spy"

HUNG = textwrap.dedent("""\
    import sys, threading
    def all_gather(x):
        print("ready", flush=True)
        threading.Event().wait()
    def {phase}(batch):
        return all_gather(batch)
    def fit():
        {phase}([1, 2])
    fit()
    """)


def dump_of(tmp_path: Path, phase: str, *flags: str, thread: bool = False) -> str:
    """py-spy's dump of a real process hung inside `phase`, in a collective-like call (with
    `thread`, beside an idle thread of its own, as a data loader's feeder is)."""
    script = tmp_path / f"{phase}.py"
    idle = "threading.Thread(target=threading.Event().wait, name='Feeder', daemon=True).start()\n"
    script.write_text(HUNG.format(phase=phase).replace("fit()\n", (idle if thread else "") + "fit()\n"))
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        for _ in range(20):  # py-spy may catch the interpreter between two frames: try again
            r = subprocess.run([str(SPY), "dump", "--pid", str(p.pid), *flags], capture_output=True, text=True,
                               timeout=60)
            if r.returncode == 0 and "all_gather" in r.stdout:
                return r.stdout
            time.sleep(0.2)
        pytest.fail(f"py-spy dump failed: {r.stderr[-500:]}")
    finally:
        p.kill()
        p.wait()


def hung_verdict(lines: list[str]) -> dict:
    a = Analyzer(load_playbook("base"))
    a.feed(("\n".join(lines) + "\n").encode(), ts=1000.0)
    a.finish()
    return a.verdict(now=1000.0 + 7 * 86400)


@pytest.mark.skipif(not SPY.exists(), reason="py-spy is a test extra: pip install -e '.[test]'")
def test_a_dump_of_a_hung_process_says_where_the_silent_run_waits(tmp_path):
    before = ["step 3: reward 0.41", "starting the next step"]
    v = hung_verdict(before + dump_of(tmp_path, "compute_ref_log_prob").splitlines())
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["category"]) == ("hang", 6, "distributed_comm_hang"), rc
    assert rc["text"].startswith("all_gather (") and "in the collective all_gather" in rc["hint"], rc
    # another phase, the same wait: the stack names the phase; `--locals` prints each frame's
    # arguments and locals under it, which are not frames
    v = hung_verdict(before + dump_of(tmp_path, "generate_sequences", "--locals").splitlines())
    assert v["failed_stage"] == 2 and v["root_cause"]["text"].startswith("all_gather ("), v["root_cause"]


@pytest.mark.skipif(not SPY.exists(), reason="py-spy is a test extra: pip install -e '.[test]'")
def test_a_paste_that_starts_inside_a_dump_reads_its_first_thread_as_the_main_one(tmp_path):
    """An issue's paste of a dump cut above its first thread's head: the frames it starts with are
    the first thread py-spy printed, the main one, once another thread's head follows them — not
    the idle thread the paste ends on. Frame-shaped lines with no head after them are no dump."""
    dump = dump_of(tmp_path, "compute_ref_log_prob", thread=True).splitlines()
    head = next(i for i, t in enumerate(dump) if t.startswith("Thread ") and t.endswith('"MainThread"'))
    assert any(t.endswith('"Feeder"') for t in dump[head + 1:]), dump
    v = hung_verdict(dump[head + 1:])
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["category"]) == ("hang", 6, "distributed_comm_hang"), rc
    assert rc["text"].startswith("all_gather ("), rc
    said = ["    Processing (1/2)", "    Loading (model.bin)", "[INFO] starting the server on port 8000",
            "[INFO] waiting for the server to answer"]
    rc = hung_verdict(said)["root_cause"]
    assert rc["text"] == said[-1] and rc["category"] == "other", rc


def test_torch_s_operator_dispatch_only_relays_the_call_the_frame_above_it_made():
    """py-spy shows a custom op's call as `__call__ (torch/_ops.py:N)` innermost: the frame that
    waits is the one that called the op (vLLM's all-reduce), a collective's."""
    dump = ['Thread 41 (active): "MainThread"', "    __call__ (torch/_ops.py:1209)",
            "    all_reduce (vllm/distributed/device_communicators/symm_mem.py:148)",
            "    forward (vllm/model_executor/models/qwen2.py:380)", "    execute_model (vllm/v1/worker/gpu_model_runner.py:90)"]
    v = hung_verdict(["starting the next step"] + dump)
    rc = v["root_cause"]
    assert rc["text"] == "all_reduce (vllm/distributed/device_communicators/symm_mem.py:148)", rc
    assert rc["category"] == "distributed_comm_hang", rc


def test_a_dump_before_the_run_went_on_says_nothing_of_where_it_stops():
    """A stack dumped, then a stage marker: the run moved on; where it waits now is the marker's
    phase (NeMo-RL's banner as a generation begins), not the old stack's."""
    dump = ['Thread 41 (idle): "MainThread"', "    all_gather (dist.py:10)", "    compute_values (w.py:5)"]
    marker = "▶ Generating responses for batch of size 8..."
    v = hung_verdict(dump + [marker])
    assert (v["failed_stage"], v["root_cause"]["text"]) == (2, marker), v["root_cause"]
    v = hung_verdict([marker] + dump)
    assert (v["failed_stage"], v["root_cause"]["text"]) == (6, "all_gather (dist.py:10)"), v["root_cause"]
    # another thread's stack says nothing of where the main one waits
    v = hung_verdict([marker, 'Thread 43 (idle): "ThreadPoolExecutor-0_0"'] + dump[1:])
    assert v["failed_stage"] == 2, v["root_cause"]


def test_a_process_waiting_in_ray_get_waits_where_the_program_called_it():
    """`ray.get` waits in Ray's internals (as py-spy prints a real driver blocked in it: its
    `get_objects`, `get`, the client and auto-init hooks under ray/_private/): the frame that waits
    is the program's call, and a wait for a remote task is no collective."""
    dump = ['Thread 11628 (idle): "MainThread"',
            "    Worker.get_objects (ray/_private/worker.py:1007)",
            "    get (ray/_private/worker.py:3009)",
            "    client_mode_hook.<locals>.decorator.<locals>.wrapper (ray/_private/client_mode_hook.py:134)",
            "    wrap_auto_init.<locals>.auto_init_wrapper (ray/_private/auto_init_hook.py:22)",
            "    read (tinyrl/buffer/reader.py:32)",
            "    fit (tinyrl/trainer.py:70)",
            "    <module> (main.py:8)"]
    rc = hung_verdict(["step 3: reward 0.41", "starting the next step"] + dump)["root_cause"]
    assert rc["text"] == "read (tinyrl/buffer/reader.py:32)" and "collective" not in rc["hint"], rc
    # nothing of the program's on the stack (an idle Ray worker): the innermost frame
    idle = [dump[0], "    main_loop (ray/_private/worker.py:974)", "    <module> (ray/_private/workers/default_worker.py:321)"]
    assert hung_verdict(["starting the next step"] + idle)["root_cause"]["text"] == "main_loop (ray/_private/worker.py:974)"


def test_a_silent_run_ending_on_a_cpp_backtrace_names_its_innermost_named_frame():
    """c10's backtrace (`frame #N: symbol + 0xOFF (0xADDR in lib)`, innermost first) whose head was
    lost: the run stopped in what its innermost frame of named code is — NCCL's watchdog checking a
    collective's timeout —, not in the C library's thread start the backtrace ends with."""
    lib = "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"
    back = ["(PolicyWorker pid=9) frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f01 in libc10.so)",
            f"(PolicyWorker pid=9) frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout() + 0x247 (0x7ce2 in {lib})",
            f"(PolicyWorker pid=9) frame #2: c10d::ProcessGroupNCCL::Watchdog::runLoop() + 0x1591 (0x7ce3 in {lib})",
            "(PolicyWorker pid=9) frame #3: <unknown function> + 0xd3b65 (0x7d12 in /usr/lib/libstdc++.so.6)",
            "(PolicyWorker pid=9) frame #4: <unknown function> + 0x94ac3 (0x7d13 in /usr/lib/x86_64-linux-gnu/libc.so.6)"]
    rc = hung_verdict(["step 3: reward 0.41", "(Trainer pid=1) sequences before padding: 1280"] + back)["root_cause"]
    assert rc["text"].startswith("frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout"), rc
    assert rc["category"] == "distributed_comm_hang", rc
    # a backtrace of nothing named says no more than its last line
    rc = hung_verdict(["starting the next step"] + back[3:])["root_cause"]
    assert rc["text"].startswith("frame #4: <unknown function>") and rc["category"] == "other", rc


def test_the_line_after_a_dump_is_read_as_any_other():
    """A traceback that begins right after a dump's last frame keeps its head: its exception is the
    crash's root, not the dump's stack."""
    dump = ['Thread 41 (active): "MainThread"', "    all_gather (dist.py:10)", "    compute_values (w.py:5)"]
    tb = ["Traceback (most recent call last):", '  File "/srv/w.py", line 5, in compute_values',
          "    v = head(x)", "ValueError: expected 3 values, got 2"]
    v = hung_verdict(dump + tb)
    rc = v["root_cause"]
    assert (v["outcome"], rc["text"], v["failed_stage"]) == ("crash", tb[-1], 6), rc


@pytest.mark.skipif(not SPY.exists(), reason="py-spy is a test extra: pip install -e '.[test]'")
def test_the_hang_evidence_says_where_each_process_waits_as_the_analyzer_reads_it(tmp_path):
    """The evidence's line per process names the frame the analyzer roots the hang in and the
    collective on the stack; a process with no stack, its kernel wait channel."""
    from harness.remote.evidence import summary

    dump = dump_of(tmp_path, "compute_ref_log_prob")
    raw = ("== process 4242 state S cpu_ticks 0 hz 100 wchan futex_wait_queue\ncmd python fit.py\n" + dump +
           "== process 4243 state D cpu_ticks 3 hz 100 wchan io_schedule\ncmd bash run.sh\n")
    lines = summary(raw)
    root = hung_verdict(dump.splitlines())["root_cause"]["text"]
    assert lines[0].startswith(f"pid 4242 S 0.00s CPU/s in {root}, in the collective all_gather — python fit.py"), lines
    assert lines[1] == "pid 4243 D 0.03s CPU/s kernel wait io_schedule — bash run.sh", lines


PEER = textwrap.dedent("""\
    import os, threading, time
    def all_reduce(grads):
        threading.Event().wait()
    def update_actor(batch):
        all_reduce(batch)
    def compute_score(batch):
        while True:
            time.sleep(0.05)
    def serve():
        threading.Event().wait()
    print("ready", flush=True)
    {"late": compute_score, "idle": lambda batch: serve()}.get(os.environ["ROLE"], update_actor)([1, 2])
    """)


def dumps_of(tmp_path: Path, roles: list[str]) -> str:
    """py-spy's dumps of real processes started with one command line (as torchrun starts ranks),
    each in the part its ROLE gives it (`idle`: another command line, a server waiting at its top),
    one after another as a hang's evidence holds them."""
    script = tmp_path / "peer.py"
    script.write_text(PEER)
    procs = [subprocess.Popen([sys.executable, str(script)] + (["--serve"] if role == "idle" else []),
                              stdout=subprocess.PIPE, text=True, env={"ROLE": role, "PATH": "/usr/bin:/bin"})
             for role in roles]
    try:
        assert all(p.stdout.readline().strip() == "ready" for p in procs)
        out = []
        for p in procs:
            for _ in range(20):  # py-spy may catch the interpreter between two frames: try again
                r = subprocess.run([str(SPY), "dump", "--pid", str(p.pid)], capture_output=True, text=True, timeout=60)
                if r.returncode == 0 and "<module>" in r.stdout:
                    break
                time.sleep(0.2)
            out.append(f"== process {p.pid}\n{r.stdout}")
        return "".join(out), [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.mark.skipif(not SPY.exists(), reason="py-spy is a test extra: pip install -e '.[test]'")
def test_the_process_its_peers_wait_for_in_a_collective_is_where_the_run_hangs(tmp_path):
    """Ranks of one command line, two waiting in the update's all-reduce and one still scoring:
    the one the others wait for is where the run hangs — its frame the root cause, its call path
    the stage (the reward), a collective's hang — not the all-reduce everyone else sits in. A
    process of another command line (a server waiting for requests) is no peer of theirs."""
    from harness.analyze.stacks import dumps, waited_on
    from harness.remote.evidence import waited
    text, pids = dumps_of(tmp_path, ["wait", "late", "wait"])
    late, n, op = waited_on(dumps(text))
    assert ([p.pid for p in late], n, op) == ([str(pids[1])], 2, "all_reduce"), (late, n, op)
    assert waited(text).startswith(f"waited on: pid {pids[1]}, in compute_score (peer.py:"), waited(text)
    a = Analyzer(load_playbook("base"))
    a.feed(b"step 3: reward 0.41\nstarting the next step\n", ts=1000.0)
    a.finish()
    a.saw(text)
    v = a.verdict(now=1000.0 + 7 * 86400)
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["category"]) == ("hang", 5, "distributed_comm_hang"), rc
    assert rc["text"].startswith("compute_score (") and "2 process(es) of its kind wait in the collective all_reduce" \
        in rc["hint"], rc
    # every peer in the collective: the collective is where it hangs (the update's)
    text, _ = dumps_of(tmp_path, ["wait", "idle", "wait"])
    assert waited_on(dumps(text)) is None and waited(text) is None
    a = Analyzer(load_playbook("base"))
    a.feed(b"starting the next step\n", ts=1000.0)
    a.finish()
    a.saw(text)
    v = a.verdict(now=1000.0 + 7 * 86400)
    assert (v["failed_stage"], v["root_cause"]["text"][:12]) == (7, "all_reduce ("), v["root_cause"]


WATCHDOG_TIMEOUT = [
    "[rank1]:[E1203 02:11:40.073493187 ProcessGroupNCCL.cpp:629] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=88, OpType=ALLGATHER, NumelIn=1024, NumelOut=4096, Timeout(ms)=600000) ran for "
    "600014 milliseconds before timing out.",
    "[rank1]:[E1203 02:11:40.073594829 ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) Rank 1]  failure "
    "detected by watchdog at work sequence id: 88 PG status: last enqueued work: 88, last completed work: 87"]
FLIGHT = ["[rank1]:[E1203 02:11:40.074084476 ProcessGroupNCCL.cpp:664] Stack trace of the failed collective: ",
          "#0 all_gather_into_tensor from /venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py:3712",
          "#1 wrapper from /venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py:81",
          "#2 _gather_logits from /srv/tinyrl/workers/actor.py:301",
          "#3 compute_log_prob from /srv/tinyrl/workers/actor.py:288",
          "#4 fit from /srv/tinyrl/trainer.py:140"]
AFTER = ["[rank1]:[E1203 02:11:40.074100000 ProcessGroupNCCL.cpp:681] [Rank 1] Some NCCL operations have failed or "
         "timed out."]
LOADING = [f"INFO 12-03 02:0{i % 10}:00 [loader.py:12] loading shard {i} of 40" for i in range(40)]


def test_the_stack_torch_s_flight_recorder_printed_says_where_the_timed_out_collective_was_called():
    """Under a watchdog's timeout torch prints, when its flight recorder holds the collective, the
    stack it was called from (`#N func from path:line`, innermost first): the work its frames name is
    where every rank of the group waits — here the log-probs' gather, not the stage after the last
    one passed; the digest shows that call path. Without it the stage is the lifecycle's guess."""
    pb = load_playbook("base")
    a = Analyzer(pb)
    a.feed(("\n".join(LOADING + WATCHDOG_TIMEOUT + FLIGHT + AFTER) + "\n").encode(), ts=1000.0)
    a.finish()
    v = a.verdict(now=1000.0 + 7 * 86400)
    assert (v["outcome"], v["failed_stage"], v["stage_basis"]) == ("hang", 6, "called"), v["root_cause"]
    said = build_digest(v, a).split("\n## ")
    assert "stage_basis=called" in said[0], said[0]
    called = next(s for s in said if s.startswith("where the collective was called")).splitlines()[1:]
    assert called[:2] == ["fit (/srv/tinyrl/trainer.py:140)", "compute_log_prob (/srv/tinyrl/workers/actor.py:288)"]
    assert called[-1].startswith("all_gather_into_tensor (")
    v = hung_verdict(LOADING + WATCHDOG_TIMEOUT + AFTER)
    assert v["failed_stage"] != 6 and v["stage_basis"] == "lifecycle", v["failed_stage"]


def test_a_collective_that_timed_out_after_an_update_is_a_hang_not_a_pass():
    """After a healthy update, a consequence (an engine process gone as the run shuts down) is no
    failure of the run; a collective's watchdog timing out is: every rank waited its whole timeout."""
    union = load_playbook(None)  # read as it stands, no clock: silence says nothing
    step = ["step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.3"]
    v = verdict_of(union, step + WATCHDOG_TIMEOUT + FLIGHT + AFTER)
    assert (v["outcome"], v["failed_stage"], v["stage_basis"]) == ("hang", 6, "called"), v["outcome"]
    v = verdict_of(union, step + ["ERROR 12-03 02:20:11 [core_client.py:562] Engine core proc EngineCore_0 died "
                             "unexpectedly, shutting down client."])  # vLLM says so at a normal shutdown too
    assert v["outcome"] == "pass", v["root_cause"]
