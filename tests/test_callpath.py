"""The stage read from a failure's call path, with the shipped playbook, on tracebacks written for
the test (invented names: no framework's own log)."""

import io
import logging
import subprocess
import sys

import pytest

from harness.analyze import Analyzer
from harness.analyze.callpath import calls
from harness.playbook import load_playbook

pytestmark = pytest.mark.xdist_group("test_callpath")

RAY_GET = ['  File "/venv/lib/python3.11/site-packages/ray/_private/worker.py", line 2772, in get',
           "    values, debugger_breakpoint = worker.get_objects(object_refs, timeout=timeout)"]


@pytest.fixture(scope="module")
def pb():
    return load_playbook("base")


def analyzed(pb, lines):
    """The verdict on a test log, and the analyzer that read it (its findings)."""
    a = Analyzer(pb)
    a.feed(("\n".join(lines) + "\n").encode())
    a.finish()
    return a.verdict(), a


def verdict_of(pb, lines):
    return analyzed(pb, lines)[0]


def stage_of(pb, lines):
    v = verdict_of(pb, lines)
    return v["failed_stage"], (v["root_cause"] or {}).get("text")


def test_the_call_a_frame_was_making_names_the_stage(pb):
    """The innermost frame is the loop (`run_epochs`); the statement under it calls the worker
    group's `compute_values` through Ray: the values of training data, not a start-up failure."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/trainer.py", line 40, in run_epochs',
           "    vals = self.critic_group.compute_values(batch)",
           *RAY_GET,
           "AttributeError: 'ShardedGroup' object has no attribute 'workers'"]
    assert stage_of(pb, log)[0] == 6
    # the same failure without the source lines has nothing to place it by: start-up (the
    # attribute it lacked names no work)
    assert stage_of(pb, [ln for ln in log if not ln.startswith("    ")])[0] == 1


def test_the_one_value_a_loop_s_call_is_handed_names_the_phase_that_made_it(pb):
    """The training loop joins the generation's output to its batch (`batch.union(gen_batch_output)`)
    and the join's check fails: neither `union` nor the name it assigns (`batch`) says whose the
    data is, the one value handed names it (the generation's). Several values handed name no one
    phase: the loop's own code stands (training data)."""
    def log(statement):
        return ["Traceback (most recent call last):",
                '  File "/srv/tinyrl/trainer.py", line 1065, in fit', f"    {statement}",
                '  File "/srv/tinyrl/protocol.py", line 802, in union',
                "    self.batch = union_tensor_dict(self.batch, other.batch)",
                '  File "/srv/tinyrl/protocol.py", line 110, in union_tensor_dict',
                "    assert tensor_dict1.batch_size == tensor_dict2.batch_size, (",
                "AssertionError: Two tensor dict must have identical batch size. Got torch.Size([4096]) and torch.Size([16384])"]
    assert stage_of(pb, log("batch = batch.union(gen_batch_output)"))[0] == 2
    assert stage_of(pb, log("batch = batch.union(reward_tensor)"))[0] == 5
    assert stage_of(pb, log("batch = batch.union(gen_batch_output, reward_tensor)"))[0] == 6
    assert stage_of(pb, log("batch = batch.union(other)"))[0] == 6


def test_a_set_up_verb_alone_is_set_up_of_what_its_module_names(pb):
    """`create` alone names no object: the OpenAI client's `completions.create` asks for a
    completion (its module says so); `create_engine`, or a bare `build` in a module that names no
    stage's work, is set-up."""
    tail = ["openai.APITimeoutError: Request timed out."]
    client = ['  File "/venv/lib/python3.12/site-packages/openai/resources/chat/completions/completions.py", '
              'line 925, in create', "    return self._post(",
              '  File "/venv/lib/python3.12/site-packages/openai/_base_client.py", line 990, in request',
              "    raise APITimeoutError(request=request) from err"]
    assert stage_of(pb, ["Traceback (most recent call last):", *client, *tail])[0] == 2
    built = [line.replace("completions/completions.py", "engines/factory.py") for line in client]
    assert stage_of(pb, ["Traceback (most recent call last):", *built, *tail])[0] == 1
    named = [line.replace("in create", "in create_engine") for line in client]
    assert stage_of(pb, ["Traceback (most recent call last):", *named, *tail])[0] == 1


def test_a_class_built_inside_set_up_is_set_up_not_its_words(pb):
    """`Shuffler(…)` built while the loader is made: a loader's word would say task_dispatch;
    an object under construction says set-up."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/boot.py", line 12, in <module>',
           "    main()",
           '  File "/srv/tinyrl/boot.py", line 9, in main',
           "    loader = make_loader(cfg)",
           '  File "/srv/tinyrl/loading.py", line 30, in make_loader',
           "    return BatchSampler(Shuffler(cfg.items), 8)",
           "TypeError: object of type 'NoneType' has no len()"]
    assert stage_of(pb, log)[0] == 1


def test_what_a_source_line_calls():
    assert calls("old = self.actor_wg.compute_log_prob(batch)") == ["compute_log_prob"]
    assert calls("ray.get(model.async_train.remote(step))") == ["get", "async_train"]
    assert calls("xs = set(len(a) for a in sorted(items))") == []  # builtins say nothing
    assert calls("return DataLoader(ds, sampler=RandomSampler(ds))") == ["__init__", "__init__"]
    # a class whose name starts with a brand in lower case (verl's vLLMRollout) is still built
    assert calls("self.rollout = vLLMRollout(model_path, config)") == ["__init__"]
    assert calls("logger = logging.getLogger(name)") == ["getLogger"]  # camelCase, no acronym: a function
    # a variable that holds a class by its name (PEP 8's `cls`) builds an object when called
    assert calls("reward_fn = reward_manager_cls(tokenizer=tokenizer)") == ["__init__"]
    assert calls("raise ValueError(compute_reward(x))") == []  # the error being built, not work
    # a `with` line enters its manager: the frames inside it are its __enter__ (or __exit__)
    assert calls("with self.rollout_sharding_manager:") == ["rollout_sharding_manager"]
    assert calls("async with self.engine.weight_sync as ws:") == ["weight_sync"]
    assert calls("with torch.no_grad():") == ["no_grad"]


def test_the_frames_inside_a_with_line_are_its_manager_s_work(pb):
    """A frame on `with self.rollout_context:` runs the manager's __enter__: the frames inside it
    that only wrap (a timer's, a profiler's) say nothing, the manager names the work."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/trainer.py", line 40, in train_step',
           "    with self.rollout_context:",
           '  File "/srv/tinyrl/utils/timing.py", line 12, in wrapper',
           "    return fn(*args, **kwargs)",
           '  File "/srv/tinyrl/utils/timing.py", line 30, in timed',
           "    out = fn(*args, **kwargs)",
           "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"]
    assert stage_of(pb, log)[0] == 2
    plain = [ln.replace("with self.rollout_context:", "self.clock.tick()") for ln in log]
    assert stage_of(pb, plain)[0] == 7  # the same frames, no manager entered: the training step


def test_the_name_a_caller_gives_a_result_names_what_the_frames_inside_compute(pb):
    """`ref_logprobs, _ = self.forward_pass(…)`: a forward pass serves log-probs, values and the update
    alike; the caller's name for its result says which. A function's own name says more; a name
    for an object being built (`self.loader = self._build_loader(…)`) is the object's; the
    innermost statement's own target is a local value."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/run.py", line 9, in <module>',
           "    stats = trainer.step(queries, responses)",
           '  File "/srv/tinyrl/trainer.py", line 60, in step',
           "    ref_logprobs, ref_logits, _ = self.forward_pass(self.ref_model, batch)",
           '  File "/srv/tinyrl/trainer.py", line 91, in forward_pass',
           "    logits = model(**inputs)",
           '  File "/srv/tinyrl/model.py", line 12, in forward',
           "    hidden = self.body(ids)",
           "RuntimeError: 'weight' must be 2-D"]
    assert stage_of(pb, log)[0] == 6
    assert stage_of(pb, [ln.replace("ref_logprobs, ref_logits, _ =", "out =") for ln in log])[0] == 1
    # the frames inside name their work: it decides (`compute_loss` inside, whatever the result's name)
    inner = [ln.replace("in forward_pass", "in compute_loss") for ln in log]
    assert stage_of(pb, inner)[0] == 7
    built = [ln.replace("ref_logprobs, ref_logits, _ = self.forward_pass(", "self.ref_logprobs = self._build_pass(") for ln in log]
    assert stage_of(pb, built)[0] != 6
    own = log[:4] + ["    ref_logprobs = torch.cat(parts)", "RuntimeError: 'weight' must be 2-D"]
    assert stage_of(pb, own)[0] != 6


def test_the_package_of_a_frame_names_the_stage_when_nothing_else_does(pb):
    """A library's frames whose functions say nothing (`handler`, `parse`) still say what library
    it is: a verifier's package is reward work; a function's own words come first."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/loop.py", line 12, in main',
           "    out = run(batch)",
           '  File "/venv/lib/python3.12/site-packages/answer_verifier/utils.py", line 43, in handler',
           '    raise TimeoutError("Operation timed out!")',
           "TimeoutError: Operation timed out!"]
    assert stage_of(pb, log)[0] == 5
    inner = log[:4] + ['  File "/venv/lib/python3.12/site-packages/answer_verifier/utils.py", line 80, in compute_log_prob',
                       "    raise TimeoutError(\"Operation timed out!\")", log[-1]]
    assert stage_of(pb, inner)[0] == 6


def test_set_up_is_read_on_the_failing_call_s_own_path_not_in_its_callers():
    """The driver built the actor and called its method in one statement; the method failed in
    code whose names say nothing: not a start-up failure (the engine had started), but the stage
    after the last one passed."""
    engine = "INFO 06-04 22:25:57 [api_server.py:1090] Starting vLLM API server on http://127.0.0.1:8000"
    log = [engine, "Traceback (most recent call last):",
           '  File "/srv/tinyrl/main.py", line 91, in main',
           "    ray.get(Runner.remote().run.remote(cfg))",
           *RAY_GET,
           "ray.exceptions.RayTaskError(KeyError): ray::Runner.run() (pid=7, ip=10.0.0.2)",
           '  File "/srv/tinyrl/loop.py", line 156, in tick',
           "    ok = opt.apply(grads)",
           "KeyError: 'head.w'"]
    assert stage_of(load_playbook(None), log)[0] == 2  # the union: vLLM's engine marker


def test_an_object_built_in_a_caller_s_line_is_not_where_the_failure_is():
    """`Trainer(cfg).serve()` above the frames of `serve`: the object was built and its method
    failed later; the source line of the innermost frame (and of one above relay frames) says
    what was being called, a caller's line does not."""
    engine = "INFO 06-04 22:25:57 [api_server.py:1090] Starting vLLM API server on http://127.0.0.1:8000"
    log = [engine, "Traceback (most recent call last):",
           '  File "/srv/tinyrl/cli.py", line 12, in main',
           "    return Trainer(cfg).serve()",
           '  File "/srv/tinyrl/trainer.py", line 80, in serve',
           "    self.loop(state)",
           '  File "/srv/tinyrl/trainer.py", line 99, in loop',
           "    self.lease.renew()",
           "RuntimeError: lease lost"]
    assert stage_of(load_playbook(None), log)[0] == 2


def test_the_innermost_name_wins_whether_a_hint_or_a_word_names_it():
    """A stage hint maps the trainer's `compute_loss`; the reward function it calls on its source
    line is inside it: the failure is the reward's."""
    log = ["Traceback (most recent call last):",
           '  File "/venv/lib/python3.11/site-packages/transformers/trainer.py", line 3675, in training_step',
           "    loss = self.compute_loss(model, inputs)",
           '  File "/srv/tinyrl/grpo.py", line 372, in compute_loss',
           "    rewards[i] = torch.tensor(reward_func(prompts, completions))",
           "TypeError: length_reward() takes 1 positional argument but 2 were given"]
    assert stage_of(load_playbook(None), log)[0] == 5


def test_a_failure_in_the_training_loop_s_own_code_is_building_the_update_s_data(pb):
    """The loop that runs a whole step (`fit`, `grpo_train`, `train_actor`) calls each phase by
    name; what fails in its own code, between those calls, is the data it assembles for the
    update. Any phase named further in wins, and a script called train.py or a function that only
    contains the word (`train_with_tools`) is no loop."""
    head = ["Traceback (most recent call last):", '  File "/srv/tinyrl/run.py", line 9, in main']
    in_loop = head + ['  File "/srv/tinyrl/algo.py", line 310, in grpo_train',
                      '    mask = rollout_batch["loss_mask"]',
                      "KeyError: 'loss_mask'"]
    assert stage_of(pb, in_loop)[0] == 6
    method = ["ray.exceptions.RayTaskError(ValueError): ray::PolicyActor.train() (pid=4, ip=10.0.0.2)",
              "ValueError: packed sequence of 9000 tokens exceeds the micro-batch budget"]
    assert stage_of(pb, method)[0] == 6
    phase = head + ['  File "/srv/tinyrl/algo.py", line 120, in fit',
                    "    out = self.workers.generate_sequences(prompts)",
                    *RAY_GET,
                    "RuntimeError: engine is sleeping"]
    assert stage_of(pb, phase)[0] == 2  # the phase the loop called names the stage
    for func, path in (("train_with_tools", "/srv/tinyrl/algo.py"), ("main", "/srv/tinyrl/train.py")):
        other = ["Traceback (most recent call last):", f'  File "{path}", line 40, in {func}',
                 "    register_model(spec)", "RuntimeError: model registry is locked"]
        assert stage_of(pb, other)[0] == 1, func


