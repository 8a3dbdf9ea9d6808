"""The analyzer's mechanics on small real-shaped logs, with a playbook written for the test."""

import contextlib
import io
import math
import pprint
import socketserver

import pytest

from harness.analyze import Analyzer
from harness.playbook import load_playbook

# the module fixture is built once: its tests share one xdist worker
pytestmark = pytest.mark.xdist_group("test_analyzer")

PLAYBOOK = r"""
name: t
prefixes:
  - {id: ray, regex: '^\((?P<actor>[A-Za-z_][\w.<>:-]*)?,? ?(?:pid=(?P<pid>\d+))?(?:, ip=(?P<ip>[\d.]+))?\) ?', evidence: t}
  - {id: rank, regex: '^\[rank(?P<rank>\d+)\]:(?:\[[EWI]\d{3,4} [^\]]+\] )? ?', evidence: t}
stages:
  engine_start: {timeout: 600, markers: [{id: e, regex: 'init engine \(profile, create kv cache, warmup model\) took', evidence: t}]}
  completion: {timeout: 300, markers: [{id: c, regex: '^validation generation end$', evidence: t}]}
  actor_update: {markers: [{id: s, regex: '^step:\d+ - ', evidence: t}]}
signatures:
  - {id: oom, regex: 'CUDA out of memory', category: oom, evidence: t}
  - {id: raytask, regex: 'ray\.exceptions\.RayTaskError', category: other, role: wrapper, evidence: t}
  - {id: watchdog, regex: 'Watchdog caught collective operation timeout', category: distributed_comm_hang, role: downstream, outcome: hang, evidence: t}
  - {id: hccp, regex: 'EJ0001: .*Failed to initialize the HCCP process', category: device_runtime_error, class: infra, priority: 20, evidence: t, fix: {kind: cleanup_retry}}
  - {id: npu_hdr, regex: '\[ERROR\] [\d:-]+ \(PID:\d+, Device:\d+, RankID:\d+\) ERR\d{5}', category: device_runtime_error, role: wrapper, evidence: t}
categories:
  - {id: fam_timeout, regex: 'TimeoutError|timed out', category: timeout, evidence: t}
  - {id: fam_config, regex: 'not compatible with', category: config_mismatch, evidence: t}
stage_hints:
  - {id: gen, regex: '(?:in |\.)(?:actor_rollout_)?generate_sequences(?:\(\))?$', stage: trajectory, evidence: t}
  - {id: logp, regex: 'in compute_log_prob$', stage: training_data, evidence: t}
  - {id: init, regex: 'init_model(?:\(\))?$', stage: engine_start, evidence: t}
metric_lines:
  - {id: step, regex: '^step:\d+ - ', evidence: t}
metrics:
  loss: ['actor/pg_loss']
  grad_norm: ['actor/grad_norm']
metric_rules:
  - {id: grad_nan, metric: grad_norm, when: nonfinite, category: precision_dtype, stage: actor_update}
"""

ENGINE = "(WorkerDict pid=7) INFO 06-04 22:25:57 [core.py:210] init engine (profile, create kv cache, warmup model) took 12.3 seconds\n"


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    p = tmp_path_factory.mktemp("pb") / "t.yaml"
    p.write_text(PLAYBOOK)
    return load_playbook(str(p))


def run(pb, text, *, chunk=None, ts=None, now=None):
    a = Analyzer(pb)
    data = text.encode() if isinstance(text, str) else text
    step = chunk or len(data) or 1
    for i in range(0, len(data), step):
        a.feed(data[i:i + step], ts=ts)
    a.finish()
    return a.verdict(now=now), a


def traceback(prefix, exc, funcs=("main", "compute_log_prob")):
    frames = "".join(f'{prefix}  File "/x/{f}.py", line {i}, in {f}\n{prefix}    {f}()\n' for i, f in enumerate(funcs))
    return f"{prefix}Traceback (most recent call last):\n{frames}{prefix}{exc}\n"


def interleave(*blocks):
    lines = [b.splitlines(keepends=True) for b in blocks]
    out = []
    for i in range(max(map(len, lines))):
        out += [ls[i] for ls in lines if i < len(ls)]
    return "".join(out)


def test_interleaved_tracebacks_from_16_ranks_are_one_finding_with_count(pb):
    tbs = [traceback(f"(WorkerDict pid={100 + r}) ", f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {r}.00 GiB.")
           for r in range(16)]
    v, _ = run(pb, ENGINE + interleave(*tbs))
    assert v["outcome"] == "crash"
    rc = v["root_cause"]
    assert rc["category"] == "oom" and rc["count"] == 16
    assert rc["text"].startswith("torch.OutOfMemoryError")
    assert v["failed_stage"] == 6 and v["last_stage_passed"] == 1  # compute_log_prob → training_data
    assert len(v["findings"]) == 1


def _served_error(client: tuple) -> list[str]:
    """What socketserver prints for a request whose handler raised (its real `handle_error`)."""
    buf = io.StringIO()
    try:
        np_choice = [].index  # a real frame and its statement, raising
        np_choice("p")
    except ValueError:
        with contextlib.redirect_stderr(buf):
            socketserver.BaseServer.handle_error(None, None, client)
    return buf.getvalue().splitlines()


def test_a_traceback_another_thread_writes_into_goes_on_after_its_lines(pb):
    """A threaded server prints each failed request's traceback between rules; two requests that
    fail at once interleave: the second's rule and `Exception occurred …` land between two
    lines of the first's traceback, wherever the thread switch fell. The traceback goes on after
    them: its exception is the root cause, never a traceback `cut short`."""
    first, second = _served_error(("127.0.0.1", 60208)), _served_error(("127.0.0.1", 60218))
    head = first.index("Traceback (most recent call last):")
    want = first[-2]
    assert want.startswith("ValueError:"), first
    for k in range(head + 1, len(first) - 2):
        lines = first[:k] + second[:2] + first[k:] + second[2:]
        v, _ = run(pb, ENGINE + "".join(f"(vLLMHttpServer pid=9) {ln}\n" for ln in lines))
        assert v["root_cause"]["text"] == want and v["outcome"] == "crash", (k, v["root_cause"])
        assert not [f for f in v["findings"] if "cut short" in f["text"]], (k, v["findings"])


def test_a_bare_exception_s_message_ends_where_a_record_with_a_head_of_its_own_begins():
    """An exception printed bare (no logger head, as Python prints it), then the collective
    library's records (c10d's `[E ProcessGroupNCCL.cpp:N]` lines) as the process is taken down and
    the other ranks' watchdogs fire: those records are no part of the exception's message, and the
    exception, the earliest error, is the root cause."""
    nccl = ["[E ProcessGroupNCCL.cpp:456] Some NCCL operations have failed or timed out. Due to the "
            "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
            "[E ProcessGroupNCCL.cpp:461] To avoid data inconsistency, we are taking the entire process down.",
            "terminate called after throwing an instance of 'std::runtime_error'",
            "  what():  [Rank 2] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=696, "
            "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1802763 milliseconds before timing out."]
    v, _ = run(load_playbook(None), ENGINE + "RuntimeError: Invalid mt19937 state\n" + "".join(ln + "\n" for ln in nccl))
    assert v["root_cause"]["text"] == "RuntimeError: Invalid mt19937 state", v["root_cause"]


def test_an_exception_line_a_paste_indented_past_the_code_is_the_traceback_s_exception(pb):
    """A paste that indents the exception as deep as the frames' code (or deeper): still the
    traceback's exception, read with its message — never a crash of the analyzer."""
    for indent in ("    ", "        "):
        log = ["Traceback (most recent call last):", '  File "/srv/tinyrl/loader.py", line 31, in read_row',
               "    row = json.loads(line)", f"{indent}ValueError: row 17 has no prompt field"]
        v, _ = run(pb, "".join(ln + "\n" for ln in log))
        assert v["outcome"] == "crash" and v["root_cause"]["text"].strip() == "ValueError: row 17 has no prompt field", v


def test_a_traceback_interrupted_for_good_is_cut_short(pb):
    """Interrupted and never resumed: more lines than a thread's interjection, then no frame,
    source line or exception: the traceback is cut short where its frames stopped."""
    first = _served_error(("127.0.0.1", 60208))
    cut = first.index(next(ln for ln in first if ln.lstrip().startswith("np_choice(")))
    lines = first[:cut + 1] + ["worker restarting", "  listening on :8000", "INFO: ready", "INFO: waiting", "tick"]
    v, _ = run(pb, ENGINE + "".join(f"(vLLMHttpServer pid=9) {ln}\n" for ln in lines))
    assert v["outcome"] == "crash" and "(cut short after" in v["root_cause"]["text"], v["root_cause"]
    assert v["root_cause"]["text"].endswith('np_choice("p"))'), v["root_cause"]


def test_ranks_failing_alike_are_read_from_the_one_shown_in_full(pb):
    """Ranks print the same failure at once: one rank's traceback cut short by the others' lines
    (or by the window) says less than another rank's exception shown in full, wherever it comes."""
    def tb(rank, frames_only):
        out = [f"[rank{rank}]: Traceback (most recent call last):",
               f'[rank{rank}]:   File "/srv/run/train.py", line 40, in <module>', f"[rank{rank}]:     main()",
               f'[rank{rank}]:   File "/srv/run/train.py", line 31, in main', f"[rank{rank}]:     step(batch)"]
        return out if frames_only else out + [
            f'[rank{rank}]:   File "/srv/run/model.py", line 12, in step', f"[rank{rank}]:     y = self.mlp(x)",
            f"[rank{rank}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU {rank} "
            "has a total capacity of 79.10 GiB of which 6.00 MiB is free."]
    v, _ = run(pb, ENGINE + "\n".join(tb(7, True) + tb(6, False) + tb(3, True)) + "\n")
    assert (v["root_cause"]["category"], v["root_cause"]["text"][:22]) == ("oom", "torch.OutOfMemoryError"), \
        v["root_cause"]
    v, _ = run(pb, ENGINE + "\n".join(tb(7, True)) + "\n")  # alone, the cut one is all there is
    assert "(cut short after" in v["root_cause"]["text"], v["root_cause"]


def test_a_paste_that_starts_under_a_frame_s_statement_ends_in_its_exception(pb):
    """An issue's paste cut inside one rank's traceback (its first line the carets under a
    statement) ends with that rank's exception — a bare `AssertionError`: the error, before the
    next rank's traceback cut short; a log whose first line is not a traceback's reads no bare
    type as an exception."""
    other = ("[rank0]: Traceback (most recent call last):\n"
             '[rank0]:   File "/srv/run/train.py", line 5, in <module>\n[rank0]:     main()\n')
    v, _ = run(pb, "[rank1]:            ^^^^^^^^^^^^^^^^^^^^\n[rank1]: AssertionError\n" + other)
    assert v["root_cause"]["text"] == "AssertionError", v["root_cause"]
    v, _ = run(pb, "[rank1]: loading shards\n[rank1]: AssertionError\n" + other)
    assert v["root_cause"]["text"] != "AssertionError", v["root_cause"]


def test_a_process_whose_first_lines_are_a_failed_assert_ends_in_its_bare_assertion_error(pb):
    """Workers logging their tracebacks line by line into one log, pasted with a `...` between: the
    second worker's lines begin under the frame of an `assert` (the statement, the carets) and end in
    a bare `AssertionError` — its error, read before the first worker's traceback cut short. A
    process that printed other lines first reads no bare type after an indented line."""
    w1, w2 = "(Worker pid=11) ", "(Worker pid=12) "
    log = (f"{w1}Traceback (most recent call last):\n"
           f'{w1}  File "/srv/eng/layers.py", line 151, in apply\n{w1}    y = self.wrapper.add(x)\n'
           "...\n"
           f"{w2}    assert mapping.size(0) == rows\n{w2}           ^^^^^^^^^^^^^^^^^^^^^^^^^\n{w2}AssertionError\n")
    for fast in (True, False):
        a = Analyzer(pb, fast=fast)
        a.feed(log.encode())
        a.finish()
        assert a.verdict()["root_cause"]["text"] == "AssertionError"
    v, _ = run(pb, f"{w2}loading shards\n{w2}    assert mapping.size(0) == rows\n{w2}AssertionError\n")
    assert (v["root_cause"] or {}).get("text") != "AssertionError"


def test_a_message_logged_then_raised_with_its_frames_is_the_exception():
    """c10d logs its socket error, then raises it with the same words under a traceback: one
    block, and its root is the exception with its call path (set-up here), not the logged line."""
    msg = "The client socket has timed out after 300000ms while trying to connect to (127.0.0.1, 51216)."
    log = (f"[E1118 17:30:24.226257071 socket.cpp:1019] [c10d] {msg}\n"
           "Traceback (most recent call last):\n"
           '  File "/srv/tinyrl/client.py", line 348, in init_communicator\n'
           "    pg = Group.create(host, port)\n"
           f"torch.distributed.DistNetworkError: {msg}\n")
    v, _ = run(load_playbook(None), log)
    assert v["root_cause"]["text"] == f"torch.distributed.DistNetworkError: {msg}"
    assert v["failed_stage"] == 1


def test_a_remote_traceback_cut_short_says_where_it_stopped(pb):
    """Ray's unhandled-error line names the remote call; its traceback cut before the exception
    (the log ends) still says where the call was: its frames place it (set-up, where a class is
    being built — verl's `vLLMRollout`, a brand before its acronym), its last statement is in the text."""
    log = ("(Runner pid=3) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
           "ray::WorkerDict.actor_rollout_ref_init_model() (pid=5, ip=10.0.0.2, actor_id=ab12)\n"
           '(Runner pid=3)   File "/srv/verl/workers/fsdp_workers.py", line 454, in init_model\n'
           "(Runner pid=3)     self._build_rollout()\n"
           '(Runner pid=3)   File "/srv/verl/workers/fsdp_workers.py", line 392, in _build_rollout\n'
           "(Runner pid=3)     self.rollout = vLLMRollout(\n")
    v, _ = run(pb, log)
    assert v["failed_stage"] == 1, v["root_cause"]
    assert v["root_cause"]["text"].endswith("in _build_rollout: self.rollout = vLLMRollout(, "
                                            "called as self._build_rollout())"), v["root_cause"]


def test_an_engine_woken_from_sleep_mode_is_syncing_weights_for_a_rollout():
    """vLLM logs how long its workers took to wake up from sleep mode: colocated trainers wake the
    engine before each rollout, so what fails next is the completion stage's."""
    log = (ENGINE + "(WorkerDict pid=7) INFO 12-05 01:02:03 [executor_base.py:205] It took 1.241156 seconds to "
           "wake up tags ['weights'].\n"
           "(WorkerDict pid=7) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n")
    v, _ = run(load_playbook(None), log)
    assert (v["failed_stage"], v["root_cause"]["category"]) == (2, "oom"), v["root_cause"]


def test_wrapper_is_not_the_root_cause_inner_exception_is(pb):
    log = ENGINE + (
        '(TaskRunner pid=1) Traceback (most recent call last):\n'
        '(TaskRunner pid=1)   File "main.py", line 3, in fit\n'
        '(TaskRunner pid=1) ray.exceptions.RayTaskError(ValueError): ray::WorkerDict.actor_rollout_generate_sequences() (pid=5, ip=1.2.3.4)\n'
        '(TaskRunner pid=1)   File "worker.py", line 9, in generate_sequences\n'
        '(TaskRunner pid=1)     raise ValueError("bad prompt")\n'
        '(TaskRunner pid=1) ValueError: bad prompt\n')
    v, _ = run(pb, log)
    assert v["root_cause"]["text"] == "ValueError: bad prompt"
    assert v["root_cause"]["category"] == "other"  # a bare ValueError is in no family: not a guess
    assert v["failed_stage"] == 4


def test_an_unmatched_error_gets_the_category_of_its_family():
    """No signature names it: the playbook's error families reason from the type and message."""
    p = load_playbook("base")
    for line, category in [("ValueError: GRPO with vLLM is not compatible with `device_map`", "config_mismatch"),
                           ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB", "oom"),
                           ("KeyError: 'model.layers.3.mlp.gate_proj.weight'", "weight_mapping"),
                           ("KeyError: 'ground_truth'", "data_format"),
                           ("TypeError: generate() got an unexpected keyword argument 'use_tqdm'", "version_incompat"),
                           # a message that ends in `not supported`: an option the code refuses
                           ("RuntimeError: Speculative decoding and pipeline parallelism are currently not supported.",
                            "config_mismatch"),
                           ("ValueError: LoRA is not supported with expert parallelism", "config_mismatch"),
                           ("RuntimeError: CUDA error: operation not supported", "device_runtime_error"),
                           ("ValueError: not supported values remain in the batch: 3", "other"),
                           ("AttributeError: 'NoneType' object has no attribute 'shape'", "other"),
                           ("ZeroDivisionError: division by zero", "other")]:
        v, _ = run(p, f"Traceback (most recent call last):\n  File \"/x/a.py\", line 1, in main\n{line}\n")
        assert (line, v["root_cause"]["category"]) == (line, category)


def test_errors_of_a_class_get_its_category_however_the_library_words_them():
    """Classes, each worded by several libraries: a process killed by SIGKILL (the host's OOM
    killer) as a shell, a launcher or a container runtime reports it, or dead of its own fault; a
    connection no client could open; a communicator torn down; a model type the installed library
    does not know; a path the run may not use; an HTTP client's timeout (a type that ends in
    Timeout, not Error); NaN reports; a Ray node lost; CUDA in a forked child."""
    p = load_playbook(None)
    for line, category in [("./run_grpo.sh: line 12:  4123 Killed                  python3 -m verl.trainer.main_ppo", "oom"),
                           ("srun: error: gpu-node-12: task 3: Killed", "oom"),
                           ("Killed", "oom"),
                           ("[launcher] worker 3 exited with code 137", "oom"),
                           ("aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:30000 "
                            "ssl:default [Connect call failed ('127.0.0.1', 30000)]", "network_proxy"),
                           ("RuntimeError: NCCL communicator was aborted on rank 3.", "distributed_comm_hang"),
                           # the RDMA fabric's verbs fail with an errno that reads like a TCP connect's
                           ("node-3:1112:13532 [0] ibvwrap.c:160 NCCL WARN Call to ibv_modify_qp failed with error "
                            "Connection timed out", "distributed_comm_hang"),
                           ("node-3:1112:13532 [0] misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with "
                            "110 Connection timed out, on dev mlx5_0:1, curr state INIT, next state RTR",
                            "distributed_comm_hang"),
                           ("OSError: Failed to connect to 10.0.0.3 port 8000: Connection timed out", "network_proxy"),
                           ("ValueError: Tokenizer class Qwen9Tokenizer does not exist or is not currently imported.",
                            "version_incompat"),
                           ("ValueError: The checkpoint you are trying to load has model type `qwen9` but Transformers "
                            "does not recognize this architecture.", "version_incompat"),
                           ("ValueError: Model architectures ['Qwen9ForCausalLM'] are not supported for now.", "version_incompat"),
                           ("PermissionError: [Errno 13] Permission denied: '/mnt/ckpt/global_step_100'", "config_mismatch"),
                           ("requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=8000): "
                            "Read timed out. (read timeout=60)", "timeout"),
                           ("ray.exceptions.NodeDiedError: Task failed due to the node (node_id: 1a2b) where this task "
                            "was running crashed unexpectedly.", "other"),
                           ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
                            "multiprocessing, you must use the 'spawn' start method", "device_runtime_error"),
                           ("ValueError: Cannot find model module 'Qwen9ForCausalLM' in vllm", "version_incompat"),
                           ("RuntimeError: Triton Error [CUDA]: out of resource: shared memory, Required: 131072, "
                            "Hardware limit: 101376", "device_runtime_error"),
                           # a library's Triton kernel that does not compile on this stack (Triton's message, re-raised)
                           ("RuntimeError: at 63:4:", "version_incompat"),
                           ("torch._inductor.exc.InductorError: RuntimeError: Triton compilation failed: "
                            "triton_poi_fused_add_0", "version_incompat"),
                           ("RuntimeError: Function 'LogSoftmaxBackward0' returned nan values in its 0th output.",
                            "precision_dtype"),
                           # a native library's death: the shell's report of the signal, glibc's heap
                           # check, a C++ exception escaping (its `what():` names the class), a Rust panic
                           ("Illegal instruction (core dumped)", "other"),
                           ("double free or corruption (!prev)", "other"),
                           ("terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc", "oom"),
                           ("thread 'tokio-runtime-worker' panicked at src/router.rs:412:41:\n"
                            "called `Option::unwrap()` on a `None` value", "other"),
                           # set-up the run is missing: credentials, a runtime env, a pad token; an
                           # environment built for another toolchain; a GPU without bf16; collectives
                           # that differ between ranks; turns that do not fit a chat template
                           ("huggingface_hub.errors.GatedRepoError: 403 Client Error. (Request ID: Root=1-abc)",
                            "config_mismatch"),
                           ("openai.AuthenticationError: Error code: 401 - {'error': {'message': 'Incorrect API key "
                            "provided'}}", "config_mismatch"),
                           ("ray.exceptions.RuntimeEnvSetupError: Failed to set up runtime environment.", "config_mismatch"),
                           ("ValueError: Asking to pad but the tokenizer does not have a padding token.", "config_mismatch"),
                           ("OSError: libcudart.so.12: cannot open shared object file: No such file or directory",
                            "version_incompat"),
                           ("RuntimeError: Error building extension 'fused_adam'", "version_incompat"),
                           ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
                            "precision_dtype"),
                           ("RuntimeError: Detected mismatch between collectives on ranks. Rank 0 is running "
                            "collective: CollectiveFingerPrint(OpType=ALLREDUCE)", "distributed_comm_hang"),
                           ("jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/...",
                            "data_format"),
                           # data that came out empty
                           ("RuntimeError: cannot reshape tensor of 0 elements into shape [1, 0, -1, 128] because the "
                            "unspecified dimension size -1 can be any value and is ambiguous", "data_format"),
                           ("ValueError: num_samples should be a positive integer value, but got num_samples=0",
                            "data_format"),
                           ("IndexError: index -1 is out of bounds for dimension 0 with size 0", "data_format"),
                           # batch arithmetic and devices the configuration asks for
                           ("ValueError: The global train batch size (3 x 1) must be evenly divisible by the number of "
                            "generations per prompt (4).", "config_mismatch"),
                           ("AssertionError: Check batch related parameters. train_batch_size is not equal to "
                            "micro_batch_per_gpu * gradient_acc_step * world_size 256 != 4 * 8 * 4", "config_mismatch"),
                           ("AssertionError: Rollout batch (30) is not a multiple of the number of learners (4)",
                            "config_mismatch"),
                           ("ValueError: Packed sequences do not support a pipeline-parallel size above 1.", "config_mismatch"),
                           ("ValueError: Total available GPUs 4 is less than total desired GPUs 8", "config_mismatch"),
                           ("ValueError: The number of required GPUs exceeds the total number of available GPUs in the "
                            "placement group.", "config_mismatch"),
                           ("[ERROR] failed (exitcode: -6) local_rank: 0 (pid: 1234) of binary: /usr/bin/python3", "other"),
                           # a readiness wait that ran out, as launchers word it; an Ascend fused
                           # operator refusing its inputs (torch_npu's ATB wrapper, logged or raised)
                           ("RuntimeError: Reward server failed to start within 30 seconds.", "timeout"),
                           ("RuntimeError: engine did not become ready within 600s", "timeout"),
                           ("ERROR:2026-12-05 04:35:13,188:Error invoking MCP tool search: Timed out while waiting for "
                            "response to ClientRequest. Waited 60.0 seconds.", "timeout"),
                           ("[rank2]:[E101 10:00:00.000000000 compiler_depend.ts:422] setup failed!", "device_runtime_error"),
                           ("RuntimeError: setup failed!", "device_runtime_error"),
                           # an NPU core's fault inside a kernel, as CANN's runtime and its AIC dump word it
                           ("(Worker_TP1 pid=7) ERROR 11-20 02:28:06 [multiproc_executor.py:671]        The error from "
                            "device(chipId:1, dieId:0), serial number is 3, there is an exception of aivec error, core "
                            "id is 4, error code = 0x800000", "device_runtime_error"),
                           ("[AIC_INFO] The write address of the MTE instruction is out of range.", "device_runtime_error"),
                           # a launcher's or an orchestrator's report of a child that exited with an error code
                           ("10:46:04   ERROR Error: Trainer failed with exit code 1", "other"),
                           ("Status message: Job entrypoint command failed with exit code 1, last available logs "
                            "(truncated to 20,000 chars):", "other"),
                           # a c10d client that could not reach another host's address; this host's own
                           # port not answering is a peer that is not up
                           ("[E101 10:00:00.1 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms "
                            "while trying to connect to (10.8.0.3, 29500).", "network_proxy"),
                           ("[E101 10:00:00.1 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms "
                            "while trying to connect to (127.0.0.1, 29500).", "distributed_comm_hang")]:
        v, _ = run(p, ENGINE + line + "\n")
        waited = "trying to connect" in line  # the c10d connect's timeout: a wait that ran out
        assert (line, v["outcome"], (v["root_cause"] or {}).get("category")) == \
            (line, "hang" if waited else "crash", category)