def test_a_training_loop_s_guess_is_bounded_by_the_stages_already_passed():
    """The loop's guess (training_data) is the weakest reading: once the log says the training
    batch was built, a failure in the loop's own code is past it, in the update."""
    batch = "training batch: 16 samples from 16 trajectories, advantages mean 0.00 std 0.98"
    log = ["INFO 06-04 22:25:57 [api_server.py:1090] Starting vLLM API server on http://127.0.0.1:8000",
           'INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK',
           "agent worker started: 4 parallel agent(s), 16 episode(s) against http://127.0.0.1:8000",
           "Number of Trajectories 16/16 completed",
           "reward: checker scored 16 trajectories, mean score 0.44", batch,
           "Traceback (most recent call last):",
           '  File "/srv/tinyrl/driver.py", line 219, in train',
           "    run_step(state)",
           '  File "/srv/tinyrl/state.py", line 40, in apply',
           "    slot = state.slots[name]",
           "KeyError: 'head.bias'"]
    union = load_playbook(None)
    assert stage_of(union, log)[0] == 7
    assert stage_of(union, [ln for ln in log if ln != batch])[0] == 6


def test_the_optimizer_s_step_is_the_update_building_it_is_set_up(pb):
    """Frames of an optimizer's own module (torch.optim's, Megatron's, DeepSpeed's) step the
    update, whoever called them; a function named for building one is set-up."""
    step = ["Traceback (most recent call last):",
            '  File "/srv/tinyrl/loop.py", line 77, in run',
            '  File "/venv/lib/python3.11/site-packages/torch/optim/optimizer.py", line 487, in wrapper',
            '  File "/venv/lib/python3.11/site-packages/torch/optim/adamw.py", line 220, in step',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert stage_of(pb, step)[0] == 7
    build = ["Traceback (most recent call last):",
             '  File "/srv/tinyrl/setup.py", line 12, in build_optimizer',
             "ValueError: optimizer got an empty parameter list"]
    assert stage_of(pb, build)[0] == 1


def test_pushing_a_parameter_to_the_rollout_server_is_the_weight_sync(pb):
    """A trainer that pushes each parameter to its vLLM server (TRL's client method, ms-swift's
    copy) is syncing weights (completion), though `update` alone would read as the actor's update;
    the optimizer updating the same parameters is still the update."""
    push = ["Traceback (most recent call last):",
            '  File "/srv/tinyrl/loop.py", line 210, in _move_model_to_vllm',
            "    self.client.update_named_param(name, p.data)",
            '  File "/srv/tinyrl/client.py", line 88, in update_named_param',
            "    self.comm.group.barrier()",
            "torch.distributed.DistStoreError: wait timeout after 300000ms, keys: /bcast/0/12"]
    assert stage_of(pb, push)[0] == 2
    step = ["Traceback (most recent call last):",
            '  File "/srv/tinyrl/loop.py", line 90, in update',
            "    self.opt.step()",
            "RuntimeError: expected scalar type Float but found Half"]
    assert stage_of(pb, step)[0] == 7


def test_streaming_weights_to_the_generation_engine_is_the_weight_sync(pb):
    """A policy worker that streams or pushes its weights to the generation engine (NeMo-RL's
    refit, torchforge's push) is syncing them, whatever library call inside fails; a ZeroMQ
    receive that ran out there is a timeout, not the host's process limits its strerror also names."""
    for func in ("stream_weights_via_ipc_zmq_impl", "push_weights"):
        lines = ["Traceback (most recent call last):",
                 f'  File "/srv/tinyrl/policy/worker.py", line 464, in {func}',
                 "    reply = sock.recv()",
                 '  File "zmq/backend/cython/_zmq.py", line 183, in zmq.backend.cython._zmq._check_rc',
                 "    raise Again(errno)",
                 "zmq.error.Again: Resource temporarily unavailable"]
        v = verdict_of(pb, lines)
        assert (v["failed_stage"], v["root_cause"]["category"]) == (2, "timeout"), (func, v["root_cause"])
    v = verdict_of(pb, ["OSError: [Errno 11] Resource temporarily unavailable"])
    assert v["root_cause"]["category"] != "timeout", v["root_cause"]


@pytest.mark.parametrize("func", ["_fuse_lora", "fuse_lora_weight", "merge_adapter"])
def test_folding_lora_adapters_into_the_weights_for_a_generation_is_the_weight_sync(pb, func):
    """A LoRA policy's adapters are folded into its weights before it generates (DeepSpeed's hybrid
    engine) or before the weights go to the engine (TRL, ms-swift): a shape that does not fit there
    is the weight sync's, not a batch's in the log-prob pass the shape family would otherwise say."""
    lines = ["Traceback (most recent call last):",
             '  File "/srv/tinyrl/trainer.py", line 97, in step',
             "    seq = self.actor.produce(prompts)",
             f'  File "/srv/tinyrl/lora.py", line 60, in {func}',
             "    weight.data += scaling * torch.matmul(left.t(), right.t())",
             "RuntimeError: The size of tensor a (3072) must match the size of tensor b (4096) at non-singleton dimension 0"]
    assert verdict_of(pb, lines)["failed_stage"] == 2, func


def test_an_error_said_alone_then_with_its_traceback_is_placed_by_the_traceback(pb):
    """One rank's error printed bare (a logger's line, the exception's own line first), then the
    same error with its traceback from another rank: one error, raised where the frames say."""
    lines = ["TypeError: list indices must be integers or slices, not str",
             "[rank0]: Traceback (most recent call last):",
             '[rank0]:   File "/srv/tinyrl/train.py", line 234, in <module>',
             "[rank0]:     trainer.train()",
             '[rank0]:   File "/srv/tinyrl/trainer.py", line 766, in compute_loss',
             '[rank0]:     ids = inputs["prompt_ids"]',
             "[rank0]: TypeError: list indices must be integers or slices, not str"]
    v = verdict_of(pb, lines)
    assert (v["failed_stage"], v["root_cause"]["line_no"]) == (7, 1), v["root_cause"]


def test_accumulating_gradients_over_micro_batches_is_the_update(pb):
    """A step's gradient accumulation (accelerate's `accumulate`, a data-parallel wrapper's
    `no_sync`) is the update's work, whichever library refuses it."""
    lines = ["Traceback (most recent call last):",
             '  File "/srv/lib/accelerate/accelerator.py", line 1157, in accumulate',
             "    stack.enter_context(self.no_sync(m))",
             '  File "/srv/lib/zero/engine.py", line 2000, in no_sync',
             "    assert not self.partitioned, 'no_sync is not supported here'",
             "AssertionError: no_sync is not supported here"]
    assert stage_of(pb, lines)[0] == 7


def test_an_exception_ray_could_not_rebuild_is_the_error_under_ray_s_wrapper():
    """Ray raises `RuntimeError: Failed to unpickle serialized exception` from the error that
    rebuilding the remote exception raised: that error (naming the class the task raised) is the
    root, the RuntimeError Ray's wrapper of it — though the driver printed its own first and the
    task runner's log of the chain came after."""
    union = load_playbook(None)
    lines = ["Traceback (most recent call last):",
             '  File "/srv/lib/ray/exceptions.py", line 54, in from_ray_exception',
             "    raise RuntimeError(msg) from e",
             "RuntimeError: Failed to unpickle serialized exception",
             "(TaskRunner pid=56) Failed to unpickle serialized exception",
             "(TaskRunner pid=56) Traceback (most recent call last):",
             '(TaskRunner pid=56)   File "/srv/lib/ray/exceptions.py", line 51, in from_ray_exception',
             "(TaskRunner pid=56)     return pickle.loads(ray_exception.serialized_exception)",
             "(TaskRunner pid=56) TypeError: ToolTimeout.__init__() missing 1 required positional argument: 'budget'"]
    v = verdict_of(union, lines)
    assert v["root_cause"]["text"].startswith("TypeError: ToolTimeout.__init__()"), v["root_cause"]


def test_an_error_type_wrapping_a_collective_timeout_is_a_hang(pb):
    """torch raises DistBackendError when its watchdog times a collective out: the line names an
    error type and a wait that timed out; the run hung. The same error type for a failed CUDA call
    is a crash."""
    def outcome(line):
        return verdict_of(pb, [line])["outcome"]
    assert outcome("[rank2]: logging.cc:118: Unhandled exception: N3c1016DistBackendErrorE. what(): [Rank 2] "
                   "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST, NumelIn=4, "
                   "NumelOut=4, Timeout(ms)=600000) ran for 600417 milliseconds before timing out.") == "hang"
    assert outcome("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                   "NCCLUtils.hpp:317, unhandled cuda error, NCCL version 2.21.5") == "crash"


def test_a_traceback_cut_short_is_a_crash_where_its_frames_are(pb):
    """A log that stops inside a traceback (the process killed while printing it, a log or a
    paste cut): a crash where its frames were, its exception unknown. A faulthandler dump of a
    live process (innermost first, no `Traceback` head) is no failure."""
    cut = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/main.py", line 40, in main',
           "    run(cfg)",
           '  File "/srv/tinyrl/trainer.py", line 88, in step',
           "    scores = self.scorer.compute_score(batch)",
           '  File "/srv/tinyrl/scoring.py", line 12, in compute_score']
    v = verdict_of(pb, cut)
    assert (v["outcome"], v["failed_stage"]) == ("crash", 5), v["root_cause"]
    assert v["root_cause"]["text"].startswith("Traceback (most recent call last): (cut short after")
    dump = ["Thread 0x00007f3b (most recent call first):",
            '  File "/srv/tinyrl/scoring.py", line 12 in compute_score',
            '  File "/srv/tinyrl/main.py", line 40 in main']
    assert verdict_of(pb, dump)["root_cause"] is None


def test_a_traceback_cut_short_names_the_frame_of_the_work_it_was_in(pb):
    """Cut short inside a library (a decorator's relay, then a tensor library's internals): the
    root cause says where in the program's work it was too, the innermost frame whose function
    or `with` manager names a stage's work — not only the library line it stopped at."""
    cut = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/workers.py", line 210, in step',
           "    batch = self.sample(prompts)",
           '  File "/srv/tinyrl/workers.py", line 233, in sample',
           "    with self.weight_sync_manager:",
           '  File "/srv/tinyrl/util/timing.py", line 18, in wrapper',
           "    return fn(*args, **kwargs)",
           '  File "/venv/lib/python3.11/site-packages/tensorlib/dist.py", line 586, in gather_full',
           "    out = _all_gather(self._shards)"]
    v = verdict_of(pb, cut)
    text = v["root_cause"]["text"]
    assert v["failed_stage"] == 2, text
    assert 'in gather_full: out = _all_gather(self._shards), in File "/srv/tinyrl/workers.py", line 233, ' \
           "in sample: with self.weight_sync_manager:" in text
    assert text.endswith(", called as batch = self.sample(prompts))"), text  # the program's line that called it
    # cut short in the frame that names the work: that frame, and the statement that called it
    own = verdict_of(pb, cut[:5])["root_cause"]["text"]
    assert own.endswith('(cut short after File "/srv/tinyrl/workers.py", line 233, in sample: '
                        "with self.weight_sync_manager:, called as batch = self.sample(prompts))"), own
    # no frame above it, no statement that called it
    top = verdict_of(pb, cut[:1] + cut[3:5])["root_cause"]["text"]
    assert top.endswith("in sample: with self.weight_sync_manager:)"), top


def test_a_traceback_cut_short_in_a_library_names_the_program_s_call_when_no_function_names_work(pb):
    """No frame's function names a stage's work: the program's own innermost frame is where it
    called into the library (installed packages, a compiled module's build path, frozen modules are
    the library's), said besides the frame the traceback stopped at."""
    cut = ["Traceback (most recent call last):",
           '  File "/opt/tinyrl/tinyrl/cluster.py", line 452, in prepare',
           "    ray.get(helper_pg.ready(), timeout=1000)",
           '  File "/opt/venv/lib/python3.12/site-packages/ray/_private/worker.py", line 942, in get_objects',
           "    ] = self.core_worker.get_objects(",
           '  File "python/ray/_raylet.pyx", line 3215, in ray._raylet.CoreWorker.get_objects']
    text = verdict_of(pb, cut)["root_cause"]["text"]
    assert text.endswith('in ray._raylet.CoreWorker.get_objects, in File "/opt/tinyrl/tinyrl/cluster.py", '
                         'line 452, in prepare: ray.get(helper_pg.ready(), timeout=1000))'), text
    windows = ['  File "C:\\envs\\rl\\Lib\\site-packages\\tinylib\\ops.py", line 9, in gather' if "_raylet" in ln
               else ln for ln in cut if "worker.py" not in ln and "core_worker" not in ln]
    text = verdict_of(pb, windows)["root_cause"]["text"]
    assert text.endswith("in prepare: ray.get(helper_pg.ready(), timeout=1000))"), text
    # all of it the library's: the frame it stopped at is all there is to say
    lib = verdict_of(pb, [cut[0]] + cut[3:])["root_cause"]["text"]
    assert lib.endswith('(cut short after File "python/ray/_raylet.pyx", line 3215, in ray._raylet.CoreWorker.get_objects)'), lib


@pytest.mark.parametrize("func", ["weight_update", "update_weights", "start_weights_update",
                                  "advantages_compute", "compute_rewards"])
def test_a_phrase_of_the_stage_words_in_either_order_and_number(pb, func):
    """Code names the same work verb first or last, in the singular or the plural:
    `weight_update` is `update_weight`'s; `compute_rewards` a reward's. A single word keeps its
    number: `return_value` is no critic's `values`."""
    stage = {"weight_update": 2, "update_weights": 2, "start_weights_update": 2, "advantages_compute": 6,
             "compute_rewards": 5}[func]
    log = ["Traceback (most recent call last):",
           f'  File "/srv/tinyrl/engine.py", line 9, in {func}',
           "    self.table[key] = tensor",
           "RuntimeError: table is locked"]
    assert stage_of(pb, log)[0] == stage
    plain = [log[0], '  File "/srv/tinyrl/engine.py", line 9, in return_value', *log[2:]]
    assert stage_of(pb, plain)[0] == 1


@pytest.mark.parametrize("last, said", [
    (["Last error:", "socketStartConnect: Connect to 10.1.1.2<35871> failed : Software caused connection abort"],
     "(last error: socketStartConnect: Connect to 10.1.1.2<35871> failed : Software caused connection abort)"),
    (["Last error: Unknown NCCL Error"], None)])
def test_the_collective_librarys_last_error_is_part_of_the_root_cause(pb, last, said):
    """torch's c10d prints NCCL's own account of a failed call under its interpretation of the
    result code (`Last error:` then the line): the most specific words about the failure."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/comm.py", line 30, in build_group',
           "    dist.barrier(group=group)",
           "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, "
           "remote process exited or there was a network error, NCCL version 2.21.5",
           "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.",
           *last,
           "[rank0]:[W1204 10:00:00.000000000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed"]
    text = verdict_of(pb, log)["root_cause"]["text"]
    assert text.startswith("torch.distributed.DistBackendError: NCCL error in: "), text
    assert text.endswith(said or "NCCL version 2.21.5"), text


@pytest.mark.parametrize("caller, inner, stage", [
    ("compute_log_prob", "forward_step", 6),  # a forward-only pass: log-probs
    ("compute_values", "forward_step", 6),
    ("train_one_step", "finalize_model_grads", 7)])  # the update: its gradients' all-reduce
def test_a_forward_backward_schedule_names_no_stage_its_caller_does(pb, caller, inner, stage):
    """Megatron's schedules run both the forward-only passes of log-probs and values and the
    update's forward and backward: `forward_backward_*` is no `backward`'s update, the caller
    (or what the schedule ran) names the work."""
    log = ["Traceback (most recent call last):",
           f'  File "/srv/tinyrl/megatron_worker.py", line 88, in {caller}',
           "    out = self.forward_backward_batch(batch, forward_only=True)",
           '  File "/srv/tinyrl/megatron_worker.py", line 140, in forward_backward_batch',
           "    return forward_backward_func(forward_step_func=self.step_fn, data_iterator=it, model=self.model)",
           '  File "/venv/lib/python3.11/site-packages/megatron/core/pipeline_parallel/schedules.py", line 480, '
           "in forward_backward_no_pipelining",
           f"    {inner}(config)",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    assert stage_of(pb, log)[0] == stage


def _logged(formatter: logging.Formatter, level: int, message: str) -> list[str]:
    """What Python's logging prints, through `formatter`, for a record logged with the exception
    being handled (`logger.exception`, or `logger.info(…, exc_info=True)`): `message` names it `{e}`."""
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(formatter)
    log = logging.getLogger(f"tinyrl.engine.{logging.getLevelName(level).lower()}")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    try:
        {}["initialize"]["x"]
    except KeyError as e:
        log.log(level, message.format(e=e), exc_info=True)
    finally:
        log.removeHandler(handler)
    return buf.getvalue().splitlines()


def _logged_exception(level: str) -> list[str]:
    """What Python's logging prints for `logger.exception` (or `logger.info(…, exc_info=True)`)."""
    return _logged(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"), getattr(logging, level),
                   "Engine method 'initialize' failed: {e}")


def test_an_error_logged_before_a_traceback_cut_short_is_what_its_exception_said(pb):
    """logging prints the record's message, then the exception's traceback: cut short before its
    exception line, the traceback's error is what the record said."""
    lines = _logged_exception("ERROR")
    cut = lines[:-1]  # the exception line lost
    v = verdict_of(pb, cut)
    assert "ERROR: Engine method 'initialize' failed: 'initialize'" in v["root_cause"]["text"], v["root_cause"]
    assert "(its traceback cut short after" in v["root_cause"]["text"]
    assert verdict_of(pb, lines)["root_cause"]["text"] == "KeyError: 'initialize'"  # whole: the exception
    info = _logged_exception("INFO")[:-1]  # a record of no error level says nothing of it
    assert verdict_of(pb, info)["root_cause"]["text"].startswith("Traceback (most recent call last): (cut short")


def _engine_fatal(head: str) -> list[str]:
    """What an inference engine's logger prints for `logger.exception(...)` when its formatter
    repeats the record's prefix on every line (vLLM's NewLineFormatter: `LEVEL MM-DD HH:MM:SS
    [file.py:N] `), each line under the process's `head`."""
    class NewLine(logging.Formatter):
        def format(self, record):
            msg = super().format(record)
            return msg.replace("\n", "\n" + msg.split(record.message)[0]) if record.message else msg

    lines = _logged(NewLine("%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"),
                    logging.ERROR, "EngineCore encountered a fatal error.")
    return [f"{head}{ln}" for ln in lines]


@pytest.mark.parametrize("head", ["(EngineCore_DP0 pid=4242) ", "[Srv pid=7] [Core pid=8] "])
def test_an_error_record_whose_level_is_in_a_peeled_prefix_says_what_a_cut_traceback_was(pb, head):
    """The record's level in the logger's prefix (peeled as vLLM's; or left on the line under a
    head the analyzer does not know, the frames printed bare, so that the traceback's head reads
    glued to the record's prefix): the record before the traceback cut short is its error, as
    when the level is in the text."""
    cut = _engine_fatal(head)[:-1]  # the exception line lost
    if head.startswith("["):
        cut = cut[:2] + [ln.split("] ", 2)[2] for ln in cut[2:]]
    text = verdict_of(pb, cut)["root_cause"]["text"]
    assert "EngineCore encountered a fatal error. (its traceback cut short after" in text, text


def test_an_exception_pasted_above_its_traceback_cut_short_is_its_exception(pb):
    """An issue's paste: the error first, then the traceback, cut before its exception line (the
    blank after the colon lost, as some wrappers print it). The pasted line is the root cause, and
    its message's family its category; a line of prose there is not."""
    tb = ["Traceback (most recent call last):",
          '  File "/srv/tinyrl/trainer.py", line 12, in build',
          "    import tinyrl.kernels.fused_adam",
          '  File "<frozen importlib._bootstrap>", line 1030, in _gcd_import']
    for pasted in ("RuntimeError:No module named 'tinyrl.kernels.fused_adam'",
                   "ImportError: No module named 'tinyrl.kernels.fused_adam'"):
        rc = verdict_of(pb, [pasted, *tb])["root_cause"]
        assert rc["text"].startswith(pasted) and rc["category"] == "version_incompat", rc
    prose = verdict_of(pb, ["Here is what I got:", *tb])["root_cause"]
    assert prose["text"].startswith("Traceback (most recent call last): (cut short")


def test_an_exception_message_that_starts_with_a_newline_is_read_whole(pb):
    """`raise E(f"\\n{why}")`: Python prints `E: ` and the message on the next line — the root
    cause is both, the message's family its category."""
    code = "def load():\n    raise RuntimeError('\\nNPU out of memory. Tried to allocate 2.00 GiB')\nload()\n"
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr.splitlines()
    assert err[-2:] == ["RuntimeError: ", "NPU out of memory. Tried to allocate 2.00 GiB"]  # as Python prints it
    rc = verdict_of(pb, err)["root_cause"]
    assert rc["text"] == "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB" and rc["category"] == "oom", rc


def test_a_run_whose_last_words_retry_a_failed_request_hangs(pb):
    """A client that retries says so (urllib3's, openai's, a framework's own notice): a run silent
    after retrying the request that failed is stuck there, not dead; the same errors without
    a retry, or a traceback that ended the retries, are a crash."""
    def outcome(lines):
        a = Analyzer(pb)
        a.feed(("\n".join(lines) + "\n").encode(), ts=1000.0)
        a.finish()
        return a.verdict(now=1000.0 + 7200)["outcome"]
    err = ("requests.exceptions.ConnectionError: HTTPConnectionPool(host='10.0.0.7', port=30000): Max retries "
           "exceeded with url: /generate (Caused by NewConnectionError('Failed to establish a new connection'))")
    for notice in ("Retrying request to /v1/chat/completions in 0.8 seconds",
                   "WARNING Retrying (Retry(total=4, connect=None, read=None, redirect=None)) after connection broken",
                   "retrying... (attempt 12/60, url=http://10.0.0.7:30000/generate)"):
        assert outcome([err, notice, err, notice]) == "hang", notice
    assert outcome([err, err]) == "crash"
    gave_up = [err, "retrying... (attempt 60/60)", "Traceback (most recent call last):",
               '  File "/srv/tinyrl/rollout.py", line 88, in post', "    raise RuntimeError(msg)",
               "RuntimeError: gave up after 60 attempts: 503 Service Unavailable"]
    assert outcome(gave_up) == "crash"
    # a notice whose count says it was the last try: no retry follows, the request failed for good
    assert outcome([err, "retrying... (attempt 60/60, url=http://10.0.0.7:30000/generate)"]) == "crash"


def test_a_run_silent_while_its_client_retries_waits_on_a_server_it_cannot_reach(pb):
    """No error family named in the last lines, only a client's notice that it retries: the server
    it asks for is not there (not up, not reachable) — network_proxy; the same silence without the
    notice is a silent start-up's `other`."""
    def silent(lines):
        a = Analyzer(pb)
        a.feed(("\n".join(lines) + "\n").encode(), ts=1000.0)
        a.finish()
        return a.verdict(now=1000.0 + 7200)["root_cause"]
    waiting = ["2026-12-04 05:53:11 - INFO - tinyrl.client - Server is not up yet. Retrying in 2.0 seconds...",
               "2026-12-04 05:53:13 - INFO - tinyrl.client - Server is not up yet. Retrying in 2.0 seconds..."]
    rc = silent(waiting)
    assert rc["signature"] == "silence" and rc["category"] == "network_proxy", rc
    assert silent(["2026-12-04 05:53:11 - INFO - tinyrl.client - Server is not up yet."])["category"] == "other"


def test_an_error_nothing_places_is_where_a_consequence_of_it_was_caught(pb):
    """The engine's worker died of an error whose own frames name no work (a collective inside a
    model's forward); the client that waited on it was generating when the engine died (vLLM's
    EngineDeadError, `See stack trace (above) for the root cause`): the root is the worker's error,
    at the stage of the call that caught its consequence; without that, no stage is assumed: a
    kernel's fault on the device happens in whichever phase ran the kernel."""
    worker = ["ERROR 12-03 18:53:09 [multiproc_executor.py:671] Traceback (most recent call last):",
              'ERROR 12-03 18:53:09 [multiproc_executor.py:671]   File "/srv/tinyrl/comm.py", line 143, in all_gather',
              "ERROR 12-03 18:53:09 [multiproc_executor.py:671]     dist.all_gather_into_tensor(out, inp)",
              "ERROR 12-03 18:53:09 [multiproc_executor.py:671] torch.AcceleratorError: CUDA error: an illegal "
              "memory access was encountered"]
    client = ["ERROR 12-03 18:53:10 [async_llm.py:480] AsyncLLM output_handler failed.",
              "ERROR 12-03 18:53:10 [async_llm.py:480] Traceback (most recent call last):",
              'ERROR 12-03 18:53:10 [async_llm.py:480]   File "/venv/lib/python3.12/site-packages/vllm/v1/engine/'
              'async_llm.py", line 431, in output_handler',
              "ERROR 12-03 18:53:10 [async_llm.py:480]     raise self._format_exception(outputs) from None",
              "ERROR 12-03 18:53:10 [async_llm.py:480] vllm.v1.engine.exceptions.EngineDeadError: EngineCore "
              "encountered an issue. See stack trace (above) for the root cause."]
    pbu = load_playbook(None)
    failed, text = stage_of(pbu, worker + client)
    assert failed == 2 and "illegal memory access" in text, (failed, text)
    assert stage_of(pbu, worker)[0] is None


def test_a_record_s_shape_nothing_places_failed_where_records_are_read(pb):
    """A missing field, a file that does not parse, an empty batch — raised with no frame, process
    or marker to place it: not start-up (which builds workers, models and communicators) but the
    first stage that reads the data's records, task dispatch; after a later stage passed, the
    stage after it as always; an error of another family keeps the start-up default."""
    assert stage_of(pb, ["KeyError: 'problem'"])[0] == 3
    assert stage_of(pb, ["json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"])[0] == 3
    assert stage_of(pb, ["RuntimeError: torch.cat(): expected a non-empty list of Tensors"])[0] == 3
    assert stage_of(pb, ["RuntimeError: lease lost"])[0] == 1


def test_a_batch_s_tensors_that_disagree_in_shape_are_the_trainer_s_forward_over_it(pb):
    """torch's broadcast and view checks, a vision-language model's image tokens against its
    features: with nothing on the path, the trainer's first pass over the rollout's batch (its
    log-probs); a rollout engine's own check (vLLM's placeholders) is the generation's; a path that
    names the work places it as always."""
    assert stage_of(pb, ["RuntimeError: The size of tensor a (6236) must match the size of tensor b (8192) "
                         "at non-singleton dimension 0"])[0] == 6
    assert stage_of(pb, ["RuntimeError: shape '[2, 8]' is invalid for input of size 17"])[0] == 6
    assert stage_of(pb, ["ValueError: Image features and image tokens do not match: tokens: 7952, features 8043"])[0] == 6
    assert stage_of(pb, ["ValueError: Attempted to assign 308 + 104 = 412 multimodal tokens to 520 placeholders"])[0] == 2
    in_generate = ["Traceback (most recent call last):",
                   '  File "/srv/tinyrl/rollout.py", line 40, in generate_sequences',
                   "    out = model(input_ids)",
                   "RuntimeError: The size of tensor a (12) must match the size of tensor b (16) at non-singleton dimension 1"]
    assert stage_of(pb, in_generate)[0] == 2