def test_weights_a_rollout_engine_could_not_load_are_the_weight_sync_s_mapping():
    """SGLang logs a weight update whose load_weights raised and returns the failure to the
    trainer: whatever the message (a shape, an expert range), the pushed layout does not fit."""
    p = load_playbook(None)
    line = ("(SGLangEngine pid=7) [2026-05-21 16:07:41 DP6 TP6] Failed to update parameter online: The size of tensor a "
            "(4096) must match the size of tensor b (2048) at non-singleton dimension 0. The full weights of the "
            "ModelRunner are partially updated. Please discard the whole weights.")
    v, _ = run(p, ENGINE + "step:1 - actor/pg_loss:0.2 - actor/grad_norm:1.0\n" + line + "\n")
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("crash", 2, "weight_mapping"), v["root_cause"]


def test_a_monitored_barrier_s_original_exception_is_how_the_wait_ended():
    """torch's monitoredBarrier wraps the transport's error after `Original exception:`: a rank that
    waited on rank 0 is rooted in the gloo wait that timed out; rank 0's report, whose original
    exception only says the peer left, keeps its own line, which names the rank that failed."""
    p = load_playbook(None)
    waited = ["[rank3]: RuntimeError: Rank 3 successfully reached monitoredBarrier, but received errors while "
              "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
              "[rank3]:  Original exception: ",
              "[rank3]: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 600000ms "
              "for recv operation to complete"]
    v, _ = run(p, ENGINE + "\n".join(waited) + "\n")
    assert (v["root_cause"]["text"], v["root_cause"]["category"]) == (waited[2][9:], "distributed_comm_hang")
    rank0 = ["RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms", " Original exception: ",
             "[gloo/transport/tcp/pair.cc:598] Connection closed by peer [::1]:8594"]
    v, _ = run(p, ENGINE + "\n".join(rank0) + "\n")
    assert (v["root_cause"]["text"], v["root_cause"]["category"]) == (rank0[0], "distributed_comm_hang")


def test_an_fp16_loss_scale_below_one_is_a_run_that_learns_nothing():
    """Apex/Megatron and DeepSpeed halve the fp16 loss scale on each overflow: at a sane scale that
    is the scaler finding its level; below 1 every step overflows and is skipped."""
    p = load_playbook(None)
    sane = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
    assert run(p, ENGINE + sane)[0]["root_cause"] is None
    for line in ["Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 6.103515625e-05",
                 "[INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                 "Attempted loss scale: 1, reducing to 0"]:
        v, _ = run(p, ENGINE + sane + line + "\n")
        assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 7, "precision_dtype")
    v, _ = run(p, ENGINE + "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.\n")
    assert (v["outcome"], v["root_cause"]["category"]) == ("crash", "precision_dtype")


def test_metrics_in_a_shape_no_playbook_names_are_held_to_their_own_values():
    """A trainer's own metric print, a tqdm postfix (OpenRLHF's `policy_loss=…, kl=…`), a dict of
    another key order: three or more pairs with a loss, reward or grad norm among them. A NaN there
    is a wrong result; a loss that only moves is not judged there (only a playbook's metric lines
    feed the history the drift rule reads); a line of one or two pairs (a sample's reward printed by
    a reward function) is no metric line."""
    p = load_playbook(None)
    for line, rule in [("step 12 | loss=nan | grad_norm=nan | lr=1e-06", "loss_nonfinite"),
                       ("Train epoch [1/1]:  40%|████      | 2/5 [00:49<01:10, policy_loss=0.01, kl=nan, reward=0.5, "
                        "response_length=512]", "kl_nonfinite"),
                       ("iteration 3: {'rollout/response_lengths': 402.5, 'rollout/accuracy': 0.25, 'reward': nan}",
                        "reward_nonfinite"),
                       # keys no playbook names, read by their last word; an infinity as well as a NaN
                       ("epoch: 0|step: 31|ppo_ep: 1|act_loss: inf|cri_loss: inf|unsuper_loss: 0.0", "loss_nonfinite"),
                       ("iter 7 - actor/pg_loss=0.12 - critic/vf_loss=0.3 - actor/grad_norm=-inf", "grad_norm_nonfinite"),
                       ('{"step": 4, "policy/entropy": 1.2, "env/success_reward": NaN}', "reward_nonfinite"),
                       # each value formatted as a string first (the DPO reference implementation's stats)
                       ("train stats after 160 examples: {'rewards_train/chosen': 'nan', 'loss/train': 'nan', "
                        "'examples_per_second': '5.49', 'grad_norm': 'nan'}", "grad_norm_nonfinite")]:
        v, _ = run(p, ENGINE + line + "\n")
        assert (v["outcome"], (v["root_cause"] or {}).get("signature")) == ("wrong_result", rule), line
    moving = "".join(f"step {i} | loss={x} | grad_norm=1.0 | lr=1e-06\n" for i, x in enumerate([1, 1, 1, 1, 1, 1, 9]))
    assert run(p, ENGINE + moving)[0]["root_cause"] is None
    assert run(p, ENGINE + "sample 3: reward=nan, length=12\n")[0]["root_cause"] is None
    assert run(p, ENGINE + "epoch: 0|step: 31|ppo_ep: 1|act_loss: 0.2|cri_loss: 0.1|info: 3\n")[0]["root_cause"] is None
    # a quote opened is a quote closed: `'nan` alone is no value
    assert run(p, ENGINE + "stats: {'loss': 'nan, 'grad_norm': 'nan, 'reward': 'nan}\n")[0]["root_cause"] is None


def test_a_dict_of_metrics_pprint_spread_over_lines_is_read_as_one():
    """pprint puts a dict wider than 80 columns one item per line: the lines are the step's metric
    line (here rewards with no spread: a wrong result at the reward), whichever process's lines
    come between, and one cut off by the log's end is read as far as it goes."""
    metrics = {"loss": 0.0, "grad_norm": 1.93, "learning_rate": 9.79e-07, "completion_length": 748.1,
               "rewards/accuracy_reward": 0.0, "rewards/format_reward": 0.0, "reward": 0.0, "reward_std": 0.0,
               "epoch": 0.09}
    printed = pprint.pformat(metrics, sort_dicts=False).splitlines()
    assert len(printed) == len(metrics)  # one item per line, as pprint prints it
    p = load_playbook(None)
    other = "(Worker pid=9) INFO generating 64 prompts"
    v, _ = run(p, ENGINE + "\n".join(printed[:3] + [other] + printed[3:]) + "\n")
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 5, "reward_parsing")
    assert v["root_cause"]["text"].startswith("{'loss': 0.0, 'grad_norm': 1.93,")
    cut, _ = run(p, ENGINE + "\n".join(printed[:-1]) + "\n")  # the closing line never came
    assert cut["root_cause"]["category"] == "reward_parsing"
    healthy = pprint.pformat(metrics | {"reward": 0.5, "reward_std": 0.3}, sort_dicts=False)
    assert run(p, ENGINE + healthy + "\n")[0]["root_cause"] is None


def test_ray_s_colour_codes_left_without_their_escape_byte_are_no_text():
    """Ray colours a worker line's prefix (ESC[36m … ESC[0m); a copy that lost the ESC byte, or
    shows it as U+FFFD, reads as the log Ray wrote: the same root, the same process."""
    p = load_playbook(None)
    clean = traceback("(WorkerDict pid=7, ip=10.0.0.2) ", "ValueError: Padding error!")
    want, _ = run(p, ENGINE + clean)
    for esc in ("", "\ufffd"):
        copied = clean.replace("(WorkerDict", esc + "[36m(WorkerDict").replace("10.0.0.2) ", "10.0.0.2)" + esc + "[0m ")
        assert "[36m" in copied and "[0m" in copied
        got, a = run(p, ENGINE + copied)
        assert got["root_cause"]["text"] == want["root_cause"]["text"] == "ValueError: Padding error!"
        assert {pr for f in a.findings.values() for pr in f.procs} == {"10.0.0.2:7"}


def test_wandb_s_run_summary_is_the_run_s_last_metrics():
    """wandb prints the last value of each key as a run ends: rewards all zero there are a wrong
    result at the reward, with verl's keys or TRL's (train/… through transformers' callback); the
    run history's sparklines are no values."""
    p = load_playbook(None)

    def summary(rows):
        width = max(len(k) for k, _ in rows)
        return "wandb: Run history:\nwandb:   critic/score/mean ▁▁▁▁\nwandb: \nwandb: Run summary:\n" + "".join(
            f"wandb: {k:>{width + 2}} {v}\n" for k, v in rows)
    verl = [("actor/entropy_loss", "0.1888"), ("actor/pg_loss", "0"), ("critic/score/max", "0"),
            ("critic/score/mean", "0"), ("critic/score/min", "0")]
    v, _ = run(p, ENGINE + summary(verl))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 5, "reward_parsing")
    assert v["root_cause"]["text"].split() == ["wandb:", "critic/score/max", "0"]
    trl = [("train/loss", "0.0"), ("train/reward", "0.0"), ("train/reward_std", "0.0"), ("train/epoch", "0.4")]
    v, _ = run(p, ENGINE + summary(trl))
    assert (v["outcome"], v["failed_stage"]) == ("wrong_result", 5)
    healthy = [("critic/score/max", "1"), ("critic/score/mean", "0.4375"), ("train/reward_std", "0.31")]
    assert run(p, ENGINE + summary(healthy))[0]["root_cause"] is None


def test_a_trainer_and_a_rollout_engine_apart_and_an_absurd_grad_norm_are_wrong_results():
    """Values no healthy run reaches, from the first step (no history needed): the trainer's
    log-probs far from the rollout engine's (slime's gap in nats, verl's in probabilities) say the
    two hold different weights, where the wrong value starts (training data); a gradient norm past
    1e5 alone is the update's."""
    p = load_playbook(None)

    def slime(diff, grad):
        return (f"step 0: {{'train/loss': -1.03e-06, 'train/pg_loss': -1.03e-06, 'train/entropy_loss': 5.39, "
                f"'train/train_rollout_logprob_abs_diff': {diff}, 'train/grad_norm': {grad}, 'train/step': 0}}\n")
    v, _ = run(p, ENGINE + slime(9.25, 15310134.6))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 6, "weight_mapping")
    v, _ = run(p, ENGINE + slime(0.03, 15310134.6))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 7, "precision_dtype")
    assert run(p, ENGINE + slime(0.03, 0.81))[0]["root_cause"] is None
    verl = "step:3 - actor/pg_loss:0.010 - actor/grad_norm:0.52 - training/rollout_probs_diff_mean:{} - critic/score/mean:0.41\n"
    v, _ = run(p, ENGINE + verl.format(0.85))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 6, "weight_mapping")
    assert run(p, ENGINE + verl.format(0.003))[0]["root_cause"] is None


def test_dynamic_sampling_that_cannot_fill_a_batch_fails_assembling_the_training_data():
    """DAPO's filter (verl's recipe), EasyR1's online filtering and NeMo-RL's dynamic sampling drop
    groups whose samples all scored alike and generate again; at their limit they raise: the
    update's batch could not be assembled with these settings and data, wherever the loop raised
    it. Regenerating alone is no failure."""
    p = load_playbook(None)
    keep = "".join(f"num_prompt_in_batch={12 * i} < prompt_bsz=512\nnum_gen_batches={i}. Keep generating...\n"
                   for i in range(1, 4))
    assert run(p, ENGINE + keep)[0]["root_cause"] is None
    for raised in ["ValueError: num_gen_batches=10 >= max_num_gen_batches=10. Generated too many. Please check if "
                   "your data are too difficult.",
                   "RuntimeError: num_try_make_batch=10 >= max_try_make_batch=10. Generated too many. Please check "
                   "your data.",
                   "ValueError: Dynamic sampling has reached the maximum allowed number of batches (10). Consider "
                   "evaluating the complexity of your data."]:
        v, _ = run(p, ENGINE + keep + traceback("", raised, funcs=("main", "fit")))
        assert (v["outcome"], v["failed_stage"], v["root_cause"]["text"], v["root_cause"]["category"]) \
            == ("crash", 6, raised, "config_mismatch"), v["root_cause"]


def test_the_phases_skyrl_roll_and_nemo_rl_announce_place_what_nothing_else_places():
    """SkyRL's phase timers (loguru: `Started: 'generate'`), ROLL's step lines and NeMo-RL's step
    results say where a step is: an error that names no stage is in the phase under way, or after
    a finished step, in the next one's generation."""
    p = load_playbook(None)
    err = "RuntimeError: something went wrong\n"
    loguru = "2025-12-18 15:51:23.101 | INFO     | skyrl.train.trainer:train:361 - "
    for before, stage in [(loguru + "Started: 'generate'", 2),
                          (loguru + "Started: 'fwd_logprobs_values_reward'", 6),
                          (loguru + "Started: 'policy_train'", 7),
                          ("[2025-07-01 10:00:00] [rlvr_pipeline.py:487] [INFO] pipeline step 3 start...", 2),
                          ("📊 Training Results:\n  • Loss: 0.0123\n  • Avg Reward: 0.4375", 2)]:
        v, _ = run(p, ENGINE + before + "\n" + err)
        assert (v["outcome"], v["failed_stage"]) == ("crash", stage), before
    finished = "[2025-07-01 10:09:00] [rlvr_pipeline.py:840] [INFO] pipeline step 3 finished\n"
    assert run(p, ENGINE + finished)[0]["outcome"] == "pass"  # a step done, nothing wrong


def test_only_a_wrapper_is_chosen_when_nothing_else_is_there(pb):
    v, _ = run(pb, "ray.exceptions.RayTaskError(TimeoutError): ray::RolloutManager.generate() (pid=1)\n")
    assert v["root_cause"]["text"].startswith("ray.exceptions.RayTaskError(TimeoutError)")
    assert v["root_cause"]["category"] == "timeout"


def test_downstream_watchdog_on_peer_loses_to_the_earlier_real_error(pb):
    log = ENGINE + "[rank1]:[E317 03:27:31.594 pg.cpp:616] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)\n" \
        + traceback("[rank0]: ", "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB")
    v, _ = run(pb, log)
    assert v["root_cause"]["category"] == "oom"
    assert v["outcome"] == "crash"
    only_watchdog, _ = run(pb, ENGINE + "[rank1]:[E317 03:27:31.594 pg.cpp:616] [Rank 1] Watchdog caught collective operation timeout: x\n")
    assert only_watchdog["outcome"] == "hang"


def test_most_specific_line_of_an_error_block_is_the_root_text(pb):
    log = ('(TaskRunner pid=4) RuntimeError: create_config:x.ts:102 HCCL function error: hcclCommInitRootInfoConfig(), error code is 7\n'
           '(TaskRunner pid=4) [ERROR] 2025-04-24-16:14:56 (PID:468348, Device:0, RankID:2) ERR02200 DIST call hccl api failed.\n'
           '(TaskRunner pid=4) EJ0001: [PID: 468348] 2025-04-24 Failed to initialize the HCCP process. Reason: Maybe the last training process is running.\n'
           '(TaskRunner pid=4)         Solution: Wait for 10s after killing the last training process and try again.\n')
    v, _ = run(pb, log)
    rc = v["root_cause"]
    assert rc["text"].startswith("EJ0001") and rc["class"] == "infra" and rc["fix"] == {"kind": "cleanup_retry"}
    assert v["failed_stage"] == 1 and v["last_stage_passed"] == 0


def test_nan_grad_norm_after_update_is_wrong_result(pb):
    log = ENGINE + "validation generation end\nstep:1 - actor/pg_loss:0.1 - actor/grad_norm:nan - x:1\n"
    v, _ = run(pb, log)
    assert v["outcome"] == "wrong_result" and v["failed_stage"] == 7 and v["last_stage_passed"] == 7
    assert v["metrics"]["last"]["loss"] == 0.1


def test_healthy_update_passes_and_implies_earlier_stages(pb):
    v, _ = run(pb, ENGINE + "step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.5\n")
    assert v["outcome"] == "pass" and v["root_cause"] is None
    st = {s["name"]: s["status"] for s in v["stages"]}
    assert st["engine_start"] == "passed" and st["reward"] == "implied" and st["actor_update"] == "passed"


def test_silent_log_is_hang_when_time_is_known_else_running(pb):
    assert run(pb, ENGINE)[0]["outcome"] == "running"
    assert run(pb, ENGINE, ts=1000.0, now=1100.0)[0]["outcome"] == "running"
    v, _ = run(pb, ENGINE, ts=1000.0, now=1000.0 + 301)  # completion's timeout is 300 s
    assert v["outcome"] == "hang" and v["failed_stage"] == 2 and v["last_stage_passed"] == 1
    assert run(pb, "")[0]["outcome"] == "unknown"


def test_verdict_does_not_depend_on_chunking(pb):
    log = ENGINE + interleave(traceback("(A pid=1) ", "KeyError: 'x'"), traceback("(B pid=2) ", "KeyError: 'x'")) \
        + "step:1 - actor/pg_loss:0.2 - actor/grad_norm:1.0\n" + "noise line\n" * 50
    whole, _ = run(pb, log)
    for chunk in (1, 7, 64):
        assert run(pb, log, chunk=chunk)[0] == whole


def test_error_before_a_later_healthy_update_was_survived(pb):
    log = ENGINE + traceback("(A pid=1) ", "KeyError: 'x'") + "step:1 - actor/pg_loss:0.2 - actor/grad_norm:1.0\n"
    v, _ = run(pb, log)
    assert v["outcome"] == "pass"
    assert v["findings"] and v["findings"][0]["text"] == "KeyError: 'x'"


def test_log_starting_mid_traceback_and_without_final_newline(pb):
    log = '  File "/verl/dp_actor.py", line 332, in compute_log_prob\n    x = f()\ntorch.OutOfMemoryError: CUDA out of memory. Tried'
    v, _ = run(pb, log)
    assert v["root_cause"]["category"] == "oom" and v["failed_stage"] == 6


def test_events_are_emitted_incrementally(pb):
    a = Analyzer(pb)
    ev = a.feed(ENGINE.encode())
    assert [(e.kind, e.stage) for e in ev] == [("stage", 1)]
    assert a.feed(b"step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.3\n")[0].kind in ("stage", "metric")
    assert a.verdict()["outcome"] == "pass"


def _verl_steps(values: list[dict]) -> str:
    lines = [ENGINE]
    for i, kv in enumerate(values, 1):
        lines.append(f"(TaskRunner pid=1) step:{i} - " + " - ".join(f"{k}:{v}" for k, v in kv.items()) + "\n")
    return "".join(lines)


HEALTHY = {"actor/pg_loss": -0.02, "actor/grad_norm": 0.4, "critic/score/max": 1.0, "critic/score/min": 0.0,
           "critic/score/mean": 0.3, "critic/advantages/max": 1.8, "critic/advantages/min": -1.2,
           "perf/throughput": 15.0}


def test_health_is_checked_over_the_whole_run_not_the_first_update():
    """Each rule fires on a later step after healthy ones, and the verdict is a wrong_result at the
    stage where the bad value starts; the healthy run with its noise passes."""
    pb = load_playbook("verl")
    noisy = [HEALTHY | {"actor/pg_loss": round(-0.02 + 0.01 * ((i * 7) % 5 - 2), 3)} for i in range(30)]
    v, _ = run(pb, _verl_steps(noisy))
    assert v["outcome"] == "pass", v["root_cause"]
    cases = [
        ({"actor/pg_loss": "nan"}, "loss_nonfinite", 7),
        ({"actor/pg_loss": 3.5}, "loss_drift", 7),
        ({"actor/grad_norm": 40.0}, "grad_norm_explode", 7),
        ({"critic/score/max": 0.5, "critic/score/min": 0.5}, "verl_score_no_spread", 5),
        ({"critic/advantages/mean": "nan", "actor/pg_loss": "nan"}, "verl_advantages_nonfinite", 6),
        ({"critic/advantages/max": 0.0, "critic/advantages/min": 0.0}, "verl_advantages_no_spread", 6),
        ({"perf/throughput": 0.4}, "verl_throughput_collapse", 2),
    ]
    for bad, signature, stage in cases:
        v, _ = run(pb, _verl_steps(noisy + [HEALTHY | bad] + noisy[:3]))
        assert (signature, v["outcome"], v["failed_stage"]) == \
            (v["root_cause"]["signature"], "wrong_result", stage), (bad, v["root_cause"])


def _nemo_rl_steps(losses: list, rewards: list | None = None) -> str:
    """Steps as NeMo-RL's grpo_train prints them: its phase banners, then the step's results one
    bullet a line, then its timing."""
    out = []
    for i, loss in enumerate(losses, 1):
        reward = f"{0.25 + 0.01 * i:.4f}" if rewards is None else rewards[i - 1]
        out += [f"========================= Step {i}/{len(losses)} =========================",
                "▶ Preparing batch...", "▶ Generating responses for batch of size 64...",
                "▶ Processing rewards...", "▶ Computing advantages...", "▶ Preparing for logprob inference...",
                "▶ Training policy...", "", "📊 Training Results:", f"  • Loss: {loss}",
                "  • Generation KL Error: 0.0011", f"  • Avg Reward: {reward}",
                "  • Mean Generation Length: 512.2500", "", "⏱️  Timing:", "  • Total step time: 41.20s"]
    return "\n".join(out) + "\n"


def test_nemo_rl_results_are_checked_over_the_whole_run():
    """NeMo-RL prints a step's loss and reward one bullet a line: a NaN loss at a later step, after
    healthy ones, is a wrong result of the update; the healthy steps pass."""
    pb = load_playbook(None)
    healthy = [f"{0.0123 - 0.001 * (i % 3):.4f}" for i in range(6)]
    assert run(pb, _nemo_rl_steps(healthy))[0]["outcome"] == "pass"
    v, _ = run(pb, _nemo_rl_steps(healthy + ["nan"] + healthy[:2]))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == \
        ("wrong_result", 7, "loss_nonfinite"), v["root_cause"]
    assert v["root_cause"]["text"].strip() == "• Loss: nan"


def test_every_completion_cut_at_the_length_limit_is_a_wrong_result_of_the_generation():
    """TRL's `completions/clipped_ratio` (and verl's `response_length/clip_ratio`) at 1: no completion
    of the step ended on its own. The zero reward on the same line follows from it: the root is the
    generation, a length limit — not the reward function. Some completions cut is a healthy run's."""
    pb = load_playbook(None)
    cut = ("{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 1e-06, 'completions/mean_length': 256.0, "
           "'completions/clipped_ratio': 1.0, 'reward': 0.0, 'reward_std': 0.0, 'epoch': 0.01}\n")
    v, _ = run(pb, ENGINE + cut)
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["signature"], rc["category"]) == \
        ("wrong_result", 2, "completions_all_clipped", "length_limit"), rc
    assert rc["detail"] == "clip_ratio=1 (above)", rc
    some = cut.replace("'completions/clipped_ratio': 1.0", "'completions/clipped_ratio': 0.375")
    assert run(pb, ENGINE + some)[0]["root_cause"]["signature"] != "completions_all_clipped"
    verl = ("step:3 - actor/pg_loss:0.012 - critic/score/mean:0.000 - response_length/mean:1024.000 - "
            "response_length/clip_ratio:1.000 - perf/throughput:812.5\n")
    assert run(pb, ENGINE + verl)[0]["root_cause"]["signature"] == "completions_all_clipped"


def test_a_mean_reward_of_exactly_zero_is_a_wrong_result_at_the_reward():
    """The frameworks that log only the mean reward (NeMo-RL's `Avg Reward`, TRL's `reward`): a
    step whose mean is exactly zero earned nothing on any sample — nothing to learn from. A mean
    that only starts low is no such thing; with the spread NaN beside it (groups of one), the
    spread's rule says why."""
    pb = load_playbook(None)
    losses = ["0.0123"] * 4
    v, _ = run(pb, _nemo_rl_steps(losses, ["0.0000"] * 4))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == \
        ("wrong_result", 5, "reward_mean_zero"), v["root_cause"]
    assert v["root_cause"]["text"].strip() == "• Avg Reward: 0.0000"
    assert run(pb, _nemo_rl_steps(losses, ["0.0010", "0.0020", "0.0150", "0.0300"]))[0]["outcome"] == "pass"
    trl = "{'loss': 0.0, 'grad_norm': 0.0, 'learning_rate': 1e-06, 'reward': 0.0, 'reward_std': nan, 'epoch': 0.01}\n"
    assert run(pb, ENGINE + trl)[0]["root_cause"]["signature"] == "reward_std_nonfinite"


def test_a_runtime_warning_alone_does_not_make_a_finished_run_a_crash():
    pb = load_playbook("verl")
    log = _verl_steps([HEALTHY] * 3) + \
        "(WorkerDict pid=7) /x/numpy/core/_methods.py:206: RuntimeWarning: invalid value encountered in divide\n"
    v, _ = run(pb, log)
    assert v["outcome"] == "pass" and v["root_cause"] is None