def test_an_inference_engine_s_scheduler_is_a_generation_not_an_update():
    """vLLM's and SGLang's schedulers run once per step of an engine serving requests: a failure in
    them (`update_from_output`, whose words say `update`) is the generation's; building the
    scheduler (SGLang's run_scheduler_process → Scheduler.__init__) is start-up."""
    pbu = load_playbook(None)
    serving = ["ERROR 11-30 08:21:36 [core.py:720] EngineCore encountered a fatal error.",
               "Traceback (most recent call last):",
               '  File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 738, in run_busy_loop',
               "    self._process_engine_step()",
               '  File "/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 295, in step',
               "    engine_core_outputs = self.scheduler.update_from_output(",
               '  File "/venv/lib/python3.12/site-packages/vllm/v1/core/sched/scheduler.py", line 977, in update_from_output',
               "    assert not prompt_logprobs_tensors",
               "AssertionError"]
    assert stage_of(pbu, serving)[0] == 2
    building = ["Traceback (most recent call last):",
                '  File "/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 2534, in run_scheduler_process',
                "    scheduler = Scheduler(",
                '  File "/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 313, in __init__',
                "    self.init_memory_pool(server_args)",
                "RuntimeError: cache config rejected"]
    assert stage_of(pbu, building)[0] == 1