def test_context_shows_a_repeated_line_the_same_whether_it_was_looked_at_or_skipped(pb):
    """Ray's `[repeated Nx across cluster]` stays in the context (how widespread a line was),
    for a line the gate skipped as for one it looked at (a marker's)."""
    log = ("(WorkerDict pid=1) loading shards [repeated 7x across cluster]\n"
           "(WorkerDict pid=1) init engine (profile, create kv cache, warmup model) took 3.0 seconds"
           " [repeated 3x across cluster]\n"
           "(WorkerDict pid=2) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    for fast in (True, False):
        a = Analyzer(pb, fast=fast)
        a.feed(log.encode())
        a.finish()
        f = next(iter(a.findings.values()))
        assert f.context[-2:] == ["(WorkerDict pid=1) loading shards [repeated 7x across cluster]",
                                  "(WorkerDict pid=1) init engine (profile, create kv cache, warmup model) took"
                                  " 3.0 seconds [repeated 3x across cluster]"], (fast, f.context)


def test_a_hang_is_read_at_its_last_line_not_at_a_request_the_server_answered(tmp_path):
    """Whichever process flushed last: an access-log line of an answered request (uvicorn, as vLLM's and
    SGLang's OpenAI servers log) says the server is fine; the silence is read at the line before it."""
    import os

    from harness.analyze import analyze_file

    log = tmp_path / "run.log"
    log.write_text("(AgentWorker pid=7) agent worker started; waiting for 2 peers\n"
                   'INFO:     127.0.0.1:43792 - "GET /v1/models HTTP/1.1" 200 OK\n'
                   'INFO:     127.0.0.1:43793 - "GET /health HTTP/1.1" 200 OK\n')
    os.utime(log, (1000.0, 1000.0))
    verdict, _ = analyze_file(log, load_playbook("base"), now=1000.0 + 7200)
    rc = verdict["root_cause"]
    assert verdict["outcome"] == "hang" and rc["text"].startswith("agent worker started"), rc
    log.write_text('INFO:     127.0.0.1:43793 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error\n')
    os.utime(log, (1000.0, 1000.0))
    verdict, _ = analyze_file(log, load_playbook("base"), now=1000.0 + 7200)
    assert "500 Internal Server Error" in verdict["root_cause"]["text"]  # a failed request is no answer


NEMORL_STEP = ("========================= Step 3/500 =========================\n"
               "▶ Preparing batch...\n"
               "▶ Generating responses for batch of size 512...\n"
               "(VllmGenerationWorker pid=41) INFO 03-02 10:00:01 [loader.py:458] Loading weights took 2.1 seconds\n"
               "▶ Processing rewards...\n"
               "▶ Computing advantages...\n"
               "▶ Preparing for logprob inference...\n"
               "▶ Computing logprobs...\n"
               "▶ Preparing for training...\n"
               "▶ Training policy...\n")


SLIME_STEP = ("(MegatronTrainRayActor pid=9) [2026-02-01 10:00:00] timer.py:24 - Timer update_weights start\n"
              "(MegatronTrainRayActor pid=9) [2026-02-01 10:00:09] timer.py:33 - Timer update_weights end (elapsed: 9.1s)\n"
              "(SGLangEngine pid=5) [2026-02-01 10:00:10 TP0] Cache flushed successfully!\n"
              "(MegatronTrainRayActor pid=9) [2026-02-01 10:03:00] timer.py:24 - Timer data_preprocess start\n"
              "(MegatronTrainRayActor pid=9) [2026-02-01 10:03:01] timer.py:24 - Timer ref_log_probs start\n"
              "(MegatronTrainRayActor pid=9) [2026-02-01 10:03:40] timer.py:24 - Timer actor_train start\n")


AREAL_STEP = ("(AReaL) 20260301-10:00:00.100 [FSDPEngine Rank 0] INFO: Saved weights to disk for the update.\n"
              "(AReaL) 20260301-10:00:05.200 [RemoteInfEngine Rank 0] INFO: Loading weights from disk done in 5.10s. "
              "Respond time: 0.40s.\n"
              "(AReaL) 20260301-10:00:06.000 SyncRPCServer INFO: Cleared 12 batch shards.\n")


TRL_STEP = ("INFO 07-01 09:57:01 [loader.py:458] Loading weights took 1.92 seconds\n"
            "  0%|          | 0/1000 [00:00<?, ?it/s]\n"
            "INFO 07-01 10:00:00 [block_pool.py:321] Successfully reset prefix cache\n")
STEPS = {"nemo-rl": NEMORL_STEP, "slime": SLIME_STEP, "areal": AREAL_STEP, "trl": TRL_STEP}


@pytest.mark.parametrize("framework, banner, stage", [
    ("nemo-rl", "▶ Preparing batch", "task_dispatch"), ("nemo-rl", "▶ Generating", "completion"),
    ("nemo-rl", "▶ Processing rewards", "reward"), ("nemo-rl", "▶ Computing logprobs", "training_data"),
    ("nemo-rl", "▶ Training policy", "actor_update"),
    ("slime", "Timer update_weights start", "completion"), ("slime", "Cache flushed", "completion"),
    ("slime", "Timer ref_log_probs", "training_data"), ("slime", "Timer actor_train", "actor_update"),
    ("areal", "Loading weights from disk", "completion"), ("areal", "Cleared", "completion"),
    ("trl", "Successfully reset prefix cache", "completion")])
def test_a_step_s_phase_banners_place_a_failure_and_a_hang_with_nothing_else_to_say(framework, banner, stage):
    """A step's phases announced as they begin — NeMo-RL's GRPO banners (grpo.py), slime's timers
    (utils/timer.py), AReaL's end of a weight update from disk, vLLM's prefix cache reset after a
    weight sync —; logs of our own, cut after one:
    a bare error there, and a silent run there, are that phase's stage."""
    from harness.chain import STAGE_NO

    log = STEPS[framework]
    log = log[:log.index("\n", log.index(banner)) + 1]
    union = load_playbook(None)  # what `harness analyze` reads a log of no known stack with
    crash, _ = run(union, log + "RuntimeError: the worker group returned 3 results for 4 shards\n")
    hang, _ = run(union, log, ts=1000.0, now=1000.0 + 7200)
    assert (crash["outcome"], crash["failed_stage"]) == ("crash", STAGE_NO[stage]), crash["root_cause"]
    assert (hang["outcome"], hang["failed_stage"]) == ("hang", STAGE_NO[stage]), hang["root_cause"]


def test_an_exception_line_pasted_with_indentation_still_ends_its_traceback(pb):
    """Logs pasted into issues lose or gain indentation: ` KeyError: 'x'` after a source line is
    the exception (the run crashed), while a frame's own code line never is one."""
    pasted = ('  File "rl/engine.py", line 394, in run_agent_trajectory_async\n'
              "    tokens = self.assemble(steps)\n"
              '   File "rl/engine.py", line 453, in assemble\n'
              '    ids = step["completion_ids"]\n'
              "         ~~~~^^^^^^^^^^^^^^^^^^\n"
              " KeyError: 'completion_ids'\n")
    v, _ = run(pb, ENGINE + pasted, ts=1000.0, now=1000.0 + 7200)
    assert v["outcome"] == "crash" and v["root_cause"]["exception"] == "KeyError", v["root_cause"]
    code = ('Traceback (most recent call last):\n  File "a.py", line 3, in main\n'
            "    TimeoutError: float = 3.0\n"
            "RuntimeError: the real one\n")
    v, _ = run(pb, ENGINE + code)
    assert v["root_cause"]["exception"] == "RuntimeError", v["root_cause"]


def test_a_silent_run_whose_last_line_calls_a_collective_waits_in_it():
    """The last thing printed is the call of a collective (a stack dumped by a watchdog or a
    debugger, a traceback echoed without its exception), or NCCL's set-up lines: the hang is a collective's. A neutral
    last line leaves it to the stage: one whose processes step through collectives (here the
    log-prob passes NeMo-RL announces) is a collective's hang, one that waits on agents (the
    trajectories after minichain's tasks went out) `other`: no timeout fired; start-up (the engine initialised,
    not yet serving), which waits on many things, and a generation (here after a weight sync),
    which waits on its clients' requests or on its tensor-parallel ranks, `other` until the
    processes' stacks say which."""
    union = load_playbook(None)
    tail = ENGINE + "(WorkerDict pid=7) weight sync group ready\n"
    synced = tail + "(WorkerDict pid=7) Successfully reset prefix cache\n"
    dispatched = "agent worker started: 4 parallel agent(s), 8 episode(s) against http://127.0.0.1:8000\n"
    logprobs = tail + "▶ Computing logprobs...\n"
    for log, category, stage in [(tail + "    work = group.allreduce([tensor], opts)", "distributed_comm_hang", 1),
                                 (tail + "    dist.barrier(group=gloo_group)", "distributed_comm_hang", 1),
                                 # NCCL's own set-up lines (NCCL_DEBUG=INFO), then nothing: its set-up waits
                                 (tail + "node-3:1612:1660 [1] NCCL INFO Channel 11/0 : 7[7] -> 15[7] [send] via NET/IB/8/GDRDMA\n"
                                  "node-3:1612:1660 [1] NCCL INFO Connected NVLS tree", "distributed_comm_hang", 1),
                                 # vLLM's and SGLang's NCCL wrapper building a communicator: every rank must join
                                 (tail + "(Worker pid=150) INFO 01-22 20:05:19 [pynccl.py:113] vLLM is using nccl==2.28.9",
                                  "distributed_comm_hang", 1),
                                 (tail + "[2026-01-22 20:05:19 TP0] sglang is using nccl==2.27.7", "distributed_comm_hang", 1),
                                 (tail + "(WorkerDict pid=7) loading shard 3 of 8", "other", 1),
                                 (synced + "(WorkerDict pid=7) loading shard 3 of 8", "other", 2),
                                 (logprobs + "(WorkerDict pid=7) loading shard 3 of 8", "distributed_comm_hang", 6),
                                 (tail + dispatched + "(AgentWorker pid=9) episode 3 turn 2", "other", 4)]:
        v, _ = run(union, log + "\n", ts=1000.0, now=1000.0 + 7200)
        assert (v["outcome"], v["root_cause"]["category"], v["failed_stage"]) == ("hang", category, stage), \
            (log, v["root_cause"])


def test_a_silent_run_hangs_in_the_work_its_last_line_names():
    """No stage marker, no bar: the last line a silent run printed says what it was doing — its
    words (a reward function's name, a generation finished or under way, an optimizer step), else
    its process's name (an agent-loop worker). A line that names no work leaves the stage after
    the last passed one; a metrics report (several `key: number` pairs) names every phase it
    measured, not the one under way, and says nothing either. No timeout fired: `other`, but in
    an update, whose ranks step together through collectives, a collective's hang."""
    union = load_playbook(None)
    for last, stage, category in [
            ("[Error] scoring failed for sample 17: compute_score raised ValueError", 5, "other"),
            ("2026-12-05 01:02:03 INFO worker.py:88 -- generating sequences for batch 3", 2, "other"),
            ("(AgentLoopWorker pid=41) ERROR:2026-12-05 01:02:03,004:[Tool] call failed: ok=False", 4, "other"),
            ("(MegatronWorker pid=12) starting optimizer step 7", 7, "distributed_comm_hang"),
            ("(MegatronWorker pid=12) all good so far", 1, "other"),
            ("rollout 3: {'rollout/response_lengths': 812.5, 'rollout/rewards': 0.5, 'rollout/truncated': 0.1}", 1, "other")]:
        v, _ = run(union, "launching\n" + last + "\n", ts=1000.0, now=1000.0 + 7200)
        assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("hang", stage, category), \
            (last, v["root_cause"])


def test_a_silent_run_s_last_words_name_work_by_what_they_say_first_and_not_by_what_they_quote():
    """Prose that names two phases names first the one it is about (a warning on the KL's values
    that goes on to blame the generation's settings: the KL's, training data); a quoted name is
    a symbol wherever it is used (a model class called `…ForConditionalGeneration` named as its
    engine is built says nothing of a generation: the lifecycle's start-up); a request's path
    still names the work asked for."""
    union = load_playbook(None)
    for last, stage in [
            ("(Trainer pid=4) the approx KL went negative (-0.8): check the sampling and generation settings", 6),
            ("(Trainer pid=4) generation settings look wrong: the KL went negative (-0.8)", 2),
            ("(LLMActor pid=9) ERROR 02-21 07:10:54 registry.py:306] Error in inspecting model architecture "
             "'MyVLForConditionalGeneration'", 1),
            ("INFO _base_client - Retrying request to /v1/completions in 0.9 seconds", 2)]:
        v, _ = run(union, "launching\n" + last + "\n", ts=1000.0, now=1000.0 + 7200)
        assert (v["outcome"], v["failed_stage"]) == ("hang", stage), (last, v["root_cause"])


def test_a_run_silent_after_a_warning_hangs_at_the_warning_not_in_a_collective():
    """A Python warning all a silent run's last words say (`file.py:N: UserWarning: message`, then
    its source line indented): the warning is the hang's line, not its source line; its words place
    it, and a warning reports a value its process went on from — no sign of ranks waiting in a
    collective, even in the update's stages: `other`. A line before it that is no warning says
    where the run stopped, an error most of all."""
    union = load_playbook(None)
    warn = ("/site-packages/trl/trainer/ppo_trainer.py:1240: UserWarning: Padding the reference log_probs to the "
            "longest sequence of the batch.\n  warnings.warn(\n")  # a warning that judges no value
    v, _ = run(union, warn, ts=1000.0, now=1000.0 + 7200)
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["category"]) == ("hang", 6, "other"), rc
    assert "UserWarning: Padding the reference" in rc["text"], rc
    v, _ = run(union, ENGINE + "(WorkerDict pid=3) ERROR: reward worker failed: bad response\n" + warn,
               ts=1000.0, now=1000.0 + 7200)
    assert "reward worker failed" in v["root_cause"]["text"], v["root_cause"]
    # the step's bar, then the warning glued after its last count (both on stderr, the bar with no
    # newline): the bar says where the run stopped, the warning is still its last word
    v, _ = run(union, "  0%|          | 1/2615 [01:23<60:49:43, 83.77s/it]" + warn, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("hang", 6, "other"), v["root_cause"]
    logged = ("[WARNING:tinyrl.grpo] Rollout logprobs count (3) does not match completion tokens count (5). "
              "Skipping importance sampling for this batch.\n")  # the rollout's log-probs: the training data's
    v, _ = run(union, logged, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("hang", 6, "other"), v["root_cause"]


def test_an_engine_decoding_requests_is_generating():
    """An inference engine's periodic stats with requests running (vLLM's stat logger, SGLang's
    decode batch) say a generation is under way: a hang after them is the completion stage's; the
    same stats with nothing running say nothing."""
    union = load_playbook(None)
    vllm = ("INFO 12-05 01:02:03 [loggers.py:116] Engine 000: Avg prompt throughput: 12.0 tokens/s, "
            "Avg generation throughput: 230.5 tokens/s, Running: {n} reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%")
    sglang = "[2026-12-05 01:02:03 TP0] Decode batch. #running-req: {n}, #token: 4096, token usage: 0.05, gen throughput (token/s): 812.44, #queue-req: 0"
    for line in (vllm, sglang):
        for n, stage in [(3, 2), (0, 1)]:
            v, _ = run(union, ENGINE + line.format(n=n) + "\n", ts=1000.0, now=1000.0 + 7200)
            assert (v["outcome"], v["failed_stage"]) == ("hang", stage), (line, n, v["root_cause"])


def test_a_run_silent_in_a_download_waits_on_the_network_and_a_bar_places_a_hang():
    """A download's bar below 100 % as the last thing printed (huggingface_hub's `Fetching N files`,
    transformers' `Downloading shards`): the run waits on the network. Finished, it says nothing of
    the wait. A bar of a phase's work still counting places the hang in that phase."""
    union = load_playbook(None)
    for bar, category in [("Fetching 4 files:  25%|██▌       | 1/4 [00:03<00:09,  3.1s/it]", "network_proxy"),
                          ("(WorkerDict pid=7) Downloading shards:   0%|          | 0/4 [00:00<?, ?it/s]", "network_proxy"),
                          ("Fetching 4 files: 100%|██████████| 4/4 [00:09<00:00,  2.3s/it]", "other")]:
        v, _ = run(union, ENGINE + bar + "\n", ts=1000.0, now=1000.0 + 7200)
        assert (v["outcome"], v["root_cause"]["category"]) == ("hang", category), (bar, v["root_cause"])
    tail = ENGINE + "(WorkerDict pid=7) weight sync group ready\nCompute log probs:  40%|████      | 2/5 [00:09<00:14]\n"
    v, _ = run(union, tail, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["failed_stage"]) == ("hang", 6), v["root_cause"]


def test_a_silent_run_repeating_its_last_words_began_when_it_first_said_them():
    """A run that says the same thing over and over (an agent's tool failing on every call, its
    time and numbers changing), then nothing: the hang's line is the first time it was said."""
    union = load_playbook(None)
    said = ["(AgentLoopWorker pid=34) ERROR:2026-12-05 06:{:02d}:11,371:[ToolRunner] call 7{} failed: "
            "local variable 'result' referenced before assignment".format(m, m) for m in (22, 24, 24, 25)]
    v, _ = run(union, ENGINE + "(AgentLoopWorker pid=34) agent loop started\n" + "\n".join(said) + "\n",
               ts=1000.0, now=1000.0 + 7200)
    assert v["outcome"] == "hang" and "call 722 failed" in v["root_cause"]["text"], v["root_cause"]
    once = ENGINE + "(AgentLoopWorker pid=34) call 722 returned\n(AgentLoopWorker pid=34) starting a new sandbox\n"
    v, _ = run(union, once, ts=1000.0, now=1000.0 + 7200)  # other words after it: the last ones
    assert v["root_cause"]["text"].endswith("starting a new sandbox"), v["root_cause"]


@pytest.mark.parametrize("error, chatter", [
    ("(TaskRunner pid=12) Error in reward_fn: 'reward_extra_info'", ["(TaskRunner pid=12) list(extra.keys())=[]"]),
    ("(WorkerDict pid=7) ERROR modeling.py:363 forward failed: "
     "The size of tensor a (1280) must match the size of tensor b (5120)",
     ["(WorkerDict pid=7) residual shape is torch.Size([4, 1280, 2048])", "(WorkerDict pid=7) hidden shape [5120, 2048]"]),
    ("[ToolRunner] call 7 failed: local variable 'result' referenced before assignment",
     ["(AgentLoopWorker pid=34) retrying the episode with a new sandbox"]),
])
def test_a_silent_run_s_error_said_just_before_its_chatter_is_the_hang_s_line(error, chatter):
    """An error line among a silent run's last three, then lines that are no error (a debug
    print of what failed, a retry's word): the error says what went wrong, the chatter does not.
    A metric's `Error 0.0%` is no error, nor is an error four lines back."""
    union = load_playbook(None)
    v, _ = run(union, ENGINE + "\n".join([error, *chatter]) + "\n", ts=1000.0, now=1000.0 + 7200)
    assert v["outcome"] == "hang" and v["root_cause"]["text"] in error, v["root_cause"]
    report = "Step 2 | 9.5s | Reward 0.1972 | Error 0.0% | Truncation 0.0%"
    v, _ = run(union, ENGINE + "\n".join([report, *chatter]) + "\n", ts=1000.0, now=1000.0 + 7200)
    assert v["root_cause"]["text"] in chatter[-1], v["root_cause"]
    far = [error, "tokenizer loaded", "model config read", "waiting for the workers"]
    v, _ = run(union, ENGINE + "\n".join(far) + "\n", ts=1000.0, now=1000.0 + 7200)
    assert v["root_cause"]["text"] == "waiting for the workers", v["root_cause"]


def test_a_silent_run_s_rules_of_punctuation_say_nothing_of_where_it_stopped():
    """A report's frame (`------`, `=====`) drawn after a run's last words, then nothing: the hang's
    line is the last one that says something; the rules do not count among its last three."""
    union = load_playbook(None)
    for rule in ("-" * 42, "=" * 20, "*** ***"):
        said = ["(Trainer pid=3) Waiting for the rollout workers to return 64 samples", rule, "", rule]
        v, _ = run(union, ENGINE + "\n".join(said) + "\n", ts=1000.0, now=1000.0 + 7200)
        assert v["outcome"] == "hang" and v["root_cause"]["text"].endswith("return 64 samples"), (rule, v["root_cause"])


def test_a_stage_begun_is_not_under_way_once_a_later_stage_passed():
    """rllm's step banner begins task dispatch; the trajectories done say the tasks went out: an
    error after them with nothing to place it is not a dispatch failure."""
    log = ENGINE + "'epoch 0, step 1 started'\nNumber of Trajectories 16/16 completed\n" \
        "RuntimeError: the worker group returned 3 results for 4 shards\n"
    v, _ = run(load_playbook("rllm"), log)
    assert v["failed_stage"] > 4, v["root_cause"]


def test_a_parameter_without_its_loader_is_a_weight_mapping_not_an_api_change():
    union = load_playbook(None)
    tb = ('Traceback (most recent call last):\n  File "/srv/rl/sync.py", line 40, in push\n'
          "    model.load_weights(weights)\n")
    for attr, category in [("weight_loader", "weight_mapping"), ("load_row_parallel_weight", "weight_mapping"),
                           ("is_sharded", "version_incompat")]:
        v, _ = run(union, ENGINE + tb + f"AttributeError: 'ModelWeightParameter' object has no attribute '{attr}'\n")
        assert v["root_cause"]["category"] == category, (attr, v["root_cause"])


def test_minichain_s_503_reads_the_same_qualified_as_ray_re_raises_it():
    """On Ray an agent's error reaches the driver qualified (`minichain.agent.CompletionError`), and
    the server's own warning may reach it later than that (Ray's log monitor): the error alone still
    names the concurrency limit, not the proxy guess that also matches a 503; the same for the
    workers' proxy error."""
    for line, signature in [("CompletionError: Error code: 503 - Service Unavailable", "minichain_concurrency_limit"),
                            ("minichain.agent.CompletionError: Error code: 503 - Service Unavailable",
                             "minichain_concurrency_limit"),
                            ("minichain.agent.ProxyError: Unable to connect to proxy 10.0.0.9:3128 for "
                             "http://127.0.0.1:8000/v1/completions", "minichain_worker_proxy")]:
        v, _ = run(load_playbook("minichain"), f"minichain driver pid=1: config c.yaml, seed 0\n{line}\n")
        assert v["root_cause"]["signature"] == signature, (line, v["root_cause"])


def test_non_finite_sampling_probabilities_are_the_generation_s_numerics():
    """torch.multinomial's check, as its CUDA assert prints it (no traceback) in the middle of a
    progress bar: the policy's logits went non-finite where it samples, in generation."""
    log = ("Train:   3%|▎         | 4/120 [00:41<19:50, 10.26s/it]/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: "
           "_assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion `probability tensor contains either "
           "`inf`, `nan` or element < 0` failed.\n")
    v, _ = run(load_playbook("base"), log)
    assert (v["failed_stage"], v["root_cause"]["category"]) == (2, "precision_dtype"), v["root_cause"]


def test_a_nan_kl_beside_a_finite_loss_starts_in_the_log_probs_and_beside_a_nan_loss_is_the_loss_s():
    """KL is computed from log-probs: NaN while the loss stays finite, it came from log-probs the
    loss does not take in (the reference's, with the batch): training_data. NaN together with the
    loss, the loss's own rule holds: actor_update."""
    pb = load_playbook("base")
    ok = "{'loss': 0.0213, 'grad_norm': 0.41, 'learning_rate': 1e-06, 'reward': 0.5, 'reward_std': 0.3, 'kl': 0.0012}\n"
    for bad, stage, sig in [
            ("{'loss': 0.0198, 'grad_norm': 0.39, 'learning_rate': 1e-06, 'reward': 0.6, 'reward_std': 0.2, 'kl': nan}",
             6, "kl_nonfinite"),
            ("{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-06, 'reward': 0.6, 'reward_std': 0.2, 'kl': nan}",
             7, "loss_nonfinite")]:
        v, _ = run(pb, ENGINE + ok + bad + "\n")
        assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == ("wrong_result", stage, sig), bad


def test_nan_log_probs_on_a_preference_trainer_s_step_are_a_wrong_result_of_the_training_data():
    """TRL's DPO step logs the batch's log-probs (`logps/chosen`, `logps/rejected`): NaN there, the
    loss a finite 0.0 beside them, is a run that learns nothing — a wrong result where the value
    starts (the log-probs: training data), not a pass; finite log-probs say nothing."""
    def line(v):
        return (f"{{'loss': 0.0, 'learning_rate': 9.99e-06, 'rewards/chosen': {v}, 'rewards/rejected': {v}, "
                f"'logps/rejected': {v}, 'logps/chosen': {v}, 'epoch': 0.0}}\n")
    v, _ = run(load_playbook(None), line("nan"))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == \
        ("wrong_result", 6, "logprobs_nonfinite"), (v["outcome"], v["root_cause"])
    v, _ = run(load_playbook(None), line("-102.5"))
    assert v["root_cause"] is None, v["root_cause"]


def test_a_nan_reward_spread_beside_numeric_rewards_is_a_group_of_one_and_beside_a_nan_reward_the_reward_s():
    """A std over one sample is NaN (torch's default correction): rewards that are numbers with a
    NaN spread per group mean groups of one, every normalised advantage NaN (training_data, the
    configuration's). With the reward itself NaN, the reward's rule holds."""
    pb = load_playbook("base")
    torch_like = {"loss": 0.0, "grad_norm": float("nan"), "learning_rate": 1e-06, "reward": 0.0,
                  "reward_std": float("nan"), "kl": 0.0}
    v, _ = run(pb, ENGINE + repr(torch_like) + "\n")
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"], v["root_cause"]["category"]) == \
        ("wrong_result", 6, "reward_std_nonfinite", "config_mismatch"), v["root_cause"]
    v, _ = run(pb, ENGINE + repr(torch_like | {"reward": float("nan")}) + "\n")
    assert (v["failed_stage"], v["root_cause"]["signature"]) == (5, "reward_nonfinite"), v["root_cause"]


def test_an_error_no_family_names_raised_while_scoring_is_the_reward_function_s():
    """The reward stage runs the user's scoring code: an exception there that no family names is
    the reward function's (reward_parsing); the same exception elsewhere stays `other`."""
    pb = load_playbook("base")
    tb = ("Traceback (most recent call last):\n"
          '  File "/srv/tinyrl/driver.py", line 88, in step\n'
          '  File "/srv/tinyrl/scoring.py", line 12, in {func}\n'
          "    return hits / len(steps)\n"
          "ZeroDivisionError: division by zero\n")
    v, _ = run(pb, ENGINE + tb.format(func="compute_score"))
    assert (v["failed_stage"], v["root_cause"]["category"]) == (5, "reward_parsing"), v["root_cause"]
    v, _ = run(pb, ENGINE + tb.format(func="summarise"))
    assert v["root_cause"]["category"] == "other" and v["failed_stage"] != 5


def test_names_pushed_into_a_rollout_engine_fail_its_weight_sync_a_checkpoint_s_load_its_start():
    """vLLM's loader finds every name of the checkpoint its model class was built for; names it
    lacks were pushed by another framework's weight sync (completion). A state_dict that misses
    keys says nothing of when: before any marker, start-up."""
    pb = load_playbook("base")
    v, _ = run(pb, "ValueError: There is no module or parameter named 'decoder.layers.0.mlp.linear_fc1' in TinyMoeForCausalLM\n")
    assert (v["failed_stage"], v["root_cause"]["category"]) == (2, "weight_mapping"), v["root_cause"]
    v, _ = run(pb, 'RuntimeError: Error(s) in loading state_dict for TinyMoe:\n\tMissing key(s) in state_dict: "lm_head.weight".\n')
    assert (v["failed_stage"], v["root_cause"]["category"]) == (1, "weight_mapping"), v["root_cause"]


def test_a_line_that_restates_a_later_exception_gives_way_to_it():
    """Whoever caught an exception often logs its message first (`Training failed with error: …`);
    the exception with its traceback is the same error and the root, with its call path."""
    pb = load_playbook("base")
    log = ("Training failed with error: CUDA error: operation not permitted when stream is capturing\n"
           "INFO shutting down the rollout server\nINFO saved the partial trajectories to /tmp/t\n"
           "Traceback (most recent call last):\n"
           '  File "/srv/tinyrl/engine.py", line 40, in start_server\n'
           "    torch.cuda.Stream()\n"
           "RuntimeError: CUDA error: operation not permitted when stream is capturing\n")
    v, _ = run(pb, log)
    assert v["root_cause"]["text"] == "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    assert v["root_cause"]["line_no"] == 7
    # a line that only shares a short tail with it is no restatement
    v, _ = run(pb, "Training failed with error: CUDA error: launch failure\nINFO shutting down\n"
                   "Traceback (most recent call last):\n"
                   '  File "/srv/tinyrl/engine.py", line 40, in wait\nRuntimeError: launch failure\n')
    assert v["root_cause"]["line_no"] == 1


def test_verl_s_switch_between_trainer_and_rollout_engine_is_the_completion_stage_s():
    """The sharding manager's __enter__ syncs the actor's weights into the rollout engine and wakes
    it, __exit__ puts it to sleep (so do newer verl's rollout_mode / trainer_mode): a failure there,
    inside generate_sequences, is the weight sync's (completion); in the engine's generate, the
    completions' (a model's or an engine's generate is a completion in any framework); in
    generate_sequences' own code around it, the rollout's (verl's agent loop: trajectory)."""
    pb = load_playbook("verl")
    head = ("ray::WorkerDict.actor_rollout_generate_sequences() (pid=7, ip=10.0.0.1)\n"
            '  File "/srv/verl/verl/workers/fsdp_workers.py", line 446, in generate_sequences\n'
            "    with self.rollout_sharding_manager:\n")
    inner = ('  File "/srv/verl/verl/workers/sharding_manager/fsdp_vllm.py", line {n}, in {fn}\n'
             "    torch.cuda.empty_cache()\n")
    tail = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    for fn in ("__enter__", "__exit__"):
        v, _ = run(pb, head + inner.format(n=105, fn=fn) + tail)
        assert v["failed_stage"] == 2, (fn, v["root_cause"])
    v, _ = run(pb, head.replace("with self.rollout_sharding_manager:", "output = self.rollout.generate_sequences(prompts)")
               + '  File "/srv/verl/verl/workers/rollout/vllm_rollout.py", line 88, in generate_sequences\n'
               "    outputs = self.inference_engine.generate(prompts)\n" + tail)
    assert v["failed_stage"] == 2, v["root_cause"]
    v, _ = run(pb, head.replace("with self.rollout_sharding_manager:", "output = self.rollout.generate_sequences(prompts)")
               + '  File "/srv/verl/verl/workers/rollout/vllm_rollout.py", line 91, in generate_sequences\n'
               "    batch = pad_responses(outputs, self.pad_token_id)\n" + tail)
    assert v["failed_stage"] == 4, v["root_cause"]
    v, _ = run(pb, '  File "/srv/verl/verl/workers/fsdp_workers.py", line 600, in rollout_mode\n'
                   "    await self.rollout.resume()\n" + tail)
    assert v["failed_stage"] == 2, v["root_cause"]


def test_ray_s_memory_monitor_summary_is_an_oom_before_the_driver_s_traceback():
    """The raylet's periodic summary names the workers its memory monitor killed; the driver's
    traceback that follows is what that did to it. A summary of none killed says nothing."""
    pb = load_playbook("ray")
    said = ("(raylet) [2026-01-02 10:00:00,117 E 135 135] (raylet) node_manager.cc:3041: {n} Workers (tasks / actors) "
            "killed due to memory pressure (OOM), {m} Workers crashed due to other reasons at node (ID: 3e4f, "
            "IP: 10.0.0.7) over the last time period.\n")
    driver = ("Traceback (most recent call last):\n"
              '  File "/srv/trainer/main.py", line 12, in main\n'
              "    ray.get(runner.run.remote(cfg))\n"
              "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n")
    v, _ = run(pb, said.format(n=2, m=0) + driver)
    assert v["root_cause"]["category"] == "oom" and v["root_cause"]["line_no"] == 1, v["root_cause"]
    v, _ = run(pb, said.format(n=0, m=3) + driver)
    assert v["root_cause"]["line_no"] == 5 and v["root_cause"]["category"] != "oom", v["root_cause"]


@pytest.mark.parametrize("line", [
    "(TaskRunner pid=29) [2026-01-02 07:14:27,052 C 29 29] task_receiver.cc:219:  Check failed: objects_valid ",
    "F0102 07:14:27.052113  4711 sentencepiece_processor.cc:1101] Check failed: status.ok() unknown piece",
])
def test_a_native_check_that_failed_is_the_crash_not_the_native_stack_after_it(line):
    """glog's CHECK and Ray's RAY_CHECK abort with `Check failed: <condition>`, then a native stack:
    the check is the root, a crash (the stack's frame lines say nothing)."""
    stack = "".join(f"    /usr/lib/python3/site-packages/ray/_raylet.so(+0x13ddb{i}) [0x73a4e483{i}] ray::f{i}()\n"
                    for i in range(4))
    v, _ = run(load_playbook("base"), line + "\n*** StackTrace Information ***\n" + stack)
    assert v["outcome"] == "crash" and v["root_cause"]["line_no"] == 1, v["root_cause"]
    assert v["root_cause"]["signature"] == "native_check_failed"


@pytest.mark.parametrize("lib, var", [("NCCL", "VLLM_NCCL_SO_PATH"), ("HCCL", "HCCL_SO_PATH")])
def test_a_collective_library_the_engine_cannot_load_is_the_configuration_s(lib, var):
    line = (f"(VllmWorker rank=1 pid=9) ERROR 01-02 09:48:31 [py{lib.lower()}_wrapper.py:229] Failed to load {lib} "
            f"library from /opt/lib{lib.lower()}.so.2. It is expected if you are not running on the devices it is "
            f"for. If you already have the library, please set the environment variable {var} to point to it.\n")
    v, _ = run(load_playbook("base"), "INFO:     127.0.0.1:5 - \"POST /init_communicator/ HTTP/1.1\" 200 OK\n" + line)
    assert (v["root_cause"]["category"], v["failed_stage"]) == ("config_mismatch", 1), v["root_cause"]


def test_a_lazy_module_s_failed_import_is_the_stack_s_versions():
    """transformers' (and TRL's) lazy modules re-raise an import that failed inside as a RuntimeError."""
    log = ("Traceback (most recent call last):\n"
           '  File "/srv/train.py", line 3, in <module>\n'
           "    from trl import GRPOTrainer\n"
           "RuntimeError: Failed to import trl.trainer.grpo_trainer because of the following error (look up to see "
           "its traceback):\nNo module named 'vllm_ascend'\n")
    v, _ = run(load_playbook("base"), log)
    assert v["root_cause"]["category"] == "version_incompat", v["root_cause"]


@pytest.mark.parametrize("request_line, stage", [
    ('INFO:     127.0.0.1:41788 - "POST /init_communicator/ HTTP/1.1" 200 OK', 1),
    ('INFO:     127.0.0.1:41788 - "POST /update_named_param/ HTTP/1.1" 200 OK', 2),
    ("Processed prompts:  40%|████      | 4/10 [00:03<00:05]", 2),  # a bar: the engine's own name stands
])
def test_a_request_a_server_just_answered_says_what_its_engine_was_doing(request_line, stage):
    """An engine process's error is a generation's by its name alone; the request its server had
    just answered says what its client had it do (TRL's and ms-swift's vLLM servers: the trainer
    sets up the weight-sync communicator before the first rollout)."""
    log = (f'INFO:     127.0.0.1:60102 - "GET /health/ HTTP/1.1" 200 OK\n{request_line}\n'
           "(EngineCore_DP0 pid=19) ERROR 01-02 19:25:52 [core.py:790] Invocation of collective_rpc method failed\n"
           "(EngineCore_DP0 pid=19) ERROR 01-02 19:25:52 [core.py:790] Traceback (most recent call last):\n"
           '(EngineCore_DP0 pid=19) ERROR 01-02 19:25:52 [core.py:790]   File "/srv/vllm/v1/engine/core.py", line 423, '
           "in collective_rpc\n"
           "(EngineCore_DP0 pid=19) ERROR 01-02 19:25:52 [core.py:790]     return self.model_executor.collective_rpc(m)\n"
           "(EngineCore_DP0 pid=19) ERROR 01-02 19:25:52 [core.py:790] AttributeError: 'NoneType' object has no "
           "attribute 'device'\n")
    v, _ = run(load_playbook(None), log)
    assert v["failed_stage"] == stage, v["root_cause"]
    # vLLM's record of the failed call heads the traceback of what the method raised: that says why
    assert v["root_cause"]["text"].startswith("AttributeError: 'NoneType'"), v["root_cause"]


@pytest.mark.parametrize("message, category", [
    ("TypeError: accuracy_reward() missing 1 required positional argument: 'solution'", "data_format"),
    ("TypeError: __main__.length_reward() got multiple values for keyword argument 'completions'", "data_format"),
    ("TypeError: tool_reward() got an unexpected keyword argument 'answer'", "data_format"),
    ("TypeError: format_reward() takes 1 positional argument but 2 were given", "version_incompat"),
    ("TypeError: compute_advantage() missing 1 required positional argument: 'index'", "version_incompat"),
])
def test_a_reward_function_that_cannot_take_its_keyword_arguments_does_not_fit_the_data(message, category):
    """Trainers pass a reward function the dataset's columns as keyword arguments (TRL's
    reward_func(prompts=…, completions=…, **columns)): a keyword missing, extra or doubled is the
    data's shape. A positional count that does not fit, or another phase's function, is the API's."""
    log = ("Traceback (most recent call last):\n"
           '  File "/srv/trl/trainer/grpo_trainer.py", line 900, in _calculate_rewards\n'
           "    output_reward_func = reward_func(prompts=prompts, completions=completions, **reward_kwargs)\n"
           f"{message}\n")
    v, _ = run(load_playbook("base"), log)
    assert v["root_cause"]["category"] == category, v["root_cause"]


@pytest.mark.parametrize("message, category", [
    ("ValueError: Input length of input_ids is 5000, but `max_length` is set to 4096. This can lead to unexpected "
     "behavior.", "length_limit"),  # transformers generation utils
    ("wandb.errors.errors.CommError: Run initialization has timed out after 90.0 sec.", "network_proxy"),
    ("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: Triton Error [CUDA]: "
     "invalid argument", "device_runtime_error"),  # not the configuration's "invalid argument"
    ("RuntimeError: Failed to infer device type", "device_runtime_error"),  # vLLM with no accelerator in sight
    ("OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.", "config_mismatch"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "oom"),  # SGLang
    ("RuntimeError: stack expects each tensor to be equal size, but got [3, 512] at entry 0 and [3, 480] at entry 1",
     "data_format"),
    ("ValueError: Unable to create tensor, you should probably activate truncation and/or padding with "
     "'padding=True' 'truncation=True' to have batched tensors with the same length.", "data_format"),
    ("RuntimeError: torch.cat(): expected a non-empty list of Tensors", "data_format"),
    ("ValueError: too many dimensions 'str'", "data_format"),  # torch.tensor over a batch's text values
    ("ValueError: expected sequence of length 4 at dim 1 (got 3)", "data_format"),  # …over lists of uneven length
    ("datasets.exceptions.DatasetNotFoundError: Dataset 'org/gsm9k' doesn't exist on the Hub or cannot be accessed.",
     "config_mismatch"),
    ("openai.NotFoundError: Error code: 404 - {'object': 'error', 'message': 'The model `policy` does not exist.'}",
     "config_mismatch"),  # the agent asks the rollout server for a model by another name
    ("RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following "
     "reasons: 1) Use of a module parameter outside the `forward` function.", "config_mismatch"),
    ('ValueError: Trying to set a tensor of shape torch.Size([151936, 896]) in "weight" (which has shape '
     "torch.Size([151665, 896])), this looks incorrect.", "weight_mapping"),
    ("RuntimeError: ACL stream synchronize failed, error code:507014", "device_runtime_error"),  # torch_npu
    ("RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the current "
     "working operator name is aclnnFlashAttentionScore.", "device_runtime_error"),
    ("IndexError: index 1 is out of bounds for dimension 0 with size 1", "data_format"),  # aten's index check
    ("ValueError: Failed to decode tool call: Invalid \\escape: line 2 column 146 (char 146)", "data_format"),  # verl's tool parser
    ("RuntimeError: 'weight' must be 2-D", "config_mismatch"),  # an embedding's weight ZeRO-3 left partitioned
])
def test_messages_their_printers_define_belong_to_their_family(message, category):
    log = f'Traceback (most recent call last):\n  File "/srv/run/train.py", line 3, in main\n    run()\n{message}\n'
    v, _ = run(load_playbook(None), log)
    assert v["root_cause"]["category"] == category, v["root_cause"]


def test_a_library_the_linker_cannot_find_is_the_root_not_gcc_s_exit_status():
    """A JIT compile at run time (Triton's driver helper) links with -lcuda and the linker finds only
    libcuda.so.1: GNU ld's `cannot find -l…` is the cause, gcc's collect2 line after it a consequence."""
    log = (ENGINE + "(WorkerDict pid=7) /usr/bin/ld: cannot find -lcuda\n"
           "(WorkerDict pid=7) collect2: error: ld returned 1 exit status\n")
    rc = run(load_playbook(None), log)[0]["root_cause"]
    assert (rc["signature"], rc["category"], rc["text"]) == \
        ("linker_missing_library", "version_incompat", "/usr/bin/ld: cannot find -lcuda"), rc


def test_a_cuda_library_its_loader_cannot_load_is_the_root_not_the_worker_s_death():
    """cuBLAS's and cuDNN's lazy loader print `Invalid handle. Cannot load symbol …` (after `Unable
    to load any of {…}`) and abort: the library the process found is another version. The Ray
    worker's death and Hydra's advice around it are consequences."""
    for said in ("(WorkerDict pid=7) Invalid handle. Cannot load symbol cublasLtGetVersion [repeated 7x across cluster]\n",
                 "(WorkerDict pid=7) Unable to load any of {libcudnn_ops.so.9.1.0, libcudnn_ops.so.9.1, libcudnn_ops.so.9}\n"
                 "(WorkerDict pid=7) Invalid handle. Cannot load symbol cudnnCreateTensorDescriptor\n"):
        log = ("Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
               "(raylet) A worker died or was killed while executing a task by an unexpected system error. Worker "
               "exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.\n"
               + said + "(WorkerDict pid=7) *** SIGABRT received at time=1773825404 on cpu 49 ***\n")
        rc = run(load_playbook(None), log)[0]["root_cause"]
        assert (rc["signature"], rc["category"]) == ("cuda_library_load", "version_incompat"), rc


def test_a_cuda_call_inside_nccl_failing_for_want_of_a_matching_build_is_a_version_problem():
    """NCCL's CUDA calls fail with the CUDA runtime's own message: `named symbol not found` (NCCL
    built for other GPUs, or under another driver) says the build does not match, whoever prints
    it; another CUDA failure inside NCCL stays a collective's failure."""
    warn = "(Actor pid=7) e54d:228664:229081 [1] enqueue.cc:42 NCCL WARN Cuda failure '{}'\n"
    for said, category in (("named symbol not found", "version_incompat"),
                           ("no kernel image is available for execution on the device", "version_incompat"),
                           ("invalid argument", "distributed_comm_hang")):
        rc = run(load_playbook(None), ENGINE + warn.format(said))[0]["root_cause"]
        assert rc["category"] == category, (said, rc)


def test_a_sample_the_parallel_scorer_could_not_score_is_a_wrong_reward_not_a_crash():
    """verl's parallel scorer catches the reward function's error (or its timeout), prints it and
    scores the sample 0: the run goes on with wrong rewards — a wrong result at the reward, whatever
    the error, and its own message still says which (a timeout is a timeout)."""
    for said, category in (("(TaskRunner pid=5) [Error] Task failed: Can't pickle <function compute_score at "
                            "0x7fe6b4ff6290>: it's not the same object as custom_module.compute_score, completion: "
                            "The answer is 4", "other"),
                           ("(TaskRunner pid=5) [Timeout] Task timeout: The answer is 4", "timeout")):
        v, _ = run(load_playbook(None), ENGINE + said + "\n")
        rc = v["root_cause"]
        assert (v["outcome"], v["failed_stage"], rc["signature"], rc["category"]) == \
            ("wrong_result", 5, "verl_reward_task_failed", category), (v["outcome"], v["failed_stage"], rc)


def test_prompts_padded_on_the_right_for_generation_are_a_wrong_result_unless_the_run_crashes():
    """transformers warns when a decoder-only model is handed prompts padded on the right: its
    completions continue from pad tokens (empty answers) — a wrong result of the generation; an
    error that kills the run later is the run's failure."""
    warn = ("A decoder-only architecture is being used, but right-padding was detected! For correct generation "
            "results, please set `padding_side='left'` when initializing the tokenizer.\n")
    log = ENGINE + "Beginning of Epoch 1/1, Total Generation Batches 7626\n" + warn + "--- ans --> step=0, rank=2, ['']\n"
    v, _ = run(load_playbook(None), log)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 2, "data_format"), v
    v, _ = run(load_playbook(None), log + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n")
    assert (v["outcome"], v["root_cause"]["category"]) == ("crash", "oom"), v["root_cause"]


def test_an_exception_pasted_indented_is_still_the_error_and_vllm_s_memory_guard_is_start_up_oom():
    """A paste indented by a few blanks (a quote, a list item) keeps its exception line an error;
    vLLM's check of free device memory as its worker starts is an out-of-memory at start-up, the
    message wrapped over two lines as the paste has it."""
    log = ("  ValueError: Free memory on device cuda:0 (17.41/178.35 GiB) on startup is less\n"
           "  than desired GPU memory utilization (0.8, 142.68 GiB).\n")
    v, _ = run(load_playbook(None), log)
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["category"]) == ("crash", 1, "oom"), (v["outcome"], v["failed_stage"], rc)
    assert rc["text"].strip().startswith("ValueError: Free memory on device cuda:0"), rc


def test_a_rollout_engine_whose_sleep_freed_nothing_is_a_wrong_result_of_its_setting():
    """vLLM's sleep mode reports what it released: 0.00 GiB (expandable segments on) leaves the
    engine's memory resident while the trainer runs — a wrong result of the completion stage's
    sleep, its cause a setting; a sleep that freed memory is no finding."""
    def log(freed):
        return (ENGINE + f"INFO 11-17 17:06:50 [worker_v1.py:171] Sleep mode freed {freed} GiB memory, 23.66 GiB "
                "memory is still in use.\nINFO 11-17 17:06:50 [executor_base.py:189] It took 0.000855 seconds to fall asleep.\n")
    v, _ = run(load_playbook(None), log("0.00"))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"], v["root_cause"]["category"]) == \
        ("wrong_result", 2, "sleep_freed_nothing", "config_mismatch"), v["root_cause"]
    v, _ = run(load_playbook(None), log("10.00"))
    assert v["root_cause"] is None, v["root_cause"]


def test_a_failure_caught_and_replaced_by_zero_is_a_wrong_result_where_its_message_says():
    """A trainer that catches an error and puts zeros in its place (`Error computing
    per_token_logps: … Setting output to zero.`) or fills a missing reward with 0 goes on learning
    from zeros: a wrong result, placed by what the message names (the log-probs: training data;
    the reward); a line that only mentions zero is no finding."""
    p = load_playbook(None)
    v, _ = run(p, ENGINE + "Error computing per_token_logps: pop from an empty deque. Setting output to zero.\n")
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == \
        ("wrong_result", 6, "failure_replaced_by_default"), v["root_cause"]
    v, _ = run(p, ENGINE + "Warning: Reward is None for rollout ro-f38e, will be auto-set to 0.0.\n")
    assert (v["outcome"], v["failed_stage"]) == ("wrong_result", 5), v["root_cause"]
    v, _ = run(p, ENGINE + "Setting the learning rate warmup to zero.\n")
    assert v["root_cause"] is None, v["root_cause"]


def test_the_heap_check_that_aborted_a_process_is_its_root_not_the_abort():
    """glibc's allocator finds a double free (`free(): double free detected in tcache 2`) and
    aborts: its line, first, is the cause; the abort's reports after it (Ray's SIGABRT handler,
    faulthandler's `Fatal Python error: Aborted`) are what the abort looks like."""
    log = ("(pid=56124) free(): double free detected in tcache 2\n"
           "(pid=56124) *** SIGABRT received at time=1762505050 on cpu 30 ***\n"
           "(pid=56124) Fatal Python error: Aborted\n(pid=56124)\n(pid=56124) Stack (most recent call first):\n"
           '(pid=56124)   File "/srv/venv/torch/cuda/__init__.py", line 182 in is_available\n')
    rc = run(load_playbook(None), log)[0]["root_cause"]
    assert rc["text"] == "free(): double free detected in tcache 2", rc


def test_a_wrapper_whose_traceback_is_cut_short_takes_the_category_of_the_frames_it_wraps():
    """vLLM's worker reports `WorkerProc hit an exception.` and prints the worker's traceback,
    here cut before its exception: the frames say what failed — inside a weight sync's
    `update_named_param`, the mapping of pushed tensors (weight_mapping); inside a forward pass, a
    category no frame names."""
    def log(func):
        pre = "(Worker_TP1 pid=11) ERROR 01-07 17:21:12 [multiproc_executor.py:671] "
        return (ENGINE + pre + "WorkerProc hit an exception.\n" + pre + "Traceback (most recent call last):\n"
                + pre + '  File "/srv/vllm/v1/executor/multiproc_executor.py", line 666, in worker_busy_loop\n'
                + pre + "    output = func(*args, **kwargs)\n"
                + pre + f'  File "/srv/swift/llm/infer/rollout.py", line 88, in {func}\n')
    rc = run(load_playbook(None), log("update_named_param"))[0]["root_cause"]
    assert (rc["signature"], rc["category"]) == ("vllm_worker_proc_exception", "weight_mapping"), rc
    rc = run(load_playbook(None), log("execute_model"))[0]["root_cause"]
    assert rc["category"] == "other", rc


def test_a_ppo_trainer_s_warnings_about_its_values_are_wrong_results_of_their_phase():
    """TRL's PPO step warns when the KL estimate goes negative (the log-probs of the training data
    are not the sampled sequences') and when it skips a batch whose importance ratio is past the
    threshold (an update lost): wrong results, each of the phase that computed the value — not a
    hang of a run whose excerpt ends there."""
    kl = ("/usr/lib/python3/site-packages/trl/trainer/ppo_trainer.py:1194: UserWarning: KL divergence is starting "
          "to become negative: -1.66 - this might be a precursor for failed training.\n  warnings.warn(\n")
    ratio = ("/usr/lib/python3/site-packages/trl/trainer/ppo_trainer.py:1200: UserWarning: The average ratio of batch "
             "(13.70) exceeds threshold 10.00. Skipping batch.\n  warnings.warn(\n")
    for said, stage, sig in ((kl, 6, "ppo_kl_negative"), (ratio, 7, "ppo_ratio_threshold_skip")):
        v, _ = run(load_playbook(None), ENGINE + "  0%|          | 1/2615 [01:23<60:49:43, 83.77s/it]\n" + said, now=10 ** 10)
        assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == ("wrong_result", stage, sig), \
            (v["outcome"], v["failed_stage"], v["root_cause"])


def test_an_exception_named_by_its_module_path_is_an_error_whatever_its_class_ends_with():
    """`pyarrow.lib.ArrowInvalid: …` ends in neither Error nor Exception, but a module's path then a
    class is an exception's qualified name: an error on its own line; a logger's name (a module path
    alone) is not."""
    v, _ = run(load_playbook(None), "pyarrow.lib.ArrowInvalid: Error creating dataset. Could not read schema "
                                    "from 'data/train-00000-of-00001.parquet'. Is this a 'parquet' file?\n")
    assert (v["outcome"], v["root_cause"]["category"]) == ("crash", "data_format"), v["root_cause"]
    v, _ = run(load_playbook(None), "swift.trainers.mixin: Saving model checkpoint to /out/checkpoint-50\n")
    assert v["root_cause"] is None, v["root_cause"]


def test_an_http_status_error_logged_by_its_caller_is_an_error():
    """httpx's `Client error '403 Forbidden' for url '…'`, logged by the code that caught it, is
    an error of the request it names (a generation's, by its path), not a line a silent run ended on."""
    log = ("(RolloutManager pid=17) [2026-02-03 22:13:47] http_utils.py:186 - Error: Client error "
                    "'403 Forbidden' for url 'http://10.0.0.2:30000/generate'\n")
    v, _ = run(load_playbook(None), log)
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["signature"]) == ("crash", 2, "http_status_error"), (v["outcome"], rc)


def test_an_api_status_error_logged_by_whoever_caught_it_is_an_error_of_its_family():
    """The openai client's `Error code: 404 - {body}` is an error wherever a wrapper or an agent logs
    it, with no exception type of its own on the line: the first time it is said is the root, and
    its body names the family (a model the server does not serve: the configuration)."""
    body = "{'object': 'error', 'message': 'The model `/models/Qwen2.5-3B` does not exist.', 'code': 404}"
    log = (ENGINE + f"AgentOps: [OPENAI WRAPPER] Error in chat_completion_stream_wrapper: Error code: 404 - {body}\n"
           "step 0: dispatching 8 tasks\n"
           f"2025-08-19 14:53:08,996 [ERROR] (Process-1 __main__) Error during agent invocation: Error code: 404 - {body}\n")
    rc = run(load_playbook(None), log)[0]["root_cause"]
    assert (rc["line_no"], rc["category"]) == (2, "config_mismatch"), rc


def test_an_index_past_the_end_of_a_table_is_a_size_the_model_was_not_built_for():
    """An embedding looked up with a token id beyond its rows: on CUDA the index kernel's assertion,
    then the device-side assert it triggers (its consequence); on CPU aten's own IndexError."""
    cuda = ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1308: indexSelectSmallIndex: block: [3,0,0], thread: [7,0,0] "
            "Assertion `srcIndex < srcSelectDimSize` failed.\n"
            "Traceback (most recent call last):\n  File \"/srv/run/train.py\", line 3, in main\n    run()\n"
            "RuntimeError: CUDA error: device-side assert triggered\n")
    cpu = ('Traceback (most recent call last):\n  File "/srv/torch/nn/functional.py", line 2551, in embedding\n'
           "    return torch.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)\n"
           "IndexError: index out of range in self\n")
    for log in (cuda, cpu):
        v, _ = run(load_playbook(None), log)
        assert v["root_cause"]["category"] == "config_mismatch", v["root_cause"]
    v, _ = run(load_playbook(None), cuda.split("\n", 1)[1])  # the device-side assert alone: the device's
    assert v["root_cause"]["category"] == "device_runtime_error", v["root_cause"]


def test_a_kernel_s_assertion_before_the_abort_it_caused_is_the_root():
    """No traceback: the kernel's assertion, then the C++ abort of the device-side assert it caused
    (libstdc++'s `terminate called after throwing …`, `what():  CUDA error: device-side assert
    triggered`). The assertion says what was wrong; the sampling's NaN places it in the generation."""
    kernel = ("../aten/src/ATen/native/cuda/TensorCompare.cu:110: _assert_async_cuda_kernel: block: [0,0,0], "
              "thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.")
    log = (kernel + "\nterminate called after throwing an instance of 'c10::Error'\n"
           "  what():  CUDA error: device-side assert triggered\n"
           "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n")
    v, _ = run(load_playbook(None), log)
    assert (v["root_cause"]["text"], v["failed_stage"]) == (kernel, 2), v["root_cause"]
    v, _ = run(load_playbook(None), log.split("\n", 1)[1])  # the abort alone: the device's
    assert v["root_cause"]["category"] == "device_runtime_error", v["root_cause"]


@pytest.mark.parametrize("code, category", [("ERR02200 DIST call hccl api failed.", "distributed_comm_hang"),
                                            ("ERR00100 PTA call acl api failed.", "device_runtime_error")])
def test_torch_npu_s_error_header_says_which_sub_module_failed(code, category):
    """torch_npu's header names its sub-module (00 PTA, 01 OPS, 02 DIST): alone, it says that much."""
    v, _ = run(load_playbook("ascend"), f"[ERROR] 2026-01-02-10:45:23 (PID:1307, Device:0, RankID:8) {code}\n")
    assert v["root_cause"]["category"] == category, v["root_cause"]


def test_a_line_printed_after_a_progress_bar_on_its_line_is_read_as_a_line_of_its_own():
    """tqdm redraws its bar with `\\r` and ends the line only when the bar closes: what another
    thread or process of the stream prints meanwhile follows the bar's `]` on the same line. It is
    read as the line it is, its own prefix peeled (another writer's: no process when it names none,
    as a Ray worker's bar in the driver's terminal is followed by the driver's traceback); a bar followed by Ray's
    repeat note, or by nothing, stays one line."""
    p = load_playbook(None)
    bar = "\rrollout:  40%|████      | 4/10 [01:02<01:33, 15.6s/it]"
    cases = [  # (what lands after the bar, category, outcome)
        ("/opt/job/launch.sh: line 41: 90817 Killed                  python3 -m tinyrl.train", "oom", "crash"),
        ("[rank3]:[E1205 02:14:07.113 ProcessGroupNCCL.cpp:632] [Rank 3] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
         "600412 milliseconds before timing out.", "distributed_comm_hang", "hang"),
        ("{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-06, 'reward': 0.41, 'epoch': 0.02}", "precision_dtype",
         "wrong_result"),
    ]
    for glued, category, outcome in cases:
        v, _ = run(p, ENGINE + f"(WorkerDict pid=7) {bar}{glued}\n")
        rc = v["root_cause"]
        assert (rc["category"], v["outcome"]) == (category, outcome), (glued, rc, v["outcome"])
        assert rc["text"].startswith(glued.split("] ", 1)[-1][:20]) and "%|" not in rc["text"], rc["text"]
    from harness.analyze.lines import make_line, unglued
    one = make_line(1, f"(WorkerDict pid=7) {bar} [repeated 4x across cluster]", p.prefixes)
    assert [ln.text for ln in unglued(one, p.prefixes)] == [one.text] and one.repeat == 4
    shown = bar.lstrip("\r")
    two = unglued(make_line(1, f"(WorkerDict pid=7) {shown}ValueError: bad prompt", p.prefixes), p.prefixes)
    assert [(ln.text, ln.proc) for ln in two] == [(shown, ":7"), ("ValueError: bad prompt", "")]
    # a bar of no known total (`12it [00:03, 3.50it/s]`, its description before it or none), the same
    for open_bar in ("12it [00:03,  3.50it/s]", "rollout: 5it [11:15, 133.92s/it]"):
        v, _ = run(p, ENGINE + f"{open_bar}{cases[0][0]}\n")
        assert (v["root_cause"]["category"], v["root_cause"]["text"]) == ("oom", cases[0][0]), v["root_cause"]
    assert [ln.text for ln in unglued(make_line(1, "5it [11:15, 133.92s/it]", p.prefixes), p.prefixes)] == \
        ["5it [11:15, 133.92s/it]"]


def test_a_traceback_pasted_onto_one_line_is_read_as_its_lines():
    """An issue's paste that lost its line breaks, or a collector that joined a record's lines with
    spaces: the frames, their statements and the exception stand on one line. Read as the lines
    Python printed, the exception is the root cause of a crash, placed by its frames; a frame alone
    on its line, or a line that only mentions a file, stays as it is."""
    p = load_playbook(None)
    frames = ['File "/srv/tinyrl/trainer.py", line 210, in fit', "self.update_policy(batch)",
              'File "/srv/tinyrl/policy.py", line 88, in update_policy', "loss = self.loss_fn(logits, batch)",
              'File "/srv/tinyrl/losses.py", line 19, in loss_fn', "ratio = torch.exp(logp - old_logp) ~~~~^~~~"]
    exc = "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 1"
    for sep in (" ", "   ", "\t"):
        flat = sep.join(["Traceback (most recent call last):", *frames, exc])
        v, _ = run(p, ENGINE + f"(TaskRunner pid=9) {flat}\n")
        rc = v["root_cause"]
        assert (v["outcome"], rc["text"], v["failed_stage"]) == ("crash", exc, 7), (v["outcome"], rc)
    from harness.analyze.lines import make_line, unglued
    for alone in ['  File "/srv/tinyrl/losses.py", line 19, in loss_fn', 'see File "/srv/notes.txt" for the plan',
                  'File "/srv/a.py", line 3, in main ValueError(x) was caught and logged']:
        line = make_line(1, alone, p.prefixes)
        assert [ln.text for ln in unglued(line, p.prefixes)] == [line.text]


def test_a_message_s_backticks_lost_to_markdown_still_name_it():
    """An issue's paste outside a code block loses each pair of backticks to markdown: the kernel's
    assertion reads the same with or without them, and stays the root cause before the device-side
    assert it causes."""
    p = load_playbook(None)
    for q in ("`", ""):
        kernel = (f"/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectSmallIndex: block: [3,0,0], "
                  f"thread: [7,0,0] Assertion {q}srcIndex < srcSelectDimSize{q} failed.")
        log = ENGINE + kernel + "\n" + traceback("", "RuntimeError: CUDA error: device-side assert triggered")
        rc = run(p, log)[0]["root_cause"]
        assert (rc["text"], rc["category"]) == (kernel, "config_mismatch"), (q, rc)
        other = f"csrc/sampler.cu:88: sample_kernel: block: [0,0,0], thread: [1,0,0] Assertion {q}p >= 0{q} failed."
        rc = run(p, ENGINE + other + "\n")[0]["root_cause"]
        assert rc is not None and rc["text"] == other, (q, rc)