def test_a_python_warning_s_message_over_lines_is_no_error_of_a_silent_run(pb):
    """warnings print `path:N: XWarning: message` and a message of several lines as it is: a run
    silent after one is not read as the error its second line looks like, nor stopped there."""
    code = ("import warnings\nprint('Downloading shards:   0%|          | 0/4 [00:00<?, ?it/s]', flush=True)\n"
            "warnings.warn(\"Failed to read commit hash:\\nNo module named 'tinyrl._version'\", RuntimeWarning)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    lines = run.stdout.splitlines() + run.stderr.splitlines()
    assert "No module named 'tinyrl._version'" in lines  # the message's second line, as Python prints it
    a = Analyzer(pb)
    a.feed(("\n".join(lines) + "\n").encode(), ts=1000.0)
    a.finish()
    v = a.verdict(now=1000.0 + 7200)
    assert v["outcome"] == "hang" and v["root_cause"]["category"] != "version_incompat", v["root_cause"]
    assert v["root_cause"]["text"].startswith("Downloading shards:"), v["root_cause"]
    a = Analyzer(pb)  # the same line not a warning's: the error family it belongs to
    a.feed((lines[0] + "\nModuleNotFoundError: No module named 'tinyrl._version'\n").encode(), ts=1000.0)
    a.finish()
    assert a.verdict(now=1000.0 + 7200)["root_cause"]["category"] == "version_incompat"


def test_a_traceback_head_printed_on_a_progress_bar_heads_the_frames_after_it(pb):
    """tqdm redraws its bar with `\r` and no newline: the driver's traceback starts on the
    worker's bar line. The head after the bar heads the frames that follow (another process's
    prefix or none); the bar, still counting, names the phase under way when the frames do not."""
    log = ["(pid=71) Computing rewards:  40%|████      | 2/5 [00:09<00:14, 4.6s/it]Traceback (most recent call last):",
           '  File "/srv/tinyrl/launch.py", line 12, in <module>',
           "    main()",
           '  File "/srv/tinyrl/launch.py", line 9, in main',
           "    ray.get(job.go.remote(cfg))"]
    v = verdict_of(pb, log)
    assert v["outcome"] == "crash", v
    assert v["root_cause"]["text"].startswith("Traceback (most recent call last): (cut short after"), v["root_cause"]
    assert v["failed_stage"] == 5  # the bar counts the rewards being computed
    # without the bar's head the frames are a printed stack of no process's failure
    assert verdict_of(pb, log[1:] + ["step 3 done"])["root_cause"] is None


def test_a_finished_bar_or_one_naming_no_phase_says_nothing(pb):
    base = ['  File "/srv/tinyrl/launch.py", line 12, in <module>', "    main()",
            '  File "/srv/tinyrl/launch.py", line 9, in main', "    ray.get(job.go.remote(cfg))"]
    done = verdict_of(pb, ["Computing rewards: 100%|██████████| 5/5 [00:23<00:00, 4.6s/it]Traceback (most recent call last):", *base])
    looping = verdict_of(pb, ["Epoch 2:  40%|████      | 2/5 [00:09<00:14, 4.6s/it]Traceback (most recent call last):", *base])
    assert done["outcome"] == looping["outcome"] == "crash"
    assert done["failed_stage"] != 5 and looping["failed_stage"] != 5


def test_a_bar_s_prose_names_its_phase_but_not_over_the_failing_process(pb):
    """A bar's description is prose: `Generating sequences`, vLLM's `Processed prompts` count a
    generation. It places a failure nothing else places; a failure whose process names its stage
    (a reward worker's, while the next batch generates) keeps that stage."""
    union = load_playbook(None)
    tb = ['  File "/srv/tinyrl/launch.py", line 12, in <module>', "    main()",
          '  File "/srv/tinyrl/launch.py", line 9, in main', "    ray.get(job.go.remote(cfg))"]
    for bar in ("Processed prompts:  19%|█▉        | 24/128 [00:19<00:39,  2.65it/s]",
                "Generating sequences:  40%|████      | 2/5 [00:09<00:14, 4.6s/it]"):
        assert verdict_of(union, [bar + "Traceback (most recent call last):", *tb])["failed_stage"] == 2, bar
    log = ["(pid=5) Processed prompts:  19%|█▉        | 24/128 [00:19<00:39,  2.65it/s]",
           "(RewardWorker pid=9) ValueError: no boxed answer in completion 2"]
    assert verdict_of(union, log)["failed_stage"] == 5


def test_a_paste_that_starts_and_stops_inside_a_traceback_is_a_crash_there(pb):
    """A paste of frames only (no head, no exception: cut on both sides) that the log ends in is
    the failure the reporter saw; its innermost statement is what is known of it. A log viewer's
    export with a bare timestamp on every second line keeps that shape. When the log shows
    another error in full, that one is the root: when the cut one was raised is unknown."""
    frames = ['  File "/srv/tinyrl/envs/chat_env.py", line 80, in finish_episode',
              "    ids = merge_turns(history)",
              "          └ <function merge_turns at 0x7f01>",
              '  File "/srv/tinyrl/envs/chat_env.py", line 41, in merge_turns',
              "    assert ids[: len(prev)] == prev",
              "           │               └ [1, 2, 3]"]
    v = verdict_of(pb, frames)
    assert (v["outcome"], v["failed_stage"]) == ("crash", 4), v["root_cause"]
    assert "assert ids[: len(prev)] == prev" in v["root_cause"]["text"]
    viewer = [x for fr in frames for x in ("2026-11-30 02:14:07", fr)]
    assert verdict_of(pb, viewer)["root_cause"]["text"] == v["root_cause"]["text"]
    full = ["[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert verdict_of(pb, frames[:3] + full + frames[3:])["root_cause"]["category"] == "oom"


def test_a_loguru_traceback_keeps_its_frames(pb):
    """loguru (logger.exception, @logger.catch) marks the frame that caught the exception with `> `
    at column 0 and prints each frame's values under it: the traceback is one, its innermost frame
    places it."""
    log = ["2026-11-30 02:14:07.384 | ERROR    | tinyrl.loop:fit:10 - step failed",
           "Traceback (most recent call last):", "",
           '  File "/srv/tinyrl/run.py", line 11, in <module>', "    fit()", "    └ <function fit at 0x7f0c>", "",
           '> File "/srv/tinyrl/loop.py", line 8, in fit', "    compute_advantages(batch, 0)",
           "    └ <function compute_advantages at 0x7f0c>", "",
           '  File "/srv/tinyrl/adv.py", line 5, in compute_advantages', '    return batch["adv"] / k',
           "           │              └ 0", "           └ {'adv': 1}", "",
           "ZeroDivisionError: division by zero"]
    v = verdict_of(pb, log)
    assert (v["outcome"], v["failed_stage"]) == ("crash", 6), v["root_cause"]
    assert v["root_cause"]["text"] == "ZeroDivisionError: division by zero"


def _compute_advantages(batch):
    return batch["adv"] / batch["n"]


def _run_step(batch):
    return _compute_advantages(batch)


def test_a_rich_traceback_reads_as_python_prints_one(pb):
    """rich's traceback panel (typer's pretty exceptions, `rich.traceback.install()`), rendered here
    by rich itself, with and without Ray's prefix on every line: its frames and the statement each
    ran are a traceback's, its code context and border are not kept."""
    import io

    from rich.console import Console
    from rich.traceback import Traceback

    try:
        _run_step({"adv": 1.0, "n": 0})
    except ZeroDivisionError as e:
        out = io.StringIO()
        Console(file=out, width=110, color_system=None).print(Traceback.from_exception(type(e), e, e.__traceback__))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("╭") and any("❱" in x for x in lines)  # the panel as rich draws it
    for log in (lines, [f"(TaskRunner pid=7) {x}" for x in lines]):
        v, a = analyzed(pb, log)
        assert (v["outcome"], v["failed_stage"]) == ("crash", 6), v["root_cause"]  # compute_advantages
        assert v["root_cause"]["text"] == "ZeroDivisionError: float division by zero"
        kept = next(iter(a.findings.values())).lines
        assert '    return batch["adv"] / batch["n"]' in kept and not any(x.startswith("│") for x in kept)


def test_an_exception_group_is_rooted_in_the_sub_exception_it_carries(pb):
    """asyncio.TaskGroup (anyio's too) raises an ExceptionGroup; Python prints each sub-exception's
    traceback inside it behind a `| ` margin. Printed here by Python itself: the group is a wrapper,
    the sub-exception the root, placed by its own frames."""
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.TaskGroup and ExceptionGroup are Python 3.11's")
    import asyncio
    import traceback

    async def compute_score(i):
        if i == 2:
            raise ValueError("no boxed answer in completion 2")
        await asyncio.sleep(0)

    async def score_all():
        async with asyncio.TaskGroup() as tg:
            for i in range(4):
                tg.create_task(compute_score(i))

    try:
        asyncio.run(score_all())
    except Exception as e:  # an ExceptionGroup
        lines = "".join(traceback.format_exception(e)).splitlines()
    assert lines[0].strip().startswith("+ Exception Group Traceback") and any("| ValueError" in x for x in lines)
    for log in (lines, [f"(RewardWorker pid=9) {x}" for x in lines]):
        v = verdict_of(pb, log)
        assert (v["outcome"], v["failed_stage"]) == ("crash", 5), v["root_cause"]
        assert v["root_cause"]["text"] == "ValueError: no boxed answer in completion 2"


# IPython's traceback as IPython 9.18 prints it (checked against `ipython --colors=NoColor -c …`): the
# type first in the head, frames as `File path:N, in Class.func(args)` / `Cell In[k], line N`, numbered
# context lines, the running line marked with an arrow.
IPYTHON_TB = ["---------------------------------------------------------------------------",
              "ValueError                                Traceback (most recent call last)",
              "Cell In[7], line 3", "      1 trainer = TinyTrainer(cfg)", "      2 trainer.setup()",
              "----> 3 trainer.train()", "",
              "File ~/tinyrl/trainer.py:212, in TinyTrainer.train(self)", "    210 for batch in self.loader:",
              "    211     rollouts = self.generate(batch)", "--> 212     scores = self.score_rollouts(rollouts)",
              "    213     self.update(rollouts, scores)", "",
              "File ~/tinyrl/trainer.py:88, in TinyTrainer.score_rollouts(self, rollouts)",
              "     86 def score_rollouts(self, rollouts):", "---> 88     return [parse_answer(r) for r in rollouts]", "",
              "File ~/tinyrl/rewards.py:14, in parse_answer(text)", "     12 m = BOXED.search(text)",
              "     13 if m is None:", "---> 14     raise ValueError(f\"no boxed answer in {text[:20]!r}\")", "",
              "ValueError: no boxed answer in 'The answer is 4.'"]


def test_an_ipython_traceback_reads_as_python_prints_one(pb):
    """A notebook's traceback (TRL and Unsloth runs in Colab): its frames and running statements
    place it, its numbered context lines are not kept; pasted in the middle of other output too."""
    for log in (IPYTHON_TB, ["{'loss': 0.12, 'grad_norm': 0.5, 'epoch': 0.1}"] + IPYTHON_TB):
        v, a = analyzed(pb, log)
        assert (v["outcome"], v["failed_stage"]) == ("crash", 5), v["root_cause"]  # score_rollouts
        assert v["root_cause"]["text"] == "ValueError: no boxed answer in 'The answer is 4.'"
        kept = next(iter(a.findings.values())).lines
        assert "    return [parse_answer(r) for r in rollouts]" in kept and not any(x.startswith("     1") for x in kept)


def test_an_ipython_traceback_cut_after_its_head_is_a_crash_of_the_type_it_names(pb):
    """A notebook's paste that stops right after IPython's head (the rest was a screenshot, or cut):
    the head names the exception's type, the run crashed, placed where the lifecycle was; cut
    inside its frames, it is cut short there."""
    engine = "INFO 07-02 23:55:15 [model_runner.py:1203] Model loading took 2.2550 GiB and 30.916279 seconds"
    v = verdict_of(pb, [engine] + IPYTHON_TB[:2])
    rc = v["root_cause"]
    assert (v["outcome"], rc["exception"]) == ("crash", "ValueError"), rc
    assert rc["text"] == IPYTHON_TB[1] + " (cut short after its head)"
    oom = IPYTHON_TB[1].replace("ValueError     ", "OutOfMemoryError")
    assert verdict_of(pb, [engine, oom])["root_cause"]["category"] == "oom"
    v = verdict_of(pb, IPYTHON_TB[:-1])
    assert (v["outcome"], v["failed_stage"]) == ("crash", 5) and "(cut short after" in v["root_cause"]["text"], v


def test_a_remote_task_that_died_without_a_traceback_is_placed_by_its_method(pb):
    """The worker died (no traceback of its own): the method the RayTaskError names is the
    innermost call known; the driver's frames above it only wait in ray.get."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/trainer.py", line 300, in prepare_batch',
           "    out = ray.get(refs)",
           *RAY_GET,
           "ray.exceptions.RayTaskError(WorkerCrashedError): ray::ScoreServer.score_batch() (pid=91, ip=10.0.0.3)"]
    union = load_playbook(None)  # Ray's wrapper signatures
    assert stage_of(union, log)[0] == 5
    # with the worker's own exception line after it, that exception is the root: the same stage
    assert stage_of(union, log + ["ray.exceptions.WorkerCrashedError: The worker died unexpectedly."])[0] == 5


def test_of_two_wrappers_of_one_task_the_one_naming_the_error_inside_is_the_root():
    """Ray logs a failed task nobody awaited yet (`Unhandled error …: ` and the error's text,
    `ray::X.f() (pid=…)`, no type), then the driver's ray.get raises another rank's as
    RayTaskError(T): the same failure; only the second names its kind. The workers' own
    exceptions are not in view."""
    unhandled = ("(Runner pid=4) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
                 "ray::WorkerDict.actor_rollout_ref_update_actor() (pid=8, ip=10.0.0.3)")
    remote = ['(Runner pid=4)   File "/srv/tinyrl/workers.py", line 504, in update_actor',
              "(Runner pid=4)     metrics = self.actor.update_policy(data=data)"]
    driver = ["Traceback (most recent call last):",
              '  File "/srv/tinyrl/trainer.py", line 657, in fit',
              "    out = self.wg.update_actor(batch)", *RAY_GET,
              "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_ref_update_actor() "
              "(pid=9, ip=10.0.0.3)"]
    v = verdict_of(load_playbook(None), [unhandled, *remote, *driver])
    assert v["root_cause"]["text"].startswith("ray.exceptions.RayTaskError(OutOfMemoryError)"), v["root_cause"]
    assert (v["root_cause"]["category"], v["failed_stage"]) == ("oom", 7)
    # alone, the unhandled error is the root (nothing says more)
    alone = verdict_of(load_playbook(None), [unhandled, *remote])
    assert alone["root_cause"]["text"].startswith("Unhandled error"), alone["root_cause"]


def test_where_errors_of_a_family_arise_says_more_than_a_process_name(pb):
    """CUDA initialised lazily fails at the process's first CUDA call: its set-up, though the
    process is a generation engine's."""
    log = ["(LLMRayActor pid=5) Traceback (most recent call last):",
           '(EngineWorker pid=5)   File "/srv/tinyrl/gpu.py", line 30, in ensure_device',
           "(LLMRayActor pid=5) torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization "
           "with error: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED"]
    union = load_playbook(None)
    assert stage_of(union, log)[0] == 1
    # a module a generation worker cannot import: it fails as it is created; imported inside a
    # phase's call (its frames say so), that phase's
    missing = "ModuleNotFoundError: No module named 'tinyengine'"
    assert stage_of(union, [f"(GenerationWorker pid=5) {missing}"])[0] == 1
    lazy = ["Traceback (most recent call last):", '  File "/srv/tinyrl/engine.py", line 88, in update_weights',
            "    import tinyengine", missing]
    assert stage_of(union, lazy)[0] == 2


def test_a_block_of_wrappers_only_is_rooted_in_its_innermost():
    """The driver's RayTaskError(ActorDiedError) and the dead actor's exit detail, nothing of the
    actor's own: the root is the detail that says why the actor is gone, placed by the call the
    driver was making (through verl-style worker-group relay frames)."""
    log = ["ray.exceptions.RayTaskError(ActorDiedError): ray::Runner.run() (pid=18, ip=10.0.0.2)",
           '  File "/srv/tinyrl/trainer.py", line 952, in fit',
           "    self.rollout_wg.sync_weights(state)",
           '  File "/srv/tinyrl/single_controller/ray/base.py", line 49, in func',
           "    output = ray.get(output)",
           "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
           "\tclass_name: WorkerDict",
           "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
           "detail: Worker unexpectedly exits with a connection error code 2. End of file."]
    stage, text = stage_of(load_playbook("verl"), log)
    assert text.startswith("The actor is dead because its worker process has died")
    assert stage == 2


def _type_error(source: str) -> str:
    """The last line Python prints for `source`, which fails on a call's arguments."""
    r = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True)
    return r.stderr.strip().splitlines()[-1]


def test_the_function_a_call_could_not_enter_is_the_innermost_call(pb):
    """Python's argument errors name the function called (3.10+ with its class): the failure is
    that call's, where the frames that made it are cut away or say nothing."""
    missing = _type_error("def accuracy_reward(completions, solution): pass\naccuracy_reward(['x'])")
    assert missing.startswith("TypeError: accuracy_reward() missing 1 required positional argument")
    assert stage_of(pb, ["step 3 started", missing]) == (5, missing)  # logged alone: the reward's call
    method = _type_error("class Rollout:\n def generate_sequences(self, batch): pass\nRollout().generate_sequences(1, 2)")
    relay = ["Traceback (most recent call last):",
             '  File "/srv/tinyrl/worker.py", line 40, in execute',
             "    return fn(*args, **kwargs)", method]
    assert stage_of(pb, relay)[0] == 2  # generate_sequences: completion
    # other TypeErrors name no call: the frames place them as before
    other = ["Traceback (most recent call last):", '  File "/srv/tinyrl/worker.py", line 40, in execute',
             "    return fn(*args, **kwargs)", "TypeError: unsupported operand type(s) for +: 'int' and 'str'"]
    assert stage_of(pb, other)[0] != 2


def test_a_generation_engine_s_sampler_is_the_generation_a_dataloader_s_the_dispatch():
    """`sampler` names a dataloader's part (torch.utils.data) and an engine's token sampling alike:
    the engine's path says which."""
    def log(path, func):
        return ["Traceback (most recent call last):",
                '  File "/srv/tinyrl/loop.py", line 12, in run_step',
                "    out = step(batch)",
                f'  File "/venv/lib/python3.11/site-packages/{path}", line 480, in {func}',
                "    x = t.cpu()",
                "RuntimeError: CUDA error: unspecified launch failure"]
    union = load_playbook(None)
    assert stage_of(union, log("vllm/v1/sample/sampler.py", "sample"))[0] == 2
    assert stage_of(union, log("sglang/srt/layers/sampler.py", "forward"))[0] == 2
    assert stage_of(union, log("torch/utils/data/sampler.py", "__iter__"))[0] == 3


def test_a_batch_drawn_from_a_dataloader_is_the_dispatch_its_worker_s_error_the_cause():
    """A DataLoader drawing the next batch (torch.utils.data's `__next__` → `_next_data` → `fetch`)
    inside a trainer's update loop hands out tasks: task_dispatch, not the update the loop's frames
    name. A worker's error comes back wrapped (`Caught KeyError in DataLoader worker process 0.`)
    with its `Original Traceback`: the dataset's own exception is the root. Building the loader's
    sampler (its constructor) is set-up."""
    lib = "/venv/lib/python3.11/site-packages"
    loop = ["Traceback (most recent call last):",
            '  File "/srv/tinyrl/train.py", line 40, in main',
            "    trainer.train()",
            f'  File "{lib}/transformers/trainer.py", line 2514, in _inner_training_loop',
            "    batch = next(epoch_iterator)",
            f'  File "{lib}/torch/utils/data/dataloader.py", line 733, in __next__',
            "    data = self._next_data()",
            f'  File "{lib}/torch/utils/data/dataloader.py", line 1480, in _process_data',
            "    data.reraise()",
            f'  File "{lib}/torch/_utils.py", line 733, in reraise',
            "    raise exception",
            "KeyError: Caught KeyError in DataLoader worker process 0.",
            "Original Traceback (most recent call last):",
            f'  File "{lib}/torch/utils/data/_utils/worker.py", line 349, in _worker_loop',
            "    data = fetcher.fetch(index)",
            f'  File "{lib}/torch/utils/data/_utils/fetch.py", line 52, in fetch',
            "    data = [self.dataset[idx] for idx in possibly_batched_index]",
            '  File "/srv/tinyrl/prompts.py", line 18, in __getitem__',
            '    return {"prompt": row["question"]}',
            "KeyError: 'question'"]
    union = load_playbook(None)
    v = verdict_of(union, loop)
    assert (v["failed_stage"], v["root_cause"]["text"], v["root_cause"]["category"]) == (3, "KeyError: 'question'", "data_format")
    unwrapped = loop[:5] + loop[13:]  # num_workers=0: the dataset's error raised in the main process
    assert stage_of(union, unwrapped) == (3, "KeyError: 'question'")
    built = ["Traceback (most recent call last):",
             '  File "/srv/tinyrl/train.py", line 22, in main',
             "    loader = PromptLoader(prompts, shuffle=True)",
             '  File "/srv/tinyrl/prompts.py", line 30, in __init__',
             "    self.order = RandomSampler(self.prompts)",
             f'  File "{lib}/torch/utils/data/sampler.py", line 163, in __init__',
             "    if not isinstance(self.num_samples, int) or self.num_samples <= 0:",
             f'  File "{lib}/torch/utils/data/sampler.py", line 172, in num_samples',
             "    return len(self.data_source)",
             "TypeError: object of type 'NoneType' has no len()"]
    assert stage_of(union, built)[0] != 3


def test_a_controller_s_dispatch_of_a_worker_call_names_no_stage():
    """A controller splits the data of every call to its workers in its dispatch functions,
    whatever the work (a generation, log-probs, an update): a failure there is of the work the
    caller names, not a task dispatch."""
    def log(caller):
        return ["Traceback (most recent call last):",
                f'  File "/srv/tinyrl/trainer.py", line 88, in {caller}',
                "    out = self.policy.run(batch)",
                '  File "/srv/tinyrl/controller/dispatch.py", line 191, in dispatch_chunks',
                "    assert len(data) % chunks == 0",
                "AssertionError: data batch size must be divisible by the number of workers, got 1032 and 512"]
    union = load_playbook(None)
    assert stage_of(union, log("compute_log_probs"))[0] == 6
    assert stage_of(union, log("update_policy"))[0] == 7
    assert stage_of(union, log("generate_rollouts"))[0] == 2


def test_the_remote_frames_under_a_ray_wrapper_cut_short_are_inside_its_method():
    """Ray prints a failed task as its header, `RayTaskError(E): ray::Actor.method()`, then the
    remote traceback: cut before its exception, those frames are the innermost call known."""
    driver = ["Traceback (most recent call last):",
              '  File "/srv/tinyrl/trainer.py", line 300, in fit',
              "    out = self.workers.generate_sequences(batch)",
              *RAY_GET,
              "ray.exceptions.RayTaskError(ValueError): ray::WorkerGroup.actor_generate_sequences() (pid=91, ip=10.0.0.3)"]
    remote = ['  File "/srv/tinyrl/workers.py", line 523, in generate_sequences',
              "    old = self.actor.compute_log_prob(data=output)",
              '  File "/srv/tinyrl/actor.py", line 389, in compute_log_prob',
              "    _, lp = self._forward_micro_batch(mb)"]
    union = load_playbook(None)
    named = stage_of(union, driver)[0]  # the method named: a generation (verl's hint: its rollout)
    assert named in (2, 4)
    assert stage_of(union, driver + remote)[0] == 6  # what ran inside it: log-probs


def test_the_last_request_a_server_logged_names_the_work_under_way():
    """A rollout server's access line (uvicorn's) names what its client asked of it: a failure
    nothing else places is in that work — the weight sync a trainer pushes, the communicator it sets
    up; a request that names nothing (`/health`) says nothing, and a stage marker after it ends it."""
    def log(*requests):
        return [*(f'INFO:     127.0.0.1:5470{i} - "{r} HTTP/1.1" 200 OK' for i, r in enumerate(requests)),
                "ERROR 07-10 16:53:50 [core.py:459] Invocation of collective_rpc method failed",
                "Traceback (most recent call last):",
                '  File "/venv/lib/python3.11/site-packages/tinyserve/core.py", line 456, in _handle_client_request',
                "    output.result = method(*args)",
                "RuntimeError: the peer went away"]
    union = load_playbook(None)
    assert stage_of(union, log("GET /health/", "POST /update_named_param/"))[0] == 2
    assert stage_of(union, log("POST /update_flattened_params/"))[0] == 2  # a server's parameters: the sync's
    assert stage_of(union, log("GET /health/", "GET /get_world_size/", "POST /init_communicator/"))[0] == 1
    synced = log("POST /update_named_param/")
    assert stage_of(union, synced[:1] + ["▶ Computing logprobs..."] + synced[1:])[0] == 6  # a phase begun since


def test_a_client_s_copy_of_an_engine_s_failure_is_where_the_engine_s_report_placed_it():
    """The engine process reports a failed call (its wrapper's header, after the request it was
    answering); the client re-raises the error with its message, in frames of its own that name no
    work: the engine's report says which work it was."""
    engine = ['INFO:     127.0.0.1:43474 - "POST /update_flattened_params/ HTTP/1.1" 200 OK',
              "(EngineCore_DP0 pid=71) ERROR 01-02 11:34:17 [core.py:780] Invocation of collective_rpc method failed",
              "(EngineCore_DP0 pid=71) ERROR 01-02 11:34:17 [core.py:780] Traceback (most recent call last):",
              '(EngineCore_DP0 pid=71) ERROR 01-02 11:34:17 [core.py:780]   File "/venv/tinyserve/core.py", '
              "line 777, in _handle_client_request"]
    client = ["Traceback (most recent call last):",
              '  File "/venv/tinyserve/client.py", line 697, in call_utility',
              "    return future.result()",
              "Exception: Call to collective_rpc method failed: loader() got an unexpected keyword argument 'shard'"]
    union = load_playbook(None)
    assert stage_of(union, engine + client) == (2, client[-1])
    assert stage_of(union, client)[0] == 1  # alone, nothing places it: start-up, assumed


def test_a_traceback_pasted_innermost_first_is_read_outermost_first():
    """Some viewers print a traceback's frames innermost first; the script's `<module>` frame,
    which Python prints first, then comes last, its statement calling the frame printed just before
    it. An import that failed also ends in a `<module>` frame, called by no frame before it."""
    turned = ["Traceback (most recent call last):",
              '  File "/srv/tinyrl/train.py", line 432, in main',
              "    out = policy.generate(prompt_ids)",
              '  File "/srv/tinyrl/train.py", line 468, in <module>',
              "    main()",
              "RuntimeError: the draw failed"]  # pasted from the frame that made the call the error came from
    base = load_playbook("base")
    assert stage_of(base, turned)[0] == 2  # inside a generation, not a module being imported
    imported = ["Traceback (most recent call last):",
                '  File "/srv/tinyrl/train.py", line 3, in <module>',
                "    import tinyrl.policy",
                '  File "<frozen importlib._bootstrap>", line 1176, in _find_and_load',
                '  File "/srv/tinyrl/policy.py", line 9, in <module>',
                "    TABLE = build_table()",
                "RuntimeError: the table failed"]
    assert stage_of(base, imported)[0] == 1


def test_a_fork_s_variant_of_verl_s_rollout_call_is_the_rollout():
    """verl's rollout worker method, generate_sequences, is the trajectories' work; forks name
    their variants after it (a multi-turn `generate_sequences_loop`), and read the same."""
    verl = load_playbook("verl")
    for call in ("generate_sequences", "generate_sequences_loop"):
        log = ["Traceback (most recent call last):",
               '  File "/srv/fork/verl/trainer/ppo/ray_trainer.py", line 952, in fit',
               f"    gen_batch_output = self.actor_rollout_wg.{call}(gen_batch)",
               '  File "/srv/fork/verl/single_controller/ray/base.py", line 49, in func',
               "    output = ray.get(output)",
               "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."]
        assert stage_of(verl, log)[0] == 4, call


def test_a_collective_s_watchdog_past_its_group_s_first_collective_is_after_start_up(pb):
    """ProcessGroupNCCL (torch_npu's ProcessGroupHCCL the same) numbers a group's collectives: a
    watchdog on the 57th says the group was set up and had run 56; on the first, it may still be
    set-up. Nothing else in these logs places the failure."""
    def log(work, seq):
        return [f"[rank3]:[E0101 00:00:00.000000000 ProcessGroup.cpp:616] [Rank 3] Watchdog caught collective "
                f"operation timeout: {work}(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                "Timeout(ms)=600000) ran for 600012 milliseconds before timing out."]
    assert stage_of(pb, log("WorkNCCL", 57))[0] == 2
    assert stage_of(pb, log("WorkHCCL", 9))[0] == 2
    assert stage_of(pb, log("WorkNCCL", 1))[0] == 1
    # a run silent after a watchdog it printed wrapped over lines (no signature matches it whole)
    wrapped = ["[PG 0 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught col",
               "lective operation timeout: WorkNCCL(SeqNum=12, OpType=BROADCAST, NumelIn=8, NumelOut=8, Timeout(ms)=6",
               "00000) ran for 600010 milliseconds before timing out."]
    assert verdict_of(pb, wrapped)["failed_stage"] in (None, 2)  # never start-up


def test_the_call_an_error_record_says_failed_places_it(pb):
    """An RPC server's record names the method that failed (`Engine method 'x' failed: …`), an engine
    client's the call that timed out (`RPC call to x timed out`): with no traceback, that call is the
    innermost known. A communicator's creation there is that phase's, not start-up: c10d and
    torch_npu create one at a group's first collective."""
    union = load_playbook(None)
    rec = "(Trainer) 20260101-00:00:00.000 RPCServer ERROR: Engine method '{}' failed: {}"
    init = ("create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:130 HCCL function error: "
            "hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 7")
    assert stage_of(union, [rec.format("compute_values", init)])[0] == 6
    assert stage_of(union, [rec.format("update_actor", init)])[0] == 7
    assert stage_of(union, [rec.format("initialize", init)])[0] == 1
    assert stage_of(union, [rec.format("connect_peers", init)])[0] == 1  # a name of no stage's work
    assert stage_of(pb, ["TimeoutError: RPC call to compute_ref_log_prob timed out."])[0] == 6
    # the same creation inside a traceback whose frames name the phase
    tb = ["Traceback (most recent call last):",
          '  File "/srv/tinyrl/workers.py", line 88, in compute_values',
          "    out = self.model(batch)",
          '  File "/srv/tinyrl/parallel.py", line 12, in all_gather_params',
          "    dist.all_gather(out, t)",
          f"RuntimeError: {init}"]
    assert stage_of(union, tb)[0] == 6


def test_a_bad_value_before_a_traceback_cut_short_is_why_the_run_died(pb):
    """A traceback cut short before its exception says where a run died, not why: a NaN the step's
    metrics showed before it is the earliest error known — the crash's root, at the stage of the
    value (grad norm: the update). A traceback shown in full says why itself and stays the root."""
    metrics = "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': 0.01}"
    tb = ["Traceback (most recent call last):",
          '  File "/srv/run/train.py", line 40, in <module>',
          "    main()",
          '  File "/srv/run/train.py", line 31, in main',
          "    trainer.train()"]
    v = verdict_of(pb, [metrics, *tb])
    rc = v["root_cause"]
    assert (v["outcome"], v["failed_stage"], rc["category"]) == ("crash", 7, "precision_dtype"), rc
    assert "'grad_norm': nan" in rc["text"]
    full = tb + ['  File "/srv/run/sample.py", line 9, in generate', "    torch.multinomial(p, 1)",
                 "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0"]
    v = verdict_of(pb, [metrics, *full])
    assert v["root_cause"]["text"].startswith("RuntimeError: probability tensor"), v["root_cause"]
    assert verdict_of(pb, tb)["root_cause"]["text"].startswith("Traceback")  # alone, the cut one is all there is


def test_a_record_of_the_call_that_failed_before_a_traceback_cut_short_is_its_message(pb):
    """`print(f"Error in {method}: {e}")` then the traceback, cut before its exception: the record
    says what the exception was (without the process's prefix), and the call the innermost frame's
    statement makes says what kind of failure it is (loading weights: their mapping)."""
    log = ["(Rollout pid=1) Error in Worker.refresh_weights: dim 0 is not valid for a 3D tensor",
           "(Rollout pid=1) Traceback (most recent call last):",
           '(Rollout pid=1)   File "/srv/tinyrl/backend.py", line 30, in refresh_weights',
           "(Rollout pid=1)     self._load_weights(ws)"]
    v = verdict_of(pb, log)
    rc = v["root_cause"]
    assert rc["text"].startswith("Error in Worker.refresh_weights: dim 0"), rc
    assert (v["failed_stage"], rc["category"]) == (2, "weight_mapping"), rc
    # a record that names no failure is not the traceback's message
    v = verdict_of(pb, ["(Rollout pid=1) refreshing weights"] + log[1:])
    assert v["root_cause"]["text"].startswith("Traceback"), v["root_cause"]


def test_an_error_no_frame_places_is_where_its_own_words_say_outside_what_it_quotes(pb):
    """No frame, process or marker says where: the program's message names the operation it
    stopped (a generation, a weight sync, a reward); what it quotes is a symbol, which code names
    wherever it is built; a library family's fixed text says nothing of where."""
    def alone(error):
        return stage_of(pb, ["Traceback (most recent call last):",
                             '  File "/srv/tinyrl/driver.py", line 12, in <module>', "    main()",
                             '  File "/srv/tinyrl/driver.py", line 9, in main', "    go(cfg)", error])[0]

    assert alone("TimeoutError: Batch 62 generation timed out after 300.0s") == 2
    assert alone("RuntimeError: start_weight_update called while a weight update is already active.") == 2
    assert alone("ValueError: failed to compute the reward of sample 3: the answer has no boxed part") == 5
    assert alone("RuntimeError: old log prob of 2 sequences is inf") == 6
    assert alone("ValueError: 'RewardManager' is not 'compute_score'") == 1  # quoted: symbols
    # …but the attribute an object lacks is what the failing statement used: its operation
    assert alone("AttributeError: 'RewardManager' object has no attribute 'compute_score'") == 5
    # quoted, a symbol; a record's key missing: no earlier than where records are read (task dispatch)
    assert alone("KeyError: 'key \"responses\" not found in TensorDict with keys [\\'advantages\\']'") == 3
    assert alone("TimeoutError: Unable to reach the server within 30.0 seconds. You can increase this timeout by "
                 "setting the X_SERVER_TIMEOUT environment variable.") == 1  # a setting, no RL environment
    assert alone("RuntimeError: the environment returned no observation for turn 3") == 4
    assert alone("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. See the documentation "
                 "for Memory Management and PYTORCH_CUDA_ALLOC_CONF (environment variables)") is None  # no
    # RL environment in a family's text; an out-of-memory error nothing places has no assumed stage


def test_a_trainer_s_start_banner_ends_start_up(pb):
    """A trainer built on transformers' Trainer (or LLaMA-Factory's PPO loop) prints `***** Running
    training *****` once its models, optimizer and engines are set up: a failure after it that
    nothing else places is in the step that follows (its rollout first), not at start-up; before
    it, start-up."""
    failure = ["RuntimeError: CUDA error: operation not permitted when stream is capturing"]
    banner = ["[INFO|trainer.py:2407] 2026-12-06 08:20:06,854 >> ***** Running training *****",
              "[INFO|trainer.py:2408] 2026-12-06 08:20:06,854 >>   Num examples = 7,473",
              "  0%|          | 0/935 [00:00<?, ?it/s]"]
    v = verdict_of(pb, banner + failure)
    assert (v["last_stage_passed"], v["failed_stage"]) == (1, 2)
    assert verdict_of(pb, failure)["failed_stage"] == 1
    # a banner that only quotes the words is not the banner
    assert verdict_of(pb, ["echo '***** Running training ***** soon'"] + failure)["failed_stage"] == 1


def test_a_message_that_something_could_not_be_loaded_is_set_up(pb):
    """What a start-up loads — a reward model, a library, a checkpoint — is named by a message that
    says it could not be loaded: set-up, not the work the object would do — before any stage
    passed; after, loading is a later phase's work (a weight sync loads weights)."""
    assert stage_of(pb, ["AssertionError: Reward model is not correctly loaded."])[0] == 1
    assert stage_of(pb, ["RuntimeError: Failed to load the reward scorer from /ckpt/rm"])[0] == 1
    assert stage_of(pb, ["AssertionError: Reward model is not correctly scored."])[0] == 5
    step = ["{'loss': 0.1, 'grad_norm': 0.5, 'learning_rate': 1e-06, 'epoch': 0.01}"]
    # after a whole step the words name the work (the reward's), not a set-up
    assert stage_of(pb, step + ["RuntimeError: Failed to load the reward scorer from /ckpt/rm"])[0] == 5


def test_a_check_of_settings_names_settings_not_the_work_they_are_for(pb):
    """A configuration check's message names the settings it compares (TRL's GRPO config: `The
    global train batch size (1 x 1) must be evenly divisible by the number of generations per
    prompt (8)`): the `train` of a setting's name is not the update under way — nothing places it,
    and before any stage passed the lifecycle's start-up stands. Other words in a message still
    name the work that failed."""
    check = ["ValueError: The global train batch size (1 x 1) must be evenly divisible by the number of "
             "generations per prompt (8). Given the current train batch size, the valid values are [1]."]
    assert stage_of(pb, check)[0] == 1
    assert stage_of(pb, ["ValueError: The train batch size exploded while computing the update"])[0] == 7


def test_a_rollout_engine_s_layers_run_a_generation_unless_start_up_encloses_them():
    """vLLM's model executor — its models, their layers and custom ops (`CustomOp.forward` picks
    `forward_cuda`, `forward_native`, vllm-ascend's `forward_oot`) — runs the forward passes of a
    generation; inside the start-up's profile run (`_initialize_kv_caches` → `profile_run`) the
    same frames are start-up's."""
    ops = ['  File "/venv/lib/python3.10/site-packages/vllm/model_executor/custom_op.py", line 16, in forward',
           "    return self._forward_method(*args, **kwargs)",
           '  File "/venv/lib/python3.10/site-packages/vllm/model_executor/layers/activation.py", line 36, in forward_cuda',
           "    out = torch.empty(output_shape, dtype=x.dtype, device=x.device)",
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 264.00 MiB."]
    head = ["Traceback (most recent call last):",
            '  File "/srv/tinyrl/main.py", line 9, in <module>',
            "    main()"]
    union = load_playbook(None)
    assert stage_of(union, head + ops)[0] == 2
    init = ['  File "/venv/lib/python3.10/site-packages/vllm/v1/engine/core.py", line 92, in _initialize_kv_caches',
            "    self.model_executor.determine_available_memory()",
            '  File "/venv/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2201, in profile_run',
            "    hidden_states = self._dummy_run(self.max_num_tokens)"]
    assert stage_of(union, head + init + ops)[0] == 1


def test_a_rollout_engine_put_to_sleep_leaves_the_trainer_s_passes_under_way(pb):
    """A colocated trainer puts its vLLM engine to sleep once the generation is over: a failure
    after that nothing else places is in the trainer's passes over the batch (training_data); once
    the engine wakes up again, the next step's rollout is under way."""
    union = load_playbook(None)
    sleep = ["(VllmGenerationWorker pid=33) INFO 06-24 09:11:00 [gpu_worker.py:175] Sleep mode freed 106.05 GiB memory, 9.47 GiB memory is still in use.",
             "(VllmGenerationWorker pid=33) INFO 06-24 09:11:00 [abstract.py:331] It took 1.106435 seconds to fall asleep."]
    failure = ["(PolicyWorker pid=44) Fatal Python error: Aborted"]
    assert stage_of(union, failure)[0] == 1
    assert stage_of(union, sleep + failure)[0] == 6
    woke = ["(VllmGenerationWorker pid=33) INFO 06-24 09:12:00 [abstract.py:331] It took 0.9 seconds to wake up tags ['weights']."]
    assert stage_of(union, sleep + woke + failure)[0] == 2


def test_a_model_s_generate_is_a_completion_in_any_framework(pb):
    """A PPO loop that calls the policy's `generate` (transformers' GenerationMixin, TRL's value-head
    wrapper) is generating completions, whatever playbook reads it; a rollout manager's Ray method
    `RolloutManager.generate()` runs a whole rollout, its trajectories (verl's and slime's)."""
    union = load_playbook(None)
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/ppo/trainer.py", line 143, in ppo_train',
           "    queries, responses = self.get_inputs(batch)",
           '  File "/srv/tinyrl/ppo/trainer.py", line 210, in get_inputs',
           "    out = unwrapped_model.generate(**batch)"]
    assert stage_of(union, log)[0] == 2
    wrapper = ["ray.exceptions.RayTaskError(TimeoutError): ray::RolloutManager.generate() (pid=1694029, ip=10.0.0.1)"]
    assert stage_of(union, wrapper)[0] == 4


def test_a_model_loaded_without_the_engine_its_trainer_asks_for_is_the_configuration(pb):
    """Unsloth attaches a vLLM engine to a model only when asked to (fast_inference=True); a trainer
    set to generate with vLLM then finds no `vllm_engine` on it: the loading flag, at start-up —
    another attribute missing on a library's class stays the library version's."""
    union = load_playbook(None)
    v = verdict_of(union, ["AttributeError: 'Qwen2ForCausalLM' object has no attribute 'vllm_engine'"])
    assert (v["failed_stage"], v["root_cause"]["category"]) == (1, "config_mismatch")
    other = verdict_of(union, ["AttributeError: 'Qwen2ForCausalLM' object has no attribute 'fast_generate_batches'"])
    assert other["root_cause"]["category"] == "version_incompat"


@pytest.mark.parametrize("lines, stage", [
    (["httpx.HTTPStatusError: Server error '502 Bad Gateway' for url 'http://10.0.0.7:30000/generate'"], 2),
    (["requests.exceptions.HTTPError: 500 Server Error: Internal Server Error for url: http://127.0.0.1:8000/v1/chat/completions"], 2),
    (["RuntimeError: Failed after 3 retries each. Payload: {}.", "Addr: 10.0.0.7:4000",
      "Endpoint: /tinyrl_update_weights", "Last error: ClientResponseError(status=400, message='Bad Request')"], 2),
    (["aiohttp.client_exceptions.ClientResponseError: 500, message='Internal Server Error', url='http://10.0.0.7:9000/score'"], 5),
])
def test_a_failed_request_is_the_work_its_url_asks_for(pb, lines, stage):
    """A client's error names the request that failed by its URL (httpx's and requests'
    raise_for_status, aiohttp's ClientResponseError, a framework's `Endpoint:` line): its path asks
    the server for a stage's work, whichever family the error is."""
    assert stage_of(pb, lines)[0] == stage


def test_a_file_s_url_asks_for_a_file_not_for_work(pb):
    log = ["requests.exceptions.HTTPError: 404 Client Error: Not Found for url: https://hub.example/org/tiny-rm/resolve/main/adapter_config.json"]
    assert stage_of(pb, log)[0] == 1  # nothing else places it: start-up, not the reward model's work


def test_a_traceback_s_raise_statement_is_code_not_the_error_it_builds(pb):
    """A paste that starts inside a traceback shows a frame's source line without its frame:
    `raise RuntimeError(f"NCCL error: …")` is code; the exception printed after it is the error."""
    log = ['    raise RuntimeError(f"NCCL error: {error_str}")',
           "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"]
    assert stage_of(pb, log)[1].startswith("RuntimeError: NCCL error: unhandled system error")


def test_an_out_of_memory_error_nothing_places_has_no_assumed_stage(pb):
    """Memory runs out where usage peaks, which a killer from outside or an allocator's error with
    no frames does not say: no start-up is assumed for it (an error of another family still is)."""
    kill = ["ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory."]
    v = verdict_of(pb, kill)
    assert (v["outcome"], v["failed_stage"], v["stage_basis"], v["root_cause"]["category"]) == ("crash", None, None, "oom")
    assert verdict_of(pb, ["RuntimeError: the widget broke"])["failed_stage"] == 1
    placed = ["Traceback (most recent call last):",
              '  File "/srv/tinyrl/trainer.py", line 40, in compute_log_prob',
              "    out = self.model(batch)",
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    assert verdict_of(pb, placed)["failed_stage"] == 6


def test_an_error_s_own_words_name_its_work_over_the_phase_a_bar_says_had_begun(pb):
    """A bar says sequences were being generated; the error says a tool call of an episode timed
    out: the error's own words name the operation it stopped."""
    bar = "Generating sequences:  40%|████      | 4/10 [00:10<00:15,  2.50s/it]"
    log = [bar, "ERROR:2026-02-18 04:35:13,188:Error executing tool lookup: Timed out while waiting for response."]
    assert stage_of(pb, log)[0] == 4
    bare = [bar, "ERROR:2026-02-18 04:35:13,188:Error while waiting on call 3: Timed out while waiting for response."]
    assert stage_of(pb, bare)[0] == 2  # words that name no work: the phase under way


def test_two_ranks_on_one_gpu_is_their_placement_not_the_collective_library(pb):
    """NCCL's init finds two ranks on one device and says so before its invalid-usage error."""
    log = ["node7:1422:1422 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 4b000",
           "Traceback (most recent call last):",
           '  File "/srv/tinyrl/run.py", line 9, in <module>',
           "    dist.barrier()",
           "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)"]
    v = verdict_of(pb, log)
    assert (v["failed_stage"], v["root_cause"]["category"], v["root_cause"]["line_no"]) == (1, "config_mismatch", 1)


def test_a_check_of_settings_is_no_verifier_of_answers(pb):
    """`verify_with_parallel_config`, `_verify_args`: a check of settings as an object is built; a
    verifier's `verify` scores an answer."""
    def at(func, module="/venv/lib/python3.11/site-packages/tinyengine/config.py"):
        return stage_of(pb, ["Traceback (most recent call last):",
                             '  File "/venv/lib/python3.11/site-packages/tinyengine/config.py", line 3560, in __post_init__',
                             "    self.model_config.check(self.parallel_config)",
                             f'  File "{module}", line 775, in {func}',
                             "    assert self.seed is not None, (",
                             "AssertionError: Seed must be set when using the external launcher"])[0]
    assert at("verify_with_parallel_config") == 1
    assert at("_verify_args") == 1
    assert at("verify", "/venv/lib/python3.11/site-packages/tinygrader/grader.py") == 5


def test_a_frame_line_whose_head_a_paste_cut_off_is_still_a_frame(pb):
    """A copy that began inside a frame line keeps `….py", line N, in func`: a frame, its
    function placing the failure as any frame's does."""
    log = ['/srv/tinyrl/workers/rollout/weight_loaders.py", line 284, in sync_weights',
           "    local = loaded.full_tensor()",
           "AttributeError: 'Tensor' object has no attribute 'full_tensor'"]
    v = verdict_of(pb, log)
    assert (v["failed_stage"], v["stage_basis"]) == (2, "placed")
    assert "full_tensor" in v["root_cause"]["text"]


def test_a_builtin_exception_s_message_without_its_type_is_still_the_exception(pb):
    """CPython's own messages, pasted without the `TypeError: ` before them: the exception line of
    the traceback they end, or an error on their own — a crash, not a run gone silent."""
    log = ['  File "/srv/tinyrl/trainer.py", line 690, in compute_loss',
           '    prompt_ids = inputs["prompt_ids"]',
           "list indices must be integers or slices, not str"]
    v = verdict_of(pb, log)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["text"]) == \
        ("crash", 7, "list indices must be integers or slices, not str")
    alone = verdict_of(pb, ["TinyTrainer.forward_pass() got an unexpected keyword argument 'response_masks'"])
    assert (alone["outcome"], alone["root_cause"]["category"]) == ("crash", "version_incompat")
    # prose that only resembles one is no exception
    assert verdict_of(pb, ["the list indices were checked"])["outcome"] != "crash"


def test_a_compiled_graph_s_error_is_where_its_user_code_frames_say(pb):
    """torch.compile prints the exception and its message first — unindented lines of the call and
    its fake tensors — then `from user code:` and the frames the graph was running."""
    log = ["torch._dynamo.exc.TorchRuntimeError: Failed running call_function <built-in method matmul>(*(FakeTensor(",
           "    size=(1, s0, 32000)),",
           "), FakeTensor(size=(4096, 32000))), **{}):",
           "a and b must have same reduction dim, but got [s0, 32000] X [4096, 32000].",
           "",
           "from user code:",
           '   File "/srv/tinyrl/compiled/TinyTrainer.py", line 80, in compute_loss',
           "    logits = torch.matmul(hidden, lm_head.t())",
           "",
           'Set TORCH_LOGS="+dynamo" and TORCHDYNAMO_VERBOSE=1 for more information']
    v = verdict_of(pb, log)
    assert (v["outcome"], v["failed_stage"], v["root_cause"]["line_no"]) == ("crash", 7, 1)
    # with no user code after it, the message stops running on: later lines are read afresh
    later = log[:4] + [f"step {i}: waiting" for i in range(45)] + ["RuntimeError: the second failure"]
    assert "second failure" in " ".join(f["text"] for f in verdict_of(pb, later)["findings"])


def test_an_async_twin_of_a_set_up_call_is_set_up(pb):
    """`async_` names a coroutine's (or a remote call's) twin of the same work: `async_init_…` sets
    up what the rest of its name says, `async_sync_weights` syncs them."""
    def log(call):
        return ["Traceback (most recent call last):",
                '  File "/srv/tinyrl/driver.py", line 37, in train',
                f"    ray.get(self.policy_group.{call}(self.gen_group))",
                *RAY_GET,
                "RuntimeError: lease lost"]
    assert stage_of(pb, log("async_init_weight_sync"))[0] == 1
    assert stage_of(pb, log("async_sync_weights"))[0] == 2


def test_waiting_for_ray_actors_to_be_ready_is_their_start_up():
    """Ray's `__ray_ready__` returns once an actor's constructor ran: a driver that fails waiting on
    it fails while its actors start, whatever they go on to do."""
    log = ["ERROR 10-05 14:02:14 [launch.py:124] Planner or Learner failed:",
           "ERROR 10-05 14:02:14 [launch.py:124] Traceback (most recent call last):",
           'ERROR 10-05 14:02:14 [launch.py:124]   File "/srv/tinyrl/launch.py", line 78, in run_both',
           "ERROR 10-05 14:02:14 [launch.py:124]     ray.get([planner.__ray_ready__.remote(), learner.__ray_ready__.remote()])",
           *[f"ERROR 10-05 14:02:14 [launch.py:124] {ln}" for ln in RAY_GET]]
    v = verdict_of(load_playbook(None), log)
    assert (v["outcome"], v["failed_stage"], v["stage_basis"]) == ("crash", 1, "placed"), v["root_cause"]


def test_where_a_traceback_was_cut_short_is_no_part_of_its_message(pb):
    """A logged error whose traceback stops inside Ray's `get` (`values, … = worker.get_objects(…)`):
    the frame's statement is no word of the error's message — nothing here names a stage's work,
    the lifecycle's start-up stands (not the `values` of training data)."""
    log = ["ERROR 10-05 14:02:14 [launch.py:124] Job failed:",
           "ERROR 10-05 14:02:14 [launch.py:124] Traceback (most recent call last):",
           'ERROR 10-05 14:02:14 [launch.py:124]   File "/srv/tinyrl/launch.py", line 78, in run_all',
           "ERROR 10-05 14:02:14 [launch.py:124]     ray.get(handles)",
           *[f"ERROR 10-05 14:02:14 [launch.py:124] {ln}" for ln in RAY_GET]]
    v = verdict_of(pb, log)
    assert "cut short" in v["root_cause"]["text"] and v["failed_stage"] == 1, (v["failed_stage"], v["root_cause"])


def test_a_failure_at_start_up_is_where_its_wrapper_says_not_its_process_name():
    """An engine core's process is named for generation; its own error has no frames, and the
    client's report after it says the engine was starting (vLLM's `Engine core initialization
    failed. See root cause above`): start-up. Without that report, the process's name places it."""
    own = ["(EngineCore_DP0 pid=1279) ERROR 03-18 23:23:32 [core.py:1006] AssertionError: the knob is reserved"]
    union = load_playbook(None)
    assert stage_of(union, own + ["RuntimeError: Engine core initialization failed. See root cause above. "
                                  "Failed core proc(s): {}"])[0] == 1
    assert stage_of(union, own)[0] == 2


def test_an_operation_that_failed_during_another_is_an_error(pb):
    """`X failed during Y` (or `while`) says an operation failed, as `Error during …` does: a log whose
    last word it is crashed; a count of failures is no such statement."""
    v = verdict_of(pb, ["INFO step 0 started", "Pushing the weights to the generation engine failed during the swap"])
    assert (v["outcome"], v["failed_stage"]) == ("crash", 2), v["root_cause"]
    assert verdict_of(pb, ["INFO step 0 started", "requests: 12 ok, 0 failed during warm-up"])["outcome"] != "crash"


def test_the_attribute_an_object_lacks_is_the_work_it_was_used_for_when_no_frame_says(pb):
    """An AttributeError alone names the attribute the failing statement used (`compute_score` of a
    group: the reward's); a frame of the statement says more (a setting read at set-up)."""
    assert stage_of(pb, ["AttributeError: 'tuple' object has no attribute 'compute_score'"])[0] == 5
    framed = ["Traceback (most recent call last):",
              '  File "/srv/tinyrl/setup.py", line 3, in build_workers',
              "    path = cfg.reward_model.path",
              "AttributeError: 'Config' object has no attribute 'reward_model'"]
    assert stage_of(pb, framed)[0] == 1


def test_a_step_numbered_past_the_first_two_says_start_up_was_over(pb):
    """A training step counted past the first two (`Step 3 produced …`, `iteration 12`) ran on engines
    that had started: an error nothing places after it is the next step's, its rollout — not
    start-up, which the lifecycle assumes when no stage passed. Step 0 or 1 (either end of a
    counter) and a setting that counts steps (`max_steps: 50`, `save_steps=3`) say nothing."""
    err = "RuntimeError: lease lost"
    assert stage_of(pb, ["INFO Step 3 produced 0 training samples", err])[0] == 2
    assert stage_of(pb, ["iteration       12/    500 | consumed samples: 96", err])[0] == 2
    for said in ("INFO step 1 begins", "max_steps: 50, save_steps=3, warmup_steps 4"):
        assert stage_of(pb, [said, err])[0] == 1, said


def test_a_ppo_trainer_s_batched_forward_pass_computes_the_training_data(pb):
    """TRL's PPOTrainer (and the trainers that subclass it) computes a batch's old and reference
    log-probs and its values in `batched_forward_pass`: a call of it that fails is the training data's."""
    assert stage_of(pb, ["TinyPPOTrainer.batched_forward_pass() got an unexpected keyword argument 'masks'"])[0] == 6


def test_torchrun_stopped_by_a_signal_ends_the_run_as_a_crash(pb):
    """torchrun's agent that is sent a signal says so and stops its workers: the run ended there,
    a crash whose cause lies with whoever sent it (its root the agent's line until another error says more)."""
    log = ["[default0]:12:13:46    INFO Waiting for training batch to arrive",
           "W1130 12:13:49.388000 124326 torch/distributed/elastic/agent/server/api.py:723] Received 15 death signal, "
           "shutting down workers",
           "W1130 12:13:49.389000 124326 torch/distributed/elastic/multiprocessing/api.py:900] Sending process 124533 "
           "closing signal SIGTERM"]
    v = verdict_of(pb, log)
    assert v["outcome"] == "crash" and "death signal" in v["root_cause"]["text"], (v["outcome"], v["root_cause"])
    v = verdict_of(pb, ["RuntimeError: the orchestrator lost its server"] + log)
    assert v["root_cause"]["text"].startswith("RuntimeError: the orchestrator"), v["root_cause"]


def test_a_gpu_exception_the_driver_s_core_dump_caught_is_a_device_runtime_error(pb):
    """With CUDA_ENABLE_COREDUMP_ON_EXCEPTION set, the driver reports the GPU exception it dumped
    (cudadebugger.h's CUDBGException_t by name and value), then the dump's device, SM, warp and stack."""
    log = ["(TinyEngine pid=12) [08:52:36.868726] coredump: Detected an exception of type "
           "CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS (14)",
           "(TinyEngine pid=12) [08:52:36.868733] coredump:   - Device: 0",
           "(TinyEngine pid=12) [08:52:36.877622] coredump: Stack trace (lane masks: active 0xFFFFFFFF, valid 0xFFFFFFFF):"]
    v = verdict_of(pb, log)
    assert (v["outcome"], v["root_cause"]["category"], v["root_cause"]["line_no"]) == ("crash", "device_runtime_error", 1), v


def test_a_step_s_summary_between_bars_that_reports_a_loss_is_an_update(pb):
    """A trainer's one-line step summary, fields between bars (`Step 7 | Time: 2.1s | Loss: 0.31 |
    Grad. Norm: 0.82 | …`): the update of that step is done and its values are judged — a gradient
    norm of zero at every step is a wrong result; a rollout's summary (a reward, no loss) is no update."""
    def step(i, loss, gn):
        return f"12:00:{i:02d} SUCCESS Step {i} | Time: 2.10s | Loss: {loss} | Entropy: 0.35 | Grad. Norm: {gn} | LR: 3.00e-06"
    v = verdict_of(pb, [step(i, 0.31, 0.82) for i in range(1, 4)])
    assert (v["outcome"], v["last_stage_passed"]) == ("pass", 7), v["root_cause"]
    v = verdict_of(pb, [step(i, "0.0000", "0.0000") for i in range(1, 4)])
    assert (v["outcome"], v["root_cause"]["signature"]) == ("wrong_result", "grad_norm_zero"), v["root_cause"]
    v = verdict_of(pb, [f"12:00:0{i} SUCCESS Step {i} | Time: 2.20s | Reward: 0.99 | Seq. Length: 332.0 tokens/sample"
                        for i in range(1, 4)])
    assert v["outcome"] != "pass" and v["last_stage_passed"] != 7, v


def test_a_model_class_names_its_architecture_not_the_phase_that_called_it(pb):
    """transformers names a model `<Architecture>For<Head>`: `…ForConditionalGeneration`'s forward
    computes log-probs and the loss as well as a generation's next token, so its name places no
    failure in the generation; a method of another class still reads by its class."""
    from harness.analyze.callpath import path_stage

    msg = "TypeError: Qwen2_5_VLForConditionalGeneration.forward() got an unexpected keyword argument 'logits_to_keep'"
    v = verdict_of(pb, [msg])
    assert (v["failed_stage"], v["stage_basis"]) == (1, "lifecycle"), v["stage_basis"]
    assert path_stage(pb, [["LlamaForCausalLM.forward()"]]) is None
    assert path_stage(pb, [["RolloutGenerator.forward()"]]) == 2


def test_a_wrapper_s_traceback_cut_short_is_the_failing_call_s_own_path():
    """vLLM's `WorkerProc hit an exception.` heads the traceback of what its worker ran; cut short
    before its exception, those frames are still where it was raised: the communicator a trainer
    asked the worker to set up is start-up, though the process is an engine's worker."""
    def log(func, code):
        head = "(Worker_TP1 pid=35) ERROR 09-26 15:11:03 [multiproc_executor.py:654] "
        return [head + "WorkerProc hit an exception.",
                head + "Traceback (most recent call last):",
                head + '  File "/venv/vllm/v1/executor/multiproc_executor.py", line 649, in worker_busy_loop',
                head + "    output = func(*args, **kwargs)",
                head + f'  File "/srv/tinyrl/serve.py", line 108, in {func}',
                head + f"    {code}",
                "INFO 09-26 15:11:04 [launcher.py:80] Shutting down"]
    union = load_playbook(None)
    assert stage_of(union, log("init_communicator", "self.comm = PeerCommunicator(group, device=self.device)"))[0] == 1
    assert stage_of(union, log("execute_model", "return self.model_runner.execute_model(batch)"))[0] == 2


def test_a_function_named_by_a_verb_alone_does_it_to_what_its_package_holds(pb):
    """`save` in Megatron's `dist_checkpointing` package saves a checkpoint (the update's): the
    verb read with a noun of the names it lives among; a noun that names a stage alone
    (`update_weight/…py in <genexpr>`) or a package that names no object leaves it unread."""
    from harness.analyze.callpath import path_stage

    save = 'File "/venv/lib/python3.10/site-packages/megatron/core/dist_checkpointing/serialization.py", line 396, in save'
    assert path_stage(pb, [[save]]) == 7
    assert path_stage(pb, [['File "/srv/tinyrl/io/files.py", line 12, in save']]) is None
    genexpr = 'File "/srv/tinyrl/update_weight/iterator.py", line 167, in <genexpr>'
    assert path_stage(pb, [[genexpr]]) != 7


def test_weights_synced_with_the_model_named_between_are_a_weight_sync(pb):
    """`sync_model_weights` copies the actor's weights into the rollout engine as `sync_weights`
    does, the model named between verb and weights: completion, not the start-up an engine's
    weight loader would be read as."""
    lines = ["Traceback (most recent call last):",
             '  File "/srv/tinyrl/trainer.py", line 310, in step',
             "    self.engine.sync_model_weights(actor_weights, load_format='dtensor')",
             '  File "/srv/tinyrl/third_party/engine_sp.py", line 88, in sync_model_weights',
             "    load_dtensor_weights(actor_weights, self.model)",
             '  File "/srv/tinyrl/third_party/loaders.py", line 51, in load_dtensor_weights',
             "    param = params[name]",
             "KeyError: 'lm_head.weight'"]
    assert stage_of(pb, lines)[0] == 2


def test_a_helper_that_builds_a_mask_names_no_phase_whatever_its_verb(pb):
    """The masks and positions a forward builds serve every phase: `generate_attention_mask` under
    the log-probs is no generation, `_update_causal_mask` no update — the frames outside say the work."""
    def lines(helper):
        return ["Traceback (most recent call last):",
                '  File "/srv/tinyrl/workers.py", line 40, in compute_ref_log_prob',
                "    out = self.ref.forward_batch(data)",
                '  File "/srv/tinyrl/model/attention.py", line 77, in forward',
                f"    mask = {helper}(self.config)",
                f'  File "/srv/tinyrl/model/masks.py", line 21, in {helper}',
                "    raise RuntimeError('set micro_batch_size in the config')",
                "RuntimeError: set micro_batch_size in the config"]
    assert stage_of(pb, lines("generate_attention_mask"))[0] == 6
    assert stage_of(pb, lines("_update_causal_mask"))[0] == 6


def test_a_command_line_dispatcher_relays_the_call_and_names_no_phase(pb):
    """python-fire's `_CallAndUpdateTrace` (and click's, typer's, Hydra's, absl's dispatch) calls the
    script's main: no update; the script's own frames name the work."""
    from harness.analyze.callpath import path_stage

    fire = 'File "/venv/lib/python3.11/site-packages/fire/core.py", line 684, in _CallAndUpdateTrace'
    assert path_stage(pb, [[fire]]) is None
    hydra = 'File "/venv/lib/python3.11/site-packages/hydra/_internal/utils.py", line 223, in run_and_report'
    assert path_stage(pb, [[hydra, 'File "/srv/tinyrl/trainer.py", line 80, in compute_log_prob']]) == 6


def test_saving_the_model_or_its_state_is_the_update_s_last_work_a_pickler_s_save_is_not(pb):
    """A model or a trainer's state saved after a step (`save_model`, `save_state`, a flag read
    `…_on_model_save`, in either word order) is the update's; a pickler's `save`, walking
    whatever object it is handed, relays (a dataset's function hashed, a task's arguments sent)."""
    log = ["Traceback (most recent call last):",
           '  File "/srv/tinyrl/loop.py", line 311, in run_epochs',
           "    sd = self.acc.get_state_dict(self.shadow)",
           '  File "/venv/lib/python3.11/site-packages/tinyacc/core.py", line 902, in get_state_dict',
           "    if model.gather_shards_on_model_save():",
           "AttributeError: 'NoneType' object has no attribute 'gather_shards_on_model_save'"]
    assert stage_of(pb, log)[0] == 7
    pickled = ["Traceback (most recent call last):",
               '  File "/srv/tinyrl/prep.py", line 20, in start',
               '  File "/venv/lib/python3.11/site-packages/dill/_dill.py", line 422, in save',
               '  File "/usr/lib/python3.11/pickle.py", line 578, in save',
               "TypeError: cannot pickle '_thread.lock' object"]
    assert stage_of(pb, pickled)[0] == 1  # nothing places it: start-up, not a checkpoint's save


FATAL = ["(EngineWorker pid=41) *** SIGFPE received at time=1700000000 on cpu 3 ***",
         "(EngineWorker pid=41) PC: @     0x7f0000001000  (unknown)  (unknown)",
         "(EngineWorker pid=41) [2026-12-07 10:00:00,001 E 41 41] logging.cc:497: *** SIGFPE received at time=1700000000 on cpu 3 ***",
         "(EngineWorker pid=41) [2026-12-07 10:00:00,001 E 41 41] logging.cc:497: PC: @     0x7f0000001000  (unknown)  (unknown)",
         "(EngineWorker pid=41) Fatal Python error: Floating point exception",
         "(EngineWorker pid=41) ",
         "(EngineWorker pid=41) Stack (most recent call first):",
         '(EngineWorker pid=41)   File "/venv/lib/python3.11/site-packages/vllm/model_executor/layers/logits_processor.py", line 83 in _get_logits',
         '(EngineWorker pid=41)   File "/venv/lib/python3.11/site-packages/vllm/worker/model_runner.py", line 1698 in execute_model',
         '(EngineWorker pid=41)   File "/srv/tinyrl/workers.py", line 55 in run_step']


def test_a_fatal_error_s_stack_is_the_dying_call_s_own_path(pb):
    """faulthandler prints the fatal error, then the frames the signal hit, innermost first: its
    own path (a generation's logits), not the driver's call that waited on the process after."""
    log = FATAL[4:] + ["Traceback (most recent call last):",
                       '  File "/srv/tinyrl/driver.py", line 40, in run_epochs',
                       "    out = self.pool.run_episode_batch(batch)",
                       *RAY_GET,
                       "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."]
    stage, text = stage_of(load_playbook(None), log)  # vllm.yaml knows the engine's frames
    assert (stage, text) == (2, "Fatal Python error: Floating point exception")


def test_a_native_crash_s_report_is_placed_by_the_stack_its_process_dumps_next(pb):
    """Ray's workers report a fatal signal twice: abseil's line (no frames) and then faulthandler's
    stack; the first is the root, the stack just after it in the same process places it. Another
    process's stack does not."""
    union = load_playbook(None)
    stage, text = stage_of(union, FATAL)
    assert (stage, text) == (2, "*** SIGFPE received at time=1700000000 on cpu 3 ***")
    other = FATAL[:4] + [ln.replace("pid=41", "pid=42") for ln in FATAL[4:]]
    assert stage_of(union, other)[0] != 2


def test_the_attribute_a_statement_used_names_its_work_unless_it_sets_up(pb):
    """`'X' object has no attribute 'y'`: the statement under the innermost frame used `y` — a
    dispatch's sampler under a loop whose own names say nothing; inside a set-up frame the same
    lookup reads a setting for whatever work comes later: start-up."""
    def log(func):
        return ["Traceback (most recent call last):",
                f'  File "/srv/tinyrl/run.py", line 484, in {func}',
                '    set_epoch = getattr(loader.sampler, "set_epoch")',
                "AttributeError: 'ShardedLoader' object has no attribute 'sampler'"]
    assert stage_of(pb, log("run_rlhf"))[0] == 3
    assert stage_of(pb, log("init_workers"))[0] == 1