def test_an_error_no_family_names_raised_while_a_record_is_read_or_encoded_is_the_record_s_shape():
    """The frames, not the message: a bare assertion in a dataset's __getitem__, a collate_fn or a
    template's encode is data_format; the same assertion elsewhere says nothing of its class."""
    p = load_playbook("base")

    def crash(funcs):
        frames = "".join(f'  File "/srv/tinyrl/{f}.py", line {i + 3}, in {f}\n    x = step{i}()\n' for i, f in enumerate(funcs))
        return f"Traceback (most recent call last):\n{frames}AssertionError: turn 3 has no content\n"
    for funcs in (("main", "fetch", "__getitem__", "check_turn"), ("main", "collate_fn", "pad_turns"),
                  ("main", "_encode_turns", "check_turn")):
        v, _ = run(p, crash(funcs))
        assert v["root_cause"]["category"] == "data_format", (funcs, v["root_cause"])
    v, _ = run(p, crash(("main", "schedule", "check_turn")))
    assert v["root_cause"]["category"] == "other", v["root_cause"]


def test_a_value_of_a_builtin_type_an_operation_cannot_take_is_the_data_s_shape_past_start_up():
    """CPython's TypeErrors of an operation given a None, a string, a list where it wanted another
    value (the messages as this interpreter prints them): past start-up, a record's field of the
    wrong shape (data_format), as a bare line or with its traceback; in start-up's set-up no record
    exists yet, and an API object that cannot be indexed is no record: neither says its class."""
    p = load_playbook("base")
    none, text, nums, key = None, "text", [1], ["k"]
    said = []
    for op in (lambda: none["prompt"], lambda: len(none), lambda: 1 + nums, lambda: text["role"],
               lambda: nums["a"], lambda: math.sqrt(none), lambda: float(none), lambda: text < 1,
               lambda: "x" in none, lambda: {}[key]):
        with pytest.raises(TypeError) as e:
            op()
        said.append(f"TypeError: {e.value}")
    for text in said:
        v, _ = run(p, ENGINE + traceback("", text))
        assert (v["failed_stage"], v["root_cause"]["category"]) == (6, "data_format"), text
        v, _ = run(p, ENGINE + traceback("", text, funcs=("main", "compute_score")))  # a None from the data, not the scoring
        assert (v["failed_stage"], v["root_cause"]["category"]) == (5, "data_format"), text
        v, _ = run(p, ENGINE + "(RewardManager pid=7) " + text + "\n")  # a line with no traceback
        assert (v["failed_stage"], v["root_cause"]["category"]) == (5, "data_format"), text
        v, _ = run(p, traceback("", text, funcs=("main", "init_model")))
        assert (v["failed_stage"], v["root_cause"]["category"]) == (1, "other"), text
    v, _ = run(p, ENGINE + traceback("", "TypeError: 'TrainerState' object is not subscriptable"))
    assert v["root_cause"]["category"] == "other", v["root_cause"]


def test_a_bare_assertion_says_the_statement_that_failed():
    """An `assert` without a message prints only `AssertionError`: the statement under the innermost
    frame is all it says of what failed."""
    p = load_playbook("base")
    log = ("Traceback (most recent call last):\n  File \"/srv/tinyrl/comm.py\", line 90, in __init__\n"
           "    assert isinstance(device, torch.device)\nAssertionError\n")
    v, _ = run(p, log)
    assert v["root_cause"]["text"] == ('AssertionError (at File "/srv/tinyrl/comm.py", line 90, in __init__: '
                                       'assert isinstance(device, torch.device))'), v["root_cause"]


OOM_KILL = ("(raylet) [2025-03-01 16:18:15,116 E 2687 2687] (raylet) node_manager.cc:3069: 2 Workers (tasks / actors) "
            "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons.\n")


def test_an_error_nothing_places_is_in_the_work_the_lines_before_it_name():
    """A worker killed with no traceback: the lines just before say what the run was doing (EasyR1
    saving the update's checkpoint: actor_update); the words of paths name files, not work; a line
    of metrics names every phase, so the look stops at it."""
    union = load_playbook(None)
    saving = "(WorkerDict pid=15) [rank-6]: Saving checkpoint to /ckpt/global_step_50/actor/model_rank_6.pt\n"
    v, _ = run(union, saving + "(WorkerDict pid=15) [rank-6]: Saving extra_state to /ckpt/extra_state_rank_6.pt\n" + OOM_KILL)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("crash", 7, "oom"), v["root_cause"]
    paths = "(WorkerDict pid=15) [rank-6]: Copying /ckpt/kl_loss/generate_sequences/rollout.pt to /tmp/x\n"
    v, _ = run(union, paths + OOM_KILL)
    assert v["failed_stage"] is None, v["root_cause"]  # nothing named: an out-of-memory kill has no assumed stage
    report = "(WorkerDict pid=15) eval: reward/mean: 0.31 - response_length/mean: 512.0 - score/max: 1.0\n"
    v, _ = run(union, saving + report + OOM_KILL)
    assert v["failed_stage"] is None, v["root_cause"]  # the look stopped at the metrics: nothing places it
    denied = "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: https://hub.example/rm-7b/x.json\n"
    for said, stage in [("12/05/2026 16:02:18 - INFO - tuner.loader - Load reward model from rm-7b\n", 1),
                        ("(RewardManager pid=9) scoring batch 3 with rm-7b\n", 5)]:
        v, _ = run(union, said + denied)  # what is being loaded is being set up; what is scoring, scoring
        assert v["failed_stage"] == stage, (said, v["root_cause"])


def test_a_supervisor_s_report_of_a_dead_process_nothing_places_has_no_assumed_stage():
    """Ray's report that a worker or an actor died (the raylet's `Worker unexpectedly exits …
    potential root causes: OOM killer, ray stop, SIGSEGV`) says which process died, not what it was
    doing: with nothing to place it and no stage passed, its stage is unknown, not start-up's. The
    work the lines before it name still places it; any other error nothing places is still
    start-up's (the lifecycle's default)."""
    union = load_playbook(None)
    died = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
            "troubleshoot the problem, check the logs for the dead worker. Worker exit type: SYSTEM_ERROR Worker "
            "exit detail: Worker unexpectedly exits with a connection error code 2. End of file.\n")
    v, _ = run(union, died)
    assert (v["outcome"], v["failed_stage"], v["stage_basis"]) == ("crash", None, None), v["root_cause"]
    v, _ = run(union, "(RewardManager pid=9) scoring batch 3\n" + died)
    assert v["failed_stage"] == 5, v["root_cause"]
    v, _ = run(union, "ValueError: the config has no key 'lr'\n")
    assert v["failed_stage"] == 1, v["root_cause"]


@pytest.mark.parametrize("line", [
    "[rank1]: EI0009: [PID: 2225827] 2025-09-24-20:59:48.119.066 Transport init error. Reason: [Create][DestLink]Create Dest error!",
    "EI0012: [PID: 77] 2026-01-02-10:00:00.000.000 The HCCL link between rank 3 and rank 5 went down.",
    "RuntimeError: Communication_Error_Unknown(EJ0007): the remote process exited.",
])
def test_an_hccl_error_code_no_entry_names_is_a_communication_failure(line):
    """CANN names the component in an error code's two letters (EI: HCCL, EJ: its HCCP process): a
    code the playbook does not list one by one is still a failure of the NPUs' communication, and
    the root cause before the wrapper that follows it."""
    log = ENGINE + line + "\n(EngineCore_DP0 pid=21) ERROR 09-24 20:59:57 [core.py:790] Invocation of collective_rpc method failed\n"
    v, _ = run(load_playbook("ascend"), log)
    assert v["root_cause"]["category"] == "distributed_comm_hang" and v["root_cause"]["text"] in line, v["root_cause"]


@pytest.mark.parametrize("name, stage", [("actor_infer-12", 2), ("reward-0", 5)])
def test_the_actor_a_died_actor_error_names_places_it(name, stage):
    """Ray's ActorDiedError lists the dead actor's class and name under its message (ROLL names its
    workers after their cluster): with no frame to say more, that process's work is where it failed."""
    log = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
           f"\tclass_name: ActorWorker\n\tactor_id: 3e7272acace78763d2e9b9b101000000\n\tpid: 17871\n\tname: {name}\n"
           "\tnamespace: roll\n\tip: 10.0.0.2\nThe actor is dead because its worker process has died. Worker exit "
           "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. "
           "End of file. There are some potential root causes.\n")
    v, _ = run(load_playbook(None), log)
    assert (v["outcome"], v["failed_stage"]) == ("crash", stage), v["root_cause"]


@pytest.mark.parametrize("line", [
    "[2025-08-01 10:48:03] host-n0-0:30344:30344 [0] transport/p2p.cc:298 NCCL WARN Cuda failure 'invalid argument'",
    "a5fa65866c9c:116812:120170 [0] proxy.cc:1336 NCCL WARN Cuda failure 1 'invalid argument'",
    "node-1:1112:13532 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.3<50131> with status=12",
])
def test_an_error_nccl_reports_itself_is_a_communication_failure(line):
    """NCCL's WARN macro reports a failure inside its own transports, whatever call failed there (a
    CUDA call's `invalid argument` is no configuration's)."""
    v, _ = run(load_playbook(None), line + "\n")
    assert v["root_cause"]["category"] == "distributed_comm_hang", v["root_cause"]


def test_a_log_that_ends_inside_one_frame_and_its_statement_ends_in_a_traceback_cut_short():
    """A paste of a traceback's last frame (its statement and Python 3.11's carets under it), the
    head and the exception out of the excerpt: a traceback cut short, placed by its frame (a
    weight sync, SkyRL's); a frame line alone, without its statement, is not enough."""
    frame = ('File "/srv/skyrl_train/weights_manager.py", line 57, in __enter__\n'
             "    ray.get(self.sync_policy_weights_to_inference_engines())\n           ^^^^^^^^^^^^^^^^^^^\n")
    v, _ = run(load_playbook(None), ENGINE + "skyrl_train.trainer:train:237 - Started: 'step'\n" + frame)
    assert (v["outcome"], v["failed_stage"]) == ("crash", 2) and "cut short" in v["root_cause"]["text"], v["root_cause"]
    v, _ = run(load_playbook(None), ENGINE + 'File "/srv/skyrl_train/weights_manager.py", line 57, in __enter__\n')
    assert v["root_cause"] is None, v["root_cause"]


def test_a_call_the_pasted_exception_names_places_a_traceback_cut_short_inside_it():
    """One rank's exception (the paste's first line), then another rank's traceback cut short in
    the trainer's step: the function the TypeError says could not be called (`len_reward() missing
    1 required positional argument`) is the innermost call known, inside the frames shown — the
    reward, not the update the step's frames name. Without it the step's frames place the failure."""
    frames = "".join(f'[rank3]:   File "/srv/trainer.py", line {i}, in {f}\n[rank3]:     x = {f}()\n'
                     for i, f in enumerate(("main", "train", "training_step", "_prepare_inputs")))
    said = "rank2]: TypeError: len_reward() missing 1 required positional argument: 'solutions'\n"  # the paste's first line, cut
    v, _ = run(load_playbook(None), ENGINE + said + "[rank3]: Traceback (most recent call last):\n" + frames)
    assert (v["outcome"], v["failed_stage"]) == ("crash", 5) and "cut short" in v["root_cause"]["text"], v["root_cause"]
    v, _ = run(load_playbook(None), ENGINE + said.replace("len_reward() ", "") + "[rank3]: Traceback (most recent call last):\n" + frames)
    assert v["failed_stage"] == 7, v["root_cause"]


def test_a_library_s_own_error_report_just_before_a_traceback_cut_short_is_its_message():
    """A C extension prints its failed call (`CUDA Error: out of memory at …cpp:62`, torch's `CUDA
    error: …`, `NCCL error: …`) just before Python's traceback, which the paste then cuts before its
    exception: that report is the traceback's message, and its family the root cause's category."""
    frames = ('Traceback (most recent call last):\n  File "/srv/run/train.py", line 303, in <module>\n'
              "    trainer.train()\n"
              '  File "/srv/venv/site-packages/vllm/entrypoints/llm.py", line 1572, in wake_up\n'
              "    self.llm_engine.wake_up(tags)\n")
    said = "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62"  # vLLM's cumem allocator
    v, _ = run(load_playbook(None), ENGINE + said + "\n" + frames)
    assert v["root_cause"]["text"].startswith(said + " (its traceback cut short after"), v["root_cause"]
    assert v["root_cause"]["category"] == "oom", v["root_cause"]
    v, _ = run(load_playbook(None), ENGINE + "CUDA graphs: out of memory budget at 3\n" + frames)  # no `error: `
    assert v["root_cause"]["text"].startswith("Traceback (most recent call last): (cut short after"), v["root_cause"]


def test_slime_s_rollout_metrics_judge_its_raw_reward_not_its_normalised_rewards():
    """slime logs a rollout's metrics as `rollout N: {'rollout/…': …}`: a raw reward of 0 there is
    no sample scoring anything (a wrong result at the reward); its group-normalised rewards average
    0 by construction and say nothing."""
    def line(raw):
        return (f"rollout 3: {{'rollout/response_lengths': 812.5, 'rollout/rewards': 0.0, 'rollout/truncated': 0.01, "
                f"'rollout/raw_reward': {raw}, 'rollout/total_lengths': 990.2}}\n")
    p = load_playbook(None)
    v, _ = run(p, ENGINE + line(0.0))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["signature"]) == ("wrong_result", 5, "reward_mean_zero"), v
    v, _ = run(p, ENGINE + line(0.42))
    assert v["root_cause"] is None, v["root_cause"]


def test_a_process_s_own_initialisation_is_start_up_whatever_work_the_process_does_after():
    """An inference engine's worker process (vLLM's `Worker_TP2`: generation) failing while it
    initialises something — a communicator's constructor under `init_communicator` — fails at
    start-up; the same process failing in its work is in the generation."""
    def crash(funcs):
        frames = "".join(f'(Worker_TP2 pid=35) ERROR 09-26 15:11:03 [multiproc_executor.py:654]   File "/srv/eng/{f}.py", '
                         f"line {i + 9}, in {f}\n" for i, f in enumerate(funcs))
        return ("(Worker_TP2 pid=35) ERROR 09-26 15:11:03 [multiproc_executor.py:654] Traceback (most recent call last):\n"
                + frames + "(Worker_TP2 pid=35) ERROR 09-26 15:11:03 [multiproc_executor.py:654] AssertionError: bad device\n")
    p = load_playbook(None)
    for funcs, stage in [(("worker_busy_loop", "init_communicator", "__init__"), 1),
                         (("worker_busy_loop", "run_step", "check"), 2)]:
        v, _ = run(p, crash(funcs))
        assert v["failed_stage"] == stage, (funcs, v["root_cause"])


def test_an_agent_s_tool_or_observation_is_the_trajectory_s_work():
    """A tool an agent calls and the observation its environment answers with are steps of an
    episode: an error executing a tool (the words of a line of an error's shape, no traceback), or
    a traceback through a tool's code, is in the trajectory."""
    p = load_playbook(None)
    served = ENGINE + "INFO 06-04 22:26:01 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000\n"
    v, _ = run(p, served + "(TaskRunner pid=9) Error executing tool query_rag: 1 validation error for query_ragOutput\n")
    assert v["failed_stage"] == 4, v["root_cause"]
    v, _ = run(p, served + "(TaskRunner pid=9) ValueError: observation of the search tool is empty\n")  # no traceback
    assert v["failed_stage"] == 4, v["root_cause"]
    v, _ = run(p, ENGINE + traceback("", "ValueError: empty page", funcs=("main", "run", "call_tool")))
    assert v["failed_stage"] == 4, v["root_cause"]
    v, _ = run(p, ENGINE + traceback("", "ValueError: empty page", funcs=("main", "run", "parse_observation")))
    assert v["failed_stage"] == 4, v["root_cause"]


def test_vllm_s_start_up_profile_run_encloses_the_forward_passes_it_runs():
    """vLLM's model forward passes (its compiled graphs, its model classes) are a generation's work,
    and the start-up's profile run runs the same ones: out of memory there is start-up, in a step of
    the engine a generation; a dump of an engine waiting under them (py-spy's relative paths) is in
    a generation too."""
    def oom(frames):
        body = "".join(f'  File "/venv/lib/python3.12/site-packages/vllm/{path}", line {i + 10}, in {fn}\n    x = y()\n'
                       for i, (path, fn) in enumerate(frames))
        return "Traceback (most recent call last):\n" + body + "torch.OutOfMemoryError: CUDA out of memory.\n"
    forward = [("compilation/cuda_graph.py", "__call__"), ("model_executor/models/qwen2.py", "forward")]
    start = [("v1/engine/core.py", "_initialize_kv_caches"), ("v1/worker/gpu_worker.py", "determine_available_memory"),
             ("v1/worker/gpu_model_runner.py", "profile_run"), ("v1/worker/gpu_model_runner.py", "_dummy_run")]
    p = load_playbook("vllm")
    assert run(p, oom(start + forward))[0]["failed_stage"] == 1
    assert run(p, oom([("v1/engine/core.py", "step")] + forward))[0]["failed_stage"] == 2
    dump = ['Thread 41 (active): "MainThread"', "    all_reduce (vllm/distributed/parallel_state.py:132)",
            "    forward (vllm/model_executor/models/qwen2.py:380)", "    __call__ (vllm/compilation/cuda_graph.py:223)"]
    v = run(p, ENGINE + "\n".join(dump) + "\n", ts=1000.0, now=1000.0 + 7 * 86400)[0]
    assert (v["outcome"], v["failed_stage"]) == ("hang", 2), v["root_cause"]


def test_a_paste_s_elision_inside_a_traceback_does_not_cut_it_short():
    """`...` on a line of its own between a traceback's frames, or before its exception, is the
    paster's cut (frames left out): the traceback goes on, and its last line is its exception
    whatever its type is named (`pkg.op.default: …`, a dispatcher's message without `Error`)."""
    union = load_playbook(None)
    head = ["Traceback (most recent call last):",
            '  File "/srv/tinyrl/train.py", line 40, in main',
            "    policy.forward(batch)"]
    tail = ['  File "/venv/lib/python3.11/site-packages/kernels/attention.py", line 65, in attend',
            "    out = varlen_forward(q, k, v)",
            "kernels.varlen_forward.default: got mixed torch.Tensor and DTensor, need to convert all torch.Tensor to DTensor"]
    for elision in ("...", "…", "[...]"):
        v, _ = run(union, "\n".join(head + [elision] + tail[:-1] + [elision] + tail[-1:]) + "\n")
        assert v["outcome"] == "crash" and v["root_cause"]["text"].startswith("kernels.varlen_forward.default: got mixed"), \
            (elision, v["outcome"], v["root_cause"])
    v, _ = run(union, "\n".join(head + ["-- a note --"] + tail[-1:]) + "\n")  # other words: no elision
    assert v["root_cause"]["text"].startswith("Traceback"), v["root_cause"]


def test_an_error_no_family_names_raised_while_scoring_is_the_reward_function_s():
    """A lone exception no signature or family names, whose message says it was scoring (its
    words, no frame): raised in reward, by the reward function's own code — as when frames say so."""
    union = load_playbook(None)
    v, _ = run(union, "ValueError: the verifier cannot run in a thread: its timeout needs the main thread's signals\n")
    assert (v["failed_stage"], v["root_cause"]["category"]) == (5, "reward_parsing"), v["root_cause"]
    v, _ = run(union, "ValueError: the sampler cannot run in a thread: its timeout needs the main thread's signals\n")
    assert v["root_cause"]["category"] != "reward_parsing", v["root_cause"]


def test_a_dead_generation_engine_fails_its_client_s_call_in_the_completion_stage():
    """vLLM's EngineDeadError reaches a client whose call went into an engine that died while it
    served (one that dies at start-up fails `Engine core initialization failed` instead): an agent
    loop's generation failed in completion, however deep in the agent loop it was called."""
    union = load_playbook(None)
    log = ["ray.exceptions.RayTaskError(EngineDeadError): ray::AgentWorker.run_episodes() (pid=95, ip=10.0.0.3)",
           '  File "/srv/tinyrl/agent_loop.py", line 386, in run_episodes',
           "    outputs = await asyncio.gather(*tasks)",
           '  File "/srv/tinyrl/agent_loop.py", line 421, in _run_agent_loop',
           "    output = await loop.run(params)",
           "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."]
    v, _ = run(union, "\n".join(log) + "\n")
    assert (v["outcome"], v["failed_stage"]) == ("crash", 2), (v["failed_stage"], v["root_cause"])


@pytest.mark.parametrize("line, category, signature", [
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "distributed_comm_hang", "nccl_error"),
    ("RuntimeError: NCCL error: remote process exited or there was a network error", "distributed_comm_hang", "nccl_error"),
    ("RuntimeError: Input type (float) and bias type (c10::BFloat16) should be the same", "precision_dtype", None),
    ("RuntimeError: Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same",
     "precision_dtype", None),
    ("(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: "
     "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on "
     "this node or reducing task parallelism by requesting more CPUs per task.", "oom", "ray_memory_monitor_kill"),
])
def test_a_library_s_fixed_words_for_its_failure_name_it_alone(line, category, signature):
    """The words a library prints for one failure, the rest of its report cut off: the NCCL wrappers
    of vLLM and SGLang (`NCCL error: ` and NCCL's own error string), the advice Ray's memory monitor
    ends its kill report with; torch's words for a layer's input of another dtype than its weight
    or its bias (an error family: no signature)."""
    union = load_playbook(None)
    v, _ = run(union, "some work under way\n" + line + "\n")
    rc = v["root_cause"]
    assert (v["outcome"], rc["category"], rc["signature"]) == ("crash", category, signature), rc


def test_an_importance_sampling_ratio_far_below_one_says_trainer_and_engine_hold_different_models():
    """TRL's vLLM importance-sampling correction logs the mean ratio of the trainer's probability
    of the rollout's tokens over the engine's: about 1 when both hold the same weights; a mean
    below a tenth is an engine generating with other weights (not synced, a wrong mapping) —
    a wrong result where the batch's log-probs are compared, with a finite loss and no error."""
    union = load_playbook(None)

    def step(i, ratio):
        return (f"{{'loss': 0.0, 'grad_norm': 0.002, 'learning_rate': 1e-06, 'reward': 0.4, 'reward_std': 0.2, "
                f"'sampling/sampling_logp_difference/mean': 0.03, 'sampling/importance_sampling_ratio/mean': {ratio}, "
                f"'entropy': 2.1, 'epoch': {i}.0}}")
    healthy = "\n".join(step(i, 0.998) for i in range(1, 4)) + "\n"
    v, _ = run(union, healthy)
    assert v["outcome"] == "pass", v["root_cause"]
    v, _ = run(union, healthy + step(4, 3.25e-07) + "\n")
    rc = v["root_cause"]
    assert (v["outcome"], rc["category"], rc["signature"], v["failed_stage"]) == \
        ("wrong_result", "weight_mapping", "trainer_rollout_is_ratio_collapsed", 6), rc


def test_a_verdict_says_how_its_failed_stage_was_found():
    """`stage_basis` says how far to trust the failed stage: placed where the error was raised (a
    traceback's frames), a stack dump of where a silent run waits, a phase a progress bar says was
    under way, the words of the last line, or assumed by the lifecycle when nothing in the log places
    it — and the digest and `harness analyze` say so when it is assumed."""
    from harness.analyze import build_digest
    union, quiet = load_playbook(None), {"ts": 1000.0, "now": 1000.0 + 7 * 86400}
    raised = ("Traceback (most recent call last):\n"
              '  File "/opt/rl/workers/actor.py", line 812, in compute_log_prob\n'
              "    out = self.model(batch)\n"
              '  File "/opt/rl/models/policy.py", line 40, in forward\n'
              "    return self.head(h)\n"
              "ZeroDivisionError: division by zero\n")
    cases = {"placed": (raised, {}, 6),
             "stack": (ENGINE + 'Thread 41 (active): "MainThread"\n    all_reduce (vllm/distributed/parallel_state.py:132)\n'
                       "    forward (vllm/model_executor/models/qwen2.py:380)\n", quiet, 2),
             "under way": (ENGINE + "Compute rewards:  40%|████      | 2/5 [00:12<00:18, 6.1s/it]\n", quiet, 5),
             "words": ("(RewardManager pid=9) scoring batch 3\n", quiet, 5),
             "lifecycle": ("ZeroDivisionError: division by zero\n", {}, 1)}
    for basis, (text, when, stage) in cases.items():
        v, an = run(union, text, **when)
        assert (v["failed_stage"], v["stage_basis"]) == (stage, basis), (basis, v["failed_stage"], v["root_cause"])
        said = build_digest(v, an).splitlines()
        assert any(f"stage_basis={basis}" in ln for ln in said) == (basis != "placed"), (basis, said[:4])
        assert any("(stage assumed)" in ln for ln in said) == (basis == "lifecycle"), (basis, said[:4])
    v, _ = run(union, ENGINE + "step:1 - actor/pg_loss:0.1 - actor/grad_norm:0.3\n")
    assert v["failed_stage"] is None and v["stage_basis"] is None, v["outcome"]


def test_a_message_a_terminal_padded_where_it_wrapped_reads_as_its_words():
    """A copy from a terminal's screen pads each row a long line wrapped into to the screen's
    width: the message's words are the same, and so is its family (tests/corpus/realworld41/4105)."""
    msg = "ValueError: The global train batch size (1 x 1) must be evenly divisible by the number of generations per prompt (4)."
    padded = msg.replace("divisible by", "divisible" + " " * 57 + "by")
    for text in (msg, padded):
        v, _ = run(load_playbook(None), traceback("", text))
        assert v["root_cause"]["category"] == "config_mismatch", v["root_cause"]


def test_a_recomputation_that_differs_from_its_forward_is_the_update_s_configuration():
    """Non-reentrant activation checkpointing recomputes the forward in the backward pass: tensors of
    another shape there (ZeRO-3's empty placeholders) fail the update, whatever the frames' words."""
    msg = ("torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint: Recomputed values for the following "
           "tensors have different metadata than during the forward pass.")
    log = ENGINE + traceback("[rank0]: ", msg) + "[rank0]: tensor at position 4:\n" \
        "[rank0]: saved metadata: {'shape': torch.Size([2048]), 'dtype': torch.bfloat16}\n" \
        "[rank0]: recomputed metadata: {'shape': torch.Size([0]), 'dtype': torch.bfloat16}\n"
    v, _ = run(load_playbook(None), log)
    assert (v["failed_stage"], v["root_cause"]["category"]) == (7, "config_mismatch"), v["root_cause"]


@pytest.mark.parametrize("message", [
    "RuntimeError: Please set micro_batch_size or set use_flash_attn=True in config.",
    "RuntimeError: No backend type associated with device type cpu",
    "RuntimeError: No backend type associated with device type npu",
])
def test_an_error_that_names_a_setting_or_a_tensor_placement_the_group_lacks_is_the_configuration_s(message):
    """An error that tells the user which setting to give it, and a collective handed a tensor on a
    device its process group has no backend for (torch c10d's getBackend), are the configuration's;
    a warning's `please set …` advice is no error."""
    v, _ = run(load_playbook(None), traceback("", message))
    assert v["root_cause"]["category"] == "config_mismatch", v["root_cause"]
    advice = ("(TaskRunner pid=3) /srv/verl/trainer/main_ppo.py:264: UserWarning: Disabled critic as "
              "algorithm.adv_estimator != gae. If it is not intended, please set critic.enable=True\n")
    assert run(load_playbook(None), ENGINE + advice)[0]["root_cause"] is None


def test_a_java_process_that_could_not_get_native_memory_is_the_host_s_memory_running_out():
    """HotSpot's fatal-error header (`# There is insufficient memory for the Java Runtime Environment
    to continue.`) from an environment's Java server is the run's first error: the host's memory,
    not the environment's own error that follows when its server is gone."""
    log = ("(WorkerDict pid=41) rollout step 3: 64 episodes\n"
           "OpenJDK 64-Bit Server VM warning: INFO: os::commit_memory(0x00007f1c, 16384, 0) failed; "
           "error='Cannot allocate memory' (errno=12)\n"
           "#\n# There is insufficient memory for the Java Runtime Environment to continue.\n"
           "# Native memory allocation (mmap) failed to map 16384 bytes for committing reserved memory.\n"
           "# An error report file with more information is saved as:\n# /srv/envs/hs_err_pid881.log\n"
           "(WorkerDict pid=41) Error during closing env\n"
           "(WorkerDict pid=41) ConnectionResetError: [Errno 104] Connection reset by peer\n")
    v, _ = run(load_playbook(None), log)
    rc = v["root_cause"]
    assert (rc["category"], rc["class"]) == ("oom", "infra"), rc
    assert "Java Runtime Environment" in rc["text"], rc["text"]


def test_verl_s_missing_raw_prompt_is_the_flag_that_adds_it():
    """verl's dataset hands a record's chat messages on as `raw_prompt` only under
    data.return_raw_chat: a KeyError on it is that setting, not the data; another key's is the data."""
    def log(key):
        return ("(TaskRunner pid=7) Traceback (most recent call last):\n"
                '(TaskRunner pid=7)   File "/srv/verl/verl/workers/fsdp_workers.py", line 1690, in compute_rm_score\n'
                "(TaskRunner pid=7)     rm_data = self._switch_chat_template(data)\n"
                '(TaskRunner pid=7)   File "/srv/verl/verl/workers/fsdp_workers.py", line 1602, in _switch_chat_template\n'
                f"(TaskRunner pid=7)     chat = data.non_tensor_batch['{key}'][i]\n"
                f"(TaskRunner pid=7) KeyError: '{key}'\n")
    verl = load_playbook("verl")
    rc = run(verl, log("raw_prompt"))[0]["root_cause"]
    assert rc["category"] == "config_mismatch" and "return_raw_chat" in rc["hint"], rc
    assert run(verl, log("raw_prompt_text"))[0]["root_cause"]["category"] == "data_format"


def test_a_queue_get_that_waited_out_its_timeout_is_a_timeout():
    """CPython's queue.Queue.get and multiprocessing's raise `Empty` once their timeout passed with
    nothing put (printed `_queue.Empty`, its C module's name): the workers that should have answered
    never did — a timeout, whatever the handler raised after it; an `Empty…` word elsewhere is not."""
    log = ("rollout: 12/64 prompts done\n"
           "Traceback (most recent call last):\n"
           '  File "/srv/rl/rollout_pool.py", line 88, in collect\n'
           "    kind, payload = results.get(timeout=600)\n"
           '  File "/usr/lib/python3.11/multiprocessing/queues.py", line 114, in get\n'
           "    raise Empty\n"
           "_queue.Empty\n\n"
           "During handling of the above exception, another exception occurred:\n\n"
           "Traceback (most recent call last):\n"
           '  File "/srv/rl/rollout_pool.py", line 92, in collect\n'
           '    raise RuntimeError("a rollout worker returned nothing")\n'
           "RuntimeError: a rollout worker returned nothing\n")
    rc = run(load_playbook(None), log)[0]["root_cause"]
    assert (rc["category"], rc["text"]) == ("timeout", "_queue.Empty"), rc
    other = run(load_playbook(None), traceback("", "ValueError: EmptyDatasetError: no rows"))[0]["root_cause"]
    assert other["category"] != "timeout", other


def test_a_traceback_cut_short_after_the_allocator_s_oom_warning_failed_there():
    """c10's caching allocator warns `memory allocation failed with OOM …` and retries; alone a warning
    (no finding), but a traceback that stops right after it, its exception lost, is that allocation's
    failure: memory, the first warning of the run its text."""
    warn = ("[W1204 03:10:{s}.1 CUDACachingAllocator.cpp:3934] memory allocation failed with OOM on device 0 "
            "while trying to allocate 2147483648 bytes (free: {free}, total: 85899345920).\n")
    head = "step 2: loss=0.41 grad_norm=1.2\n" + warn.format(s="01", free="1048576") + warn.format(s="02", free="524288")
    cut = ("\n...\n\n"
           '  File "/srv/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 2140, in softmax\n'
           "    ret = input.softmax(dim)\n")
    v, _ = run(load_playbook(None), head + cut)
    rc = v["root_cause"]
    assert rc["category"] == "oom" and "free: 1048576" in rc["text"], rc
    alone = run(load_playbook(None), head + "step 3: loss=0.39 grad_norm=1.1\n")[0]
    assert alone["root_cause"] is None, alone["root_cause"]


def test_image_tokens_that_do_not_match_the_image_features_are_the_sample_s_shape():
    """transformers' vision-language models count a prompt's image placeholders against the
    features of its pixels: when they disagree the sample's prompt and images do — the data's
    shape; a batch's tensors that disagree in general stay `other`."""
    exc = "ValueError: Image features and image tokens do not match: tokens: 0, features 324"
    assert run(load_playbook(None), traceback("[rank1]: ", exc))[0]["root_cause"]["category"] == "data_format"
    llava = ("ValueError: The input provided to the model are wrong. The number of image tokens is 0 while the "
             "number of image given to the model is 2. This prevents correct indexing and breaks batch generation.")
    assert run(load_playbook(None), traceback("[rank1]: ", llava))[0]["root_cause"]["category"] == "data_format"
    shapes = "RuntimeError: The size of tensor a (64) must match the size of tensor b (361) at non-singleton dimension 1"
    assert run(load_playbook(None), traceback("[rank1]: ", shapes))[0]["root_cause"]["category"] == "other"


def test_an_error_no_family_names_raised_inside_a_collective_is_the_communication_s():
    """A message that says nothing (`cancelled`) raised in a collective's call — torch's all_reduce,
    an engine's shared-memory broadcast — is the communication's; raised elsewhere, `other`."""
    def log(inner):
        return ("Traceback (most recent call last):\n"
                '  File "/srv/engine/core.py", line 210, in step\n'
                "    inputs = self.queue.dequeue()\n"
                f'  File "/srv/engine/comm/ring.py", line 88, in {inner}\n'
                '    raise RuntimeError("cancelled")\n'
                "RuntimeError: cancelled\n")
    assert run(load_playbook(None), log("acquire_read"))[0]["root_cause"]["category"] == "distributed_comm_hang"
    assert run(load_playbook(None), log("all_reduce"))[0]["root_cause"]["category"] == "distributed_comm_hang"
    assert run(load_playbook(None), log("read_chunk"))[0]["root_cause"]["category"] == "other"


def test_what_fails_after_verl_s_final_validation_is_the_teardown_s():
    """verl prints `Final validation metrics: …` once fit's last step, checkpoint and validation are
    done, and returns: a worker Ray reports dead after it (processes torn down at exit) leaves the
    run a pass, also where its step lines were not read (a terminal wrapped them); before it, the
    same report ends the run."""
    verl = load_playbook("verl")
    died = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. "
            "To troubleshoot the problem, check the logs for the dead worker. RayTask ID: ffff Worker ID: 2a\n")
    wrapped = "(TaskRunner pid=7) timing_s/update_actor:2.68 - timing_s/testing:21.2 - timing_s/step:30.0 - perf/thr\noughput:619.4\n"
    final = "(TaskRunner pid=7) (\"Final validation metrics: {'val-core/gsm8k/reward/mean@1': \"\n(TaskRunner pid=7)  \"0.61}\")\n"
    v, _ = run(verl, wrapped + final + died)
    assert (v["outcome"], v["root_cause"]) == ("pass", None), v["root_cause"]
    v, _ = run(verl, wrapped + died)
    assert v["outcome"] == "crash", v["outcome"]


def test_torch_s_internal_assertion_in_its_cuda_layer_is_the_device_runtime_s():
    """torch's `INTERNAL ASSERT FAILED at "<file>"` names the file: one under c10/cuda (the caching
    allocator) is the device runtime's state; one elsewhere says nothing of the device."""
    def exc(path):
        return f'RuntimeError: !handles_.at(i) INTERNAL ASSERT FAILED at "{path}":393, please report a bug to PyTorch.'
    cuda = run(load_playbook(None), traceback("[rank0]: ", exc("../c10/cuda/CUDACachingAllocator.cpp")))[0]
    assert cuda["root_cause"]["category"] == "device_runtime_error", cuda["root_cause"]
    jit = run(load_playbook(None), traceback("[rank0]: ", exc("../torch/csrc/jit/ir/alias_analysis.cpp")))[0]
    assert jit["root_cause"]["category"] != "device_runtime_error", jit["root_cause"]


def test_a_run_silent_after_its_api_client_could_not_connect_says_the_network():
    """The OpenAI client's APIConnectionError says `Connection error.` when the endpoint cannot be
    reached; a run that printed it last (an LLM judge's call) and went silent: the network's."""
    log = ("step 4: reward=0.31 loss=0.12\n" "Error in judge scoring: Connection error.\n")
    v, _ = run(load_playbook(None), log, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["root_cause"]["category"]) == ("hang", "network_proxy"), v["root_cause"]


def test_the_watchdog_s_own_abort_is_the_watchdog_s_report_not_a_new_cause():
    """ProcessGroupNCCL's watchdog thread throws DistBackendError with its timeout's message and
    libstdc++ aborts naming the type: the `what():` says it is the same timeout — the run hangs on
    the collective, its first watchdog line the root; a DistBackendError whose message is NCCL's own
    error stays a cause."""
    dog = ("[rank{r}]:[E ProcessGroupNCCL.cpp:523] [Rank {r}] Watchdog caught collective operation timeout: "
           "WorkNCCL(SeqNum=9563, OpType=_ALLGATHER_BASE, NumelIn=4096, NumelOut=65536, Timeout(ms)=1800000) "
           "ran for 1800120 milliseconds before timing out.\n")
    abort = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
             "  what():  [Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=9563, OpType=_ALLGATHER_BASE) ran for 1800120 milliseconds\n"
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:525 (most recent call first):\n"
             "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x57 (0x7f in libc10.so)\n")
    v, _ = run(load_playbook(None), dog.format(r=6) + dog.format(r=4) + abort)
    assert v["outcome"] == "hang" and "[Rank 6] Watchdog caught" in v["root_cause"]["text"], v["root_cause"]
    nccl = "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error"
    rc = run(load_playbook(None), traceback("", nccl))[0]["root_cause"]
    assert rc["role"] == "cause" and rc["category"] == "distributed_comm_hang", rc


def test_a_watchdog_on_a_gradients_reduction_far_into_training_is_the_update_s():
    """A collective's watchdog naming an ALLREDUCE (DDP's gradient buckets) or a reduce-scatter
    (FSDP's) thousands of collectives into its group's run: the update's, unless a phase under way
    says otherwise; the same op among a group's first collectives (set-up's barriers) and a broadcast
    stay unplaced."""
    def dog(seq, op):
        return (f"[rank3]:[E ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800087 "
                f"milliseconds before timing out.\n")
    assert run(load_playbook(None), dog(45390, "ALLREDUCE"))[0]["failed_stage"] == 7
    assert run(load_playbook(None), dog(88211, "_REDUCE_SCATTER_BASE"))[0]["failed_stage"] == 7
    assert run(load_playbook(None), dog(12, "ALLREDUCE"))[0]["failed_stage"] != 7
    assert run(load_playbook(None), dog(45390, "BROADCAST"))[0]["failed_stage"] != 7
    # a phase a marker says is under way says more than the op's kind: slime's weight sync begun
    synced = run(load_playbook(None), "step 12: loss=0.3\nTimer update_weights start\n" + dog(45390, "ALLREDUCE"))[0]
    assert (synced["failed_stage"], synced["stage_basis"]) == (2, "under way"), synced["stage_basis"]


def test_the_call_the_driver_waited_in_places_a_worker_that_vanished():
    """The raylet reports a dead worker (nothing of what it was doing); the driver's RayTaskError
    after it carries the call that waited on it — `update_actor` under `fit`: the update, whatever
    the worker printed last (an entropy's shape, a training-data word) and whatever phase a bar open
    since the first step says is under way."""
    log = ("(TaskRunner pid=310306) Training Progress:   0%|          | 0/100 [00:00<?, ?it/s]\n"
           "(WorkerDict pid=320330) entropy_loss shape: torch.Size([])\n"
           "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
           "troubleshoot the problem, check the logs for the dead worker. Worker exit type: SYSTEM_ERROR Worker "
           "exit detail: Worker exits unexpectedly. Worker exits with an exit code None.\n"
           "Traceback (most recent call last):\n"
           '  File "/srv/rl/main.py", line 40, in main\n'
           "    ray.get(runner.run.remote(cfg))\n"
           "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunner.run() (pid=310306, ip=127.0.0.1)\n"
           '  File "/srv/rl/trainer.py", line 913, in fit\n'
           "    actor_output = self.actor_rollout_wg.update_actor(batch)\n"
           '  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 2782, in get\n'
           "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)\n"
           "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n")
    v, _ = run(load_playbook(None), log)
    assert v["failed_stage"] == 7 and "A worker died" in v["root_cause"]["text"], (v["failed_stage"], v["root_cause"]["text"])


def test_a_report_of_name_value_items_names_no_phase_under_way():
    """A loop without a logger reports `name value` items between commas (mlx-lm's `Iter 50: Train
    loss 0.045, Chosen reward -0.169, …`, nanoGPT's `iter 1: loss 0.0000, time 103.2ms`): a run
    silent after it is not read as stuck in the update its `loss` would name; a sentence with a
    number in it is no report."""
    from harness.analyze.metrics import reports

    assert reports("Iter 50: Train loss 0.045, Chosen reward -0.169, Accuracy 0.800, It/sec 0.678")
    assert reports("iter 1: loss 0.0000 (main 0.0000, critic 0.0000), time 103634.20ms")
    assert not reports("Generating sequences for batch 3, step 2")
    log = "Iter 40: Train loss 0.051, Chosen reward -0.170, Rejected reward -0.241, Accuracy 0.790\n"
    v, _ = run(load_playbook(None), log, ts=1000.0, now=1000.0 + 7200)
    assert v["outcome"] == "hang" and v["failed_stage"] != 7, (v["failed_stage"], v["root_cause"])


def test_a_loss_printed_alone_as_nan_is_a_wrong_result():
    """A summary printed a metric a line (a W&B run's summary copied key by key, a loop's
    `print(f"loss: {loss}")`): `actor/pg_loss: NaN` says the update's loss is not a number; a
    finite value alone says nothing."""
    log = "step 118 done\nactor/entropy: 0.41\nactor/pg_loss: NaN\nactor/lr: 1e-6\n"
    v, _ = run(load_playbook(None), log)
    assert (v["outcome"], v["failed_stage"]) == ("wrong_result", 7), (v["outcome"], v["failed_stage"])
    fine, _ = run(load_playbook(None), "step 118 done\nactor/pg_loss: 0.12\n")
    assert fine["outcome"] != "wrong_result", fine["outcome"]


def test_a_driver_waiting_in_ray_get_does_not_place_the_failure_in_its_loop():
    """A driver's `train` that only waits on its actors (`ray.get(refs)`, the frames inside it Ray's
    own), its traceback cut there: what failed ran in the actors, not in the loop's own code — a
    training loop's name does not make it the update's data. A call on that line names the remote
    work when it does (`ray.get(actor.async_train(…))`), and a loop whose own code failed (a frame of
    a library inside it) stays the loop's."""
    head = ("Traceback (most recent call last):\n"
            '  File "/srv/rl/cli/train_ppo.py", line 390, in <module>\n'
            "    train(args)\n"
            '  File "/srv/rl/cli/train_ppo.py", line 171, in train\n')
    ray = ('  File "/venv/lib/python3.11/site-packages/ray/_private/auto_init_hook.py", line 21, in auto_init_wrapper\n'
           "    return fn(*args, **kwargs)\n"
           '  File "/venv/lib/python3.11/site-packages/ray/_private/client_mode_hook.py", line 103, in wrapper\n'
           "    return func(*args, **kwargs)\n")
    waiting, _ = run(load_playbook(None), head + "    ray.get(refs)\n" + ray)
    assert waiting["failed_stage"] != 6, (waiting["failed_stage"], waiting["stage_basis"])
    named, _ = run(load_playbook(None), head + "    ray.get(actor_group.async_train(rollout_id))\n" + ray)
    assert named["stage_basis"] == "placed" and named["failed_stage"] == 6, (named["failed_stage"], named["stage_basis"])
    own, _ = run(load_playbook(None), head + "    batch = torch.cat(parts)\n"
                 "RuntimeError: Sizes of tensors must match except in dimension 0. Expected size 8 but got size 7\n")
    assert own["failed_stage"] == 6, own["failed_stage"]


def test_an_attribute_missing_on_the_way_to_a_call_is_that_calls_failure():
    """torch's nn.Module.__getattr__ raises before the call its caller's line makes on what it looks
    up (`self.actor_critic.module.generate(`): that call is the work the run was starting."""
    log = ("Traceback (most recent call last):\n"
           '  File "/srv/rlhf/ppo.py", line 614, in train\n'
           "    ) = self.actor_critic.module.generate(\n"
           '  File "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1614, in __getattr__\n'
           "    raise AttributeError(\"'{}' object has no attribute '{}'\".format(\n"
           "AttributeError: 'ActorCritic' object has no attribute 'module'. Did you mean: 'modules'?\n")
    v, _ = run(load_playbook(None), log)
    assert (v["failed_stage"], v["stage_basis"]) == (2, "placed"), (v["failed_stage"], v["stage_basis"])


def test_a_device_assertion_under_a_frame_is_no_source_line():
    """A paste that begins on a frame, then the kernel's assertions (`file.cu:N: fn: … Assertion …
    failed.`): the first assertion is not the frame's statement — the root cause is the first one."""
    assert_line = ("../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [3,0,0], "
                   "thread: [{}, 0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n")
    log = ('  File "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1518, in _wrapped_call_impl\n'
           + "".join(assert_line.format(t) for t in (40, 41, 42)))
    v, _ = run(load_playbook(None), log)
    assert v["root_cause"]["line_no"] == 2, v["root_cause"]


@pytest.mark.parametrize("line, category", [
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Connection closed by peer [10.0.0.7]:41236",
     "distributed_comm_hang"),
    # said at an error's level just before a traceback cut short (the thread that died of it)
    ("[E1203 04:11:09.1234 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
     "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error\n"
     "Exception in thread Thread-6 (_run_queue):\nTraceback (most recent call last):\n"
     '  File "/usr/lib/python3.10/threading.py", line 1016, in _bootstrap_inner\n'
     "    self.run()\n"
     '  File "/srv/env/worker.py", line 88, in _run_queue\n'
     "    self._group = dist.new_group(backend=\"gloo\")", "distributed_comm_hang"),
    ("ValueError: signal only works in main thread of the main interpreter", "reward_parsing"),
])
def test_error_families_of_gloo_and_signal_timeouts(line, category):
    v, _ = run(load_playbook(None), line + "\n")
    assert v["root_cause"]["category"] == category, v["root_cause"]


def test_a_fatal_signal_from_abseils_handler_is_a_crash():
    """Ray's processes install absl's failure handler: `*** SIGBUS received at time=…` (as SIGSEGV,
    SIGILL, SIGFPE, SIGABRT) is a process dying of its own fault; SIGTERM is a request to stop."""
    log = ("(raylet) *** {} received at time=1749878572 on cpu 12 ***\n"
           "(raylet) PC: @     0x7f65bf115c61  (unknown)  (unknown)\n"
           "(raylet)     @     0x56423c3996c4       1200  ray::ObjectManager::ReceiveObjectChunk()\n")
    v, _ = run(load_playbook(None), log.format("SIGBUS"), ts=1000.0, now=1000.0 + 7200)
    assert v["outcome"] == "crash" and "SIGBUS" in v["root_cause"]["text"], (v["outcome"], v["root_cause"])
    term, _ = run(load_playbook(None), log.format("SIGTERM"), ts=1000.0, now=1000.0 + 7200)
    assert term["outcome"] != "crash", term["outcome"]


def test_log_probs_of_exactly_zero_are_a_wrong_result_of_the_training_data():
    """A sequence's log-probability sums one negative term per scored token: DPO's logps at 0.0 (its
    loss stuck at ln 2) scored no token. Healthy ones are far below zero."""
    row = ("{{'loss': {loss}, 'learning_rate': 5e-07, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, "
           "'logps/rejected': {lp}, 'logps/chosen': {lp}, 'epoch': 0.4}}\n")
    v, _ = run(load_playbook(None), row.format(loss=0.6931, lp=0.0))
    assert (v["outcome"], v["failed_stage"]) == ("wrong_result", 6), (v["outcome"], v["failed_stage"])
    fine, _ = run(load_playbook(None), row.format(loss=0.52, lp=-143.2))
    assert fine["outcome"] == "pass", fine["outcome"]


def test_the_watchdogs_first_line_of_a_timeout_is_the_root_cause():
    """torch's watchdog says `Timeout at NCCL work: N, last enqueued …` before `Some NCCL operations
    have failed or timed out` and the exception it terminates with: the first of them is the root."""
    log = ("[rank2]:[E1203 10:00:01.1 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 2] Timeout at "
           "NCCL work: 57, last enqueued NCCL work: 57, last completed NCCL work: 56.\n"
           "[rank2]:[E1203 10:00:01.1 ProcessGroupNCCL.cpp:630] [Rank 2] Some NCCL operations have failed or timed "
           "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
           "corrupted/incomplete data.\n")
    v, _ = run(load_playbook(None), log, ts=1000.0, now=1000.0 + 7200)
    assert v["root_cause"]["line_no"] == 1 and v["root_cause"]["category"] == "distributed_comm_hang", v["root_cause"]


def test_a_loggers_error_after_a_warning_is_no_part_of_the_warnings_message():
    """A warning's message may run on over a few lines; a logger's ERROR record (or a traceback's
    head) after it is a record of its own: the run stopped on that error, not on the warning."""
    log = ("<string>:15: RuntimeWarning: divide by zero encountered in scalar divide\n"
           "[RemoteInfEngine Rank 0] ERROR: Consumer thread failed\n"
           "Traceback (most recent call last):\n")
    v, _ = run(load_playbook(None), log, ts=1000.0, now=1000.0 + 7200)
    assert v["root_cause"]["text"] == "[RemoteInfEngine Rank 0] ERROR: Consumer thread failed", v["root_cause"]


def test_logits_not_a_number_are_a_wrong_result_of_the_training_data():
    """TRL's preference trainers log the batch's mean logits beside its log-probs: NaN there, with
    the loss finite, broke in the forward that builds the training data."""
    row = ("{{'loss': 0.6931, 'grad_norm': 2.29, 'learning_rate': 1e-05, 'rewards/chosen': -0.05, "
           "'logps/chosen': -230.1, 'logps/rejected': -241.7, 'logits/chosen': {lg}, 'logits/rejected': {lg}, 'epoch': 0.1}}\n")
    v, _ = run(load_playbook(None), row.format(lg="nan"))
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("wrong_result", 6, "precision_dtype"), v
    fine, _ = run(load_playbook(None), row.format(lg="-1.36"))
    assert fine["outcome"] == "pass", fine["outcome"]


def test_rocms_memory_access_fault_is_the_device_runtimes():
    log = ("step:3 - actor/pg_loss:0.01\n"
           "Memory access fault by GPU node-4 (Agent handle: 0xb26d7b0) on address 0x7f2900ffc000. Reason: Unknown\n"
           "Aborted (core dumped)\n")
    v, _ = run(load_playbook(None), log)
    assert (v["outcome"], v["root_cause"]["category"], v["root_cause"]["line_no"]) == ("crash", "device_runtime_error", 2), v["root_cause"]


def test_an_out_of_memory_in_the_rollouts_wake_up_is_placed_there():
    """torch_memory_saver's `resume` (the rollout engine taking its memory back after the update)
    running out of memory: the category is the memory's, the stage that of the memory hand-over."""
    log = ("[torch_memory_saver.cpp] cuMemCreate CUDA_ERROR_OUT_OF_MEMORY (may not be an issue e.g. torch "
           "allocator will free cache and retry)\n"
           "[torch_memory_saver.cpp] cudaError error: 2 (out of memory)  file=csrc/core.cpp func=resume line=172\n")
    v, _ = run(load_playbook(None), log)
    assert (v["failed_stage"], v["root_cause"]["category"]) == (2, "oom"), (v["failed_stage"], v["root_cause"])


def test_a_run_silent_after_trying_again_waits_on_what_it_cannot_reach():
    """`… trying again in 5s` is a retry as `Retrying…` is: a run silent after it waits on a server
    it cannot reach."""
    log = ("INFO:swarm.trainer:bee:Finished training round: 95 stage: 2\n"
           "INFO:swarm.stage_utils:bee:Can't retrieve round 95 stage 2 rewards; trying again in 5s\n")
    v, _ = run(load_playbook(None), log, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["root_cause"]["category"]) == ("hang", "network_proxy"), (v["outcome"], v["root_cause"])


def test_a_run_silent_in_a_weight_sync_waits_in_a_collective():
    """A trainer pushing its weights into a rollout server broadcasts them over NCCL: a run silent
    after the requests of the sync waits in that broadcast; silent in a generation, nothing says so."""
    p = load_playbook(None)
    push = 'INFO:     127.0.0.1:33242 - "POST /update_named_param/ HTTP/1.1" 200 OK\n'
    v, _ = run(p, ENGINE + "Train:   0%|          | 0/15 [00:00<?, ?it/s]\n" + push * 3, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("hang", 2, "distributed_comm_hang"), v["root_cause"]
    v, _ = run(p, ENGINE + "Processed prompts:  19%|█▉        | 24/128 [00:19<00:39,  2.65it/s]\n", ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["category"]) == ("hang", 2, "other"), v["root_cause"]


def test_a_key_missing_from_a_registry_is_the_configurations_and_a_records_is_the_datas():
    """The statement that raised a KeyError says what was looked up: a component by the name a
    setting gave (`cls._registry[name]`, `LOSS_MAPPING[loss_type]`) or a record's field."""
    p = load_playbook(None)

    def raised(statement, key):
        return ENGINE + ('Traceback (most recent call last):\n  File "/x/train.py", line 9, in main\n    build()\n'
                         f'  File "/x/registry.py", line 140, in get\n    {statement}\nKeyError: {key}\n')
    for statement in ("reward_cls = cls._registry[reward_fn_id]", "return LOSS_MAPPING[loss_type]['loss_func']"):
        v, _ = run(p, raised(statement, "'summarization_with_hint'"))
        assert v["root_cause"]["category"] == "config_mismatch", (statement, v["root_cause"])
    v, _ = run(p, raised("answer = sample['solution']", "'solution'"))
    assert v["root_cause"]["category"] == "data_format", v["root_cause"]


def test_a_worker_that_died_in_the_set_up_call_the_line_before_names_failed_at_start_up():
    """Ray's report of a dead worker says nothing of the phase; the line before it naming the set-up
    call that was running (`… while executing init cache …`) places it; with nothing before it, the
    stage stays unknown."""
    p = load_playbook(None)
    died = ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
            "troubleshoot the problem, check the logs for the dead worker.\n")
    v, _ = run(p, "(WorkerDict pid=3) before init cache memory allocated: 5.97GB, reserved: 6.08GB\n" + died)
    assert v["failed_stage"] == 1, (v["failed_stage"], v["root_cause"])
    v, _ = run(p, died)
    assert v["failed_stage"] is None, (v["failed_stage"], v["root_cause"])


def test_a_dataset_being_prepared_is_the_task_dispatchs_work():
    """Preparing the dataset the tasks are drawn from (a `datasets` map's bar, a loader's
    `_get_preprocessed_dataset`) is the task dispatch's work."""
    p = load_playbook(None)
    bar = "Running tokenizer on dataset (num_proc=16):   0%|          | 0/60000 [00:00<?, ? examples/s]\n"
    v, _ = run(p, bar, ts=1000.0, now=1000.0 + 7200)
    assert (v["outcome"], v["failed_stage"]) == ("hang", 3), (v["outcome"], v["failed_stage"], v["root_cause"])
    v, _ = run(p, ENGINE + traceback("", "KeyError: 'problem'", funcs=("main", "_get_preprocessed_dataset")))
    assert v["failed_stage"] == 3, (v["failed_stage"], v["root_cause"])


def test_a_debuggers_exception_view_is_read_as_the_traceback_it_shows():
    """VS Code's debugger shows `Exception has occurred: Type` (`发生异常: Type` in a Chinese locale),
    the message, then the frames innermost first with their statements: the exception is the
    type with its message, its call path the frames turned over; a chained exception line inside
    the message is the exception it carries."""
    p = load_playbook(None)
    for head in ("Exception has occurred: ValueError       (note: full exception trace is shown but execution is "
                 "paused at: _run_module_as_main)", "发生异常: ValueError"):
        log = (f"{head}\nscores must be one number per sample\n"
               '  File "/srv/rl/reward.py", line 12, in compute_score\n    return float(judge(answer))\n'
               '  File "/srv/rl/trainer.py", line 80, in fit\n    scores = compute_score(batch)\n'
               '  File "/srv/rl/train.py", line 9, in <module>\n    trainer.fit()\n')
        v, _ = run(p, ENGINE + log)
        assert v["root_cause"]["text"] == "ValueError: scores must be one number per sample", v["root_cause"]
        assert v["failed_stage"] == 5, (v["failed_stage"], v["root_cause"])
    v, _ = run(p, "Exception has occurred: Unsupported\ngenerator\nKeyError: <code object chunk at 0x7f86a0>\n")
    assert v["root_cause"]["text"] == "KeyError: <code object chunk at 0x7f86a0>", v["root_cause"]


def test_right_padding_under_flash_attention_is_the_tokenizers_setting_whatever_phase_ran_it():
    """transformers refuses a right-padded batch under FlashAttention-2 in its `batched generation`
    words, in whichever forward ran it (the log-probs' here): a setting, and the frames place it."""
    msg = ("ValueError: You are attempting to perform batched generation with padding_side='right' this may lead to "
           "unexpected behaviour for Flash Attention version of Qwen2VL. Make sure to  call `tokenizer.padding_side  "
           "= 'left'` before tokenizing the input.")
    v, _ = run(load_playbook(None), ENGINE + traceback("", msg, funcs=("main", "compute_loss", "_get_per_token_logps")))
    assert (v["failed_stage"], v["root_cause"]["category"]) == (6, "config_mismatch"), (v["failed_stage"], v["root_cause"])


def test_rotary_positions_longer_than_the_mask_are_a_prompt_cut_at_its_length_limit():
    """Qwen2-VL-style models write three rows of rotary positions where the attention mask is set:
    more positions than masked tokens is a prompt cut at its maximum length through its image
    placeholders, found as the batch is assembled for its log-probs."""
    msg = ("RuntimeError: shape mismatch: value tensor of shape [3, 19963] cannot be broadcast to indexing result "
           "of shape [3, 16467]")
    v, _ = run(load_playbook(None), ENGINE + msg + "\n")
    assert (v["failed_stage"], v["root_cause"]["category"]) == (6, "length_limit"), (v["failed_stage"], v["root_cause"])
    other = "RuntimeError: shape mismatch: value tensor of shape [8] cannot be broadcast to indexing result of shape [4]"
    v, _ = run(load_playbook(None), ENGINE + other + "\n")
    assert v["root_cause"]["category"] != "length_limit", v["root_cause"]


def test_the_hip_runtimes_errors_are_the_device_runtimes_as_cudas_are():
    """torch's ROCm build reports the HIP runtime's errors in the words its CUDA build uses for CUDA's."""
    v, _ = run(load_playbook(None), ENGINE + traceback("", "RuntimeError: HIP error: invalid device function",
                                                       funcs=("main", "init_model")))
    assert v["root_cause"]["category"] == "device_runtime_error", v["root_cause"]


def test_a_debuggers_exception_view_without_frames_ends_after_its_message():
    """A view copied without its frames: its message is the exception's, and the lines a run printed
    after it are read as the run's, not as more of the message."""
    log = ("Exception has occurred: RuntimeError\nthe reward server refused the batch\n"
           + "".join(f"step:{i} - actor/pg_loss:0.01 - critic/score/mean:0.5\n" for i in range(3, 13))
           + "Traceback (most recent call last):\n  File \"/x/main.py\", line 3, in fit\n    step()\n"
           "ValueError: late failure\n")
    v, an = run(load_playbook(None), log)
    texts = sorted(f.text for f in an.findings.values())
    assert texts == ["RuntimeError: the reward server refused the batch", "ValueError: late failure"], texts
    assert v["last_stage_passed"] >= 1, v["stages"]  # the steps after the view were read as steps


def test_where_a_line_was_printed_from_is_no_value_it_reports():
    """`file.py:50:` in a warning's or a logger's head is a place, not a `key: number` pair: the
    lines before an error are still read for the work they name (set-up here, before any stage)."""
    from harness.analyze.metrics import measures
    assert not measures("/srv/app/utils/shard.py:50: UserWarning: falling back to a slow kernel")
    assert not measures("[INFO|loader_utils.py:2513] 2024-01-02 10:26:34,951 >> reading the index")
    assert measures("epoch 3 | loss: 0.25")
    log = ("(run_func pid=9) Engine init INFO: Initializing the accelerator platform.\n"
           "(run_func pid=9) /srv/app/utils/shard.py:50: UserWarning: falling back to a slow kernel\n"
           "(run_func pid=9)   warnings.warn(\n"
           "(raylet) [2024-01-02 10:26:40,121 E 77 77] (raylet) node_manager.cc:2929: 3 Workers (tasks / actors) "
           "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: ab12)\n")
    v, _ = run(load_playbook(None), log)
    assert v["root_cause"]["category"] == "oom", v["root_cause"]
    assert v["failed_stage"] == 1, (v["failed_stage"], v["stage_basis"])


def test_a_load_bar_still_counting_before_any_stage_is_the_start_up_under_way():
    """A bar that names loading, cut by a kill before any stage passed, is the model's set-up; once a
    stage passed, a bar of loading names nothing (a weight sync loads too)."""
    kill = ("Loading model shards:  57%|█████▋    | 4/7 [01:02<00:40, 13.3s/it]\n"
            "WARNING:launcher:Sending process 11 closing signal SIGTERM\n"
            "ERROR:launcher:failed (exitcode: -9) local_rank: 1 (pid: 12) of binary: /usr/bin/python\n")
    v, _ = run(load_playbook(None), kill)
    assert (v["failed_stage"], v["stage_basis"]) == (1, "under way"), v["root_cause"]
    from harness.analyze.verdict import bar_stage
    pb = load_playbook(None)
    assert bar_stage(pb, kill.splitlines()[:1], first=True)[0] == 1
    assert bar_stage(pb, kill.splitlines()[:1]) is None


def test_a_model_moved_onto_its_device_is_placed_as_it_is_built_unless_a_phase_names_the_call():
    """torch's Module._apply under `.cuda()` with no stage's work on the path is set-up; the same
    frames under a log-prob computation are that computation's."""
    apply = ('  File "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", line 688, in cuda\n'
             "    return self._apply(lambda t: t.cuda(device))\n"
             '  File "/venv/lib/python3.10/site-packages/torch/nn/modules/module.py", line 601, in _apply\n'
             "    param_applied = fn(param)\n")
    head = 'Traceback (most recent call last):\n  File "/x/run.py", line 9, in main\n'
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    pb = load_playbook(None)
    v, _ = run(pb, head + "    policy = PolicyNet().cuda()\n" + apply + oom)
    assert v["failed_stage"] == 1, v["root_cause"]
    v, _ = run(pb, head + "    old = self.compute_log_prob(batch)\n"
               '  File "/x/worker.py", line 30, in compute_log_prob\n    self.model.cuda()\n' + apply + oom)
    assert v["failed_stage"] == 6, v["root_cause"]


def test_a_device_side_assert_in_a_lambda_kernel_is_the_device_runtimes():
    """CUDA's assert names a lambda kernel `operator()`; with no family reading its check as the
    data's, it is a device runtime error, and the run that printed only it crashed."""
    line = ("/build/aten/native/cuda/SomeKernel.cu:93: operator(): block: [0,0,0], thread: [3,0,0] "
            "Assertion `idx < size && \"index out of bounds\"` failed.\n")
    v, _ = run(load_playbook(None), line * 3)
    assert v["outcome"] == "crash" and v["root_cause"]["category"] == "device_runtime_error", v["root_cause"]


def test_a_device_index_past_the_visible_devices_is_the_settings():
    """`invalid device ordinal` and torch's `device < num_gpus` check: a GPU number the process does not see."""
    pb = load_playbook(None)
    for exc in ("RuntimeError: CUDA error: invalid device ordinal",
                'RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at "/b/aten/cuda/Ctx.cpp":49'):
        v, _ = run(pb, ENGINE + traceback("", exc, funcs=("main", "start_worker")))
        assert v["root_cause"]["category"] == "config_mismatch", (exc, v["root_cause"])


def test_a_cuda_errors_backtrace_head_alone_says_the_run_crashed_on_the_device():
    """The message above c10's backtrace cut away: its head still says a CUDA call failed."""
    log = ("(Worker pid=5) Exception raised from c10_cuda_check_implementation at /b/c10/cuda/CUDAException.cpp:43 "
           "(most recent call first):\n"
           "(Worker pid=5) frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f in /l/libc10.so)\n"
           "(Worker pid=5) frame #1: c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() + 0xa0 (0x7f in /l/libtorch_cuda.so)\n")
    v, _ = run(load_playbook(None), log, now=10 ** 10)
    assert v["outcome"] == "crash", v["root_cause"]
    assert v["root_cause"]["category"] == "device_runtime_error", v["root_cause"]


def test_a_kernels_fault_nothing_places_has_no_assumed_stage():
    """A kernel faults where it runs, in any phase: alone, its stage is unknown, not start-up;
    when the log says which phase was under way (the engine's start-up here), that phase."""
    pb = load_playbook(None)
    for exc in ("RuntimeError: CUDA error: misaligned address",
                "Memory access fault by GPU node-2 (Agent handle: 0x5c1) on address 0x7f00. Reason: Page not present."):
        v, _ = run(pb, exc + "\n")
        assert v["root_cause"]["category"] == "device_runtime_error" and v["failed_stage"] is None, (exc, v["root_cause"])
        v, _ = run(pb, ENGINE + exc + "\n")
        assert (v["failed_stage"], v["stage_basis"]) == (1, "under way"), (exc, v["failed_stage"])
    v, _ = run(pb, "RuntimeError: CUDA error: operation not permitted\n")  # a call refused, not a kernel's fault
    assert v["failed_stage"] == 1, v["root_cause"]
