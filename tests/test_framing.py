"""A log collected through something that heads every line (docker -t, a container runtime, srun
--label, pdsh, docker compose, mpirun --tag-output) reads as the same log without that head; heads
that are the lines' own (metric lines, a rank's repeated error, Ray's prefix) are left alone. Logs
written for the test, with the shipped playbook."""

import json
import re

import pytest

from harness.analyze import Analyzer
from harness.analyze.framing import learn, wrap_width
from harness.analyze.lines import peel
from harness.playbook import load_playbook

pytestmark = pytest.mark.xdist_group("test_framing")

RUN = """\
(TaskRunner pid=311) Training from scratch
(TaskRunner pid=311) step:1 - actor/pg_loss:0.12 - actor/grad_norm:0.41 - critic/score/mean:0.2
(TaskRunner pid=311) step:2 - actor/pg_loss:0.10 - actor/grad_norm:0.38 - critic/score/mean:0.3
Error executing job with overrides: []
Traceback (most recent call last):
  File "/srv/tinyrl/main.py", line 40, in main
    run(cfg)
  File "/srv/tinyrl/trainer.py", line 88, in run
    old = self.actor_group.compute_log_prob(batch)
  File "/srv/tinyrl/worker.py", line 120, in compute_log_prob
    logits = self.model(ids)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.10 GiB
"""

HEADS = {
    "docker -t": lambda i: f"2026-12-04T10:00:{i % 60:02d}.{i * 7919 % 1000000:06d}123Z ",
    "kubectl / CRI": lambda i: f"2026-12-04T10:00:{i % 60:02d}.123456789+00:00 {'stderr' if i % 3 else 'stdout'} F ",
    "srun --label": lambda i: f"{i % 12:>2}: ",
    "pdsh": lambda i: "gpu-node-07: ",
    "docker compose": lambda i: "trainer-1  | ",
    "mpirun --tag-output": lambda i: f"[1,{i % 8}]<stdout>:",
    "a quoted paste": lambda i: "> ",
    "a reply quoting a quote": lambda i: ">> ",
    "an indented paste": lambda i: "  ",  # a list item's code block, a reply that indented the log
    "a paste indented by one blank": lambda i: " ",
}


@pytest.fixture(scope="module")
def pb():
    return load_playbook(None)


def verdict(pb, text: str, lines: int | None = None) -> dict:
    """The verdict on `text` read whole, or `lines` at a time as a followed log comes in (each
    piece cut in the middle of its last line)."""
    a = Analyzer(pb)
    if lines is None:
        a.feed(text.encode())
    else:
        rows = text.splitlines(keepends=True)
        data = [("".join(rows[i:i + lines])).encode() for i in range(0, len(rows), lines)]
        carry = b""
        for piece in data:
            piece = carry + piece
            cut = len(piece) - 5
            a.feed(piece[:cut])
            carry = piece[cut:]
        a.feed(carry)
    a.finish()
    return a.verdict()


def framed(head, text: str) -> str:
    return "".join(head(i) + ln for i, ln in enumerate(text.splitlines(keepends=True)))


def essence(v: dict) -> tuple:
    rc = v["root_cause"] or {}
    return v["outcome"], v["last_stage_passed"], v["failed_stage"], rc.get("category"), rc.get("text")


@pytest.mark.parametrize("tool", sorted(HEADS))
def test_a_log_under_a_collector_s_head_reads_as_the_log_itself(pb, tool):
    plain = essence(verdict(pb, RUN))
    assert plain[2] == 6 and plain[3] == "oom"  # the log itself: a log-prob OOM
    assert essence(verdict(pb, framed(HEADS[tool], RUN))) == plain


METRICS = "".join(f"{{'loss': 0.{i}, 'grad_norm': 0.3, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': 0.0{i}}}\n"
                  for i in range(1, 6)) + "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-06, 'reward': 0.5, 'epoch': 0.06}\n"


@pytest.mark.parametrize("tool", sorted(HEADS))
def test_a_log_of_metric_lines_only_under_a_head_reads_as_the_log_itself(pb, tool):
    """A trainer that prints nothing but its metric dicts: peeled, every line begins as a line the
    playbook reads (a metric line), so the head is the framing — not a run with no update."""
    plain = essence(verdict(pb, METRICS))
    assert plain[0] == "wrong_result" and plain[2] == 7, plain  # the update's NaN
    assert essence(verdict(pb, framed(HEADS[tool], METRICS))) == plain


# a paste that is a py-spy dump of a hung engine worker, and one of a notebook's traceback cut before its
# exception: neither begins with a line of a Python traceback, and a head on them hides that they begin as a log's lines do
DUMP = """\
    all_reduce (vllm/distributed/device_communicators/symm_mem.py:148)
    all_reduce (vllm/distributed/parallel_state.py:132)
    execute_model (vllm/v1/worker/gpu_model_runner.py:2101)
    run_step (tinyrl/engine_worker.py:55)
    _bootstrap (threading.py:1002)
"""
IPYTHON = """\
---------------------------------------------------------------------------
RuntimeError                              Traceback (most recent call last)
Cell In[8], line 14
     12 trainer = Trainer(cfg)
---> 14 trainer.train()
File ~/tinyrl/trainer.py:1132, in Trainer.step(self, batch)
   1130 logits = self.model(batch)
-> 1132 logps = logits.log_softmax(-1)
"""


@pytest.mark.parametrize("tool", ["docker -t", "srun --label", "mpirun --tag-output"])
@pytest.mark.parametrize("log", [DUMP, IPYTHON], ids=["py-spy dump", "IPython traceback"])
def test_a_stack_dump_or_a_notebook_s_traceback_under_a_head_reads_as_itself(pb, tool, log):
    """Peeled, a py-spy dump's frames and IPython's `File ~/x.py:12, in f()` begin as a log's lines
    do, so the head is the framing (and a padded head such as `srun -l`'s does not make indented
    words ending in a parenthesis read as frames)."""
    a = Analyzer(pb)
    a.feed(framed(HEADS[tool], log).encode())
    assert a.framing is not None
    a.finish()
    assert essence(a.verdict()) == essence(verdict(pb, log))


def test_a_head_that_opens_what_it_does_not_close_is_the_lines_own(pb):
    """Every JSON metric line of a log shares `{"loss": 0.` — a collector's head is whole, so the
    timestamp before it is the framing, not the timestamp and the line's first key."""
    lines = [f'2026-12-04T10:00:0{i}.{i}13Z {{"loss": 0.{i}, "grad_norm": 0.3, "reward": 0.5}}' for i in range(1, 9)]
    a = Analyzer(pb)
    a.feed(("\n".join(lines) + "\n").encode())
    assert a.framing is not None and a.framing.split(lines[0])[1] == lines[0].split("Z ", 1)[1]


def test_a_head_with_no_blank_after_it_over_a_deep_traceback_keeps_the_lines_whole(pb):
    """`mpirun --tag-output` puts no blank after its head; when nine lines in ten are a deep
    traceback's indented frames, their indentation is theirs, not the head's: the unindented
    lines (the error record, the exception) are framed too."""
    frames = "".join(f'  File "/srv/tinyrl/layer{i}.py", line {i + 10}, in forward_{i}\n    return self.f{i}(x)\n'
                     for i in range(15))
    log = ("Error executing job with overrides: []\nTraceback (most recent call last):\n" + frames +
           "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB\n")
    plain = essence(verdict(pb, log))
    assert plain[0] == "crash" and plain[3] == "oom" and plain[4].startswith("torch.OutOfMemoryError"), plain
    assert essence(verdict(pb, framed(HEADS["mpirun --tag-output"], log))) == plain


def test_the_head_is_learned_as_a_followed_log_comes_in_pieces(pb):
    """A followed log learns its framing from what has come so far: from the second whole line
    on. (A first piece of one line is read before any framing can be known.)"""
    plain = essence(verdict(pb, RUN))
    for tool in HEADS:
        assert essence(verdict(pb, framed(HEADS[tool], RUN), lines=3)) == plain, tool


def test_the_line_keeps_its_own_indentation_under_the_head(pb):
    a = Analyzer(pb)
    a.feed(framed(HEADS["docker -t"], RUN).encode())
    a.finish()
    f = next(iter(a.findings.values()))
    assert any(ln.startswith('  File "/srv/tinyrl/worker.py"') for ln in f.lines)


def test_a_quoted_paste_of_metric_lines_is_framed_by_its_quote_mark(pb):
    """Every quoted line starts `> {'loss': `: the longest head shared is the lines' own, the quote
    mark before it is the framing; without the quote the same lines have none."""
    def learned(lines):
        return learn(lines, lambda t: len(peel(t, pb.prefixes)[2]))
    metrics = [f"{{'loss': 0.{i}, 'grad_norm': 0.3, 'reward': 0.5, 'epoch': {i / 100}}}" for i in range(1, 30)]
    assert learned(metrics) is None
    for quote in ("> ", ">> ", "> > "):
        f = learned([quote + m for m in metrics])
        assert f is not None and f.split(quote + metrics[0]) == (quote.rstrip(" ") + " ", metrics[0]), quote


def test_heads_that_are_the_lines_own_are_not_a_framing(pb):
    def learned(lines):
        return learn(lines, lambda t: len(peel(t, pb.prefixes)[2]))
    metrics = [f"step:{i} - actor/pg_loss:0.1 - actor/grad_norm:0.3" for i in range(1, 30)]
    assert learned(metrics) is None
    ranks = ["RuntimeError: NCCL communicator was aborted on rank 3."] * 8
    assert learned(ranks) is None
    one_actor = [f"(WorkerDict pid=4242) step {i} done" for i in range(20)] + \
                ['(WorkerDict pid=4242)   File "/srv/w.py", line 3, in f']
    assert learned(one_actor) is None  # Ray's prefix is the playbook's: its actor name is kept
    levels = [f"2026-12-04 10:00:{i:02d} {'INFO' if i % 4 else 'WARNING'} worker ready {i}" for i in range(20)]
    rx = learned(levels)
    assert rx is None or not re.search(r"INFO|WARNING", rx.pattern, re.I)  # a logger's level is the line's own


def test_words_each_line_has_of_its_own_are_no_framing(pb):
    """A word and a blank begin any line of prose: a short log whose lines begin with a word each
    (two of them the same, over frames) is read as written — its last line whole; one word on every
    line, a host's name, still frames them."""
    def learned(lines):
        return learn(lines, lambda t: len(peel(t, pb.prefixes)[2]))
    lines = ['x  File "/srv/a.py", line 3, in f', 'x  File "/srv/c.py", line 4, in g', "waiting for the server"]
    assert learned(lines) is None
    a = Analyzer(pb)
    a.feed(("\n".join(lines) + "\n").encode(), ts=1000.0)
    a.finish()
    v = a.verdict(now=1000.0 + 7200)  # silent for two hours: hung after its last line, read whole
    assert (v["outcome"], v["root_cause"]["text"]) == ("hang", "waiting for the server"), v["root_cause"]
    hosted = [f"gpunode  {ln}" for ln in ['Traceback (most recent call last):', '  File "/srv/a.py", line 3, in f',
                                          "    run()", "ValueError: bad batch"]]
    assert learned(hosted) is not None


def test_a_framing_with_a_ray_prefix_under_it_peels_both(pb):
    text = framed(HEADS["pdsh"], RUN)
    a = Analyzer(pb)
    a.feed(text.encode())
    a.finish()
    assert a.framing is not None and a.framing.split("gpu-node-07: x") == ("gpu-node-07: ", "x")
    v = a.verdict()
    assert v["last_stage_passed"] >= 1 and v["root_cause"]["text"].startswith("torch.OutOfMemoryError")


def test_a_traceback_pasted_without_its_indentation_keeps_its_shape(pb):
    """Frames, their statements and Python's carets at column 0 (an issue's paste, a logger
    that strips lines) are still a traceback: the same root, the same call path, the same stage."""
    tb = RUN.replace("    logits = self.model(ids)\n", "    logits = self.model(ids)\n             ^^^^^^^^^^^^^^^\n")
    plain = essence(verdict(pb, tb))
    flat = "".join(ln.lstrip() if ln.strip() else ln for ln in tb.splitlines(keepends=True))
    assert essence(verdict(pb, flat)) == plain
    # a statement that raises, at column 0, is the frame's source line, not a second error
    raising = ("Traceback (most recent call last):\n"
               'File "/srv/tinyrl/net.py", line 9, in resolve\n'
               "raise NameResolutionError(host, self, e) from e\n"
               "urllib3.exceptions.NameResolutionError: Failed to resolve 'hub.example' ([Errno -3] "
               "Temporary failure in name resolution)\n")
    a = Analyzer(pb)
    a.feed(raising.encode())
    a.finish()
    assert [f.text[:40] for f in a.findings.values()] == ["urllib3.exceptions.NameResolutionError: "]


def docker_json(text: str) -> str:
    """As docker's json-file driver stores a container's output: one JSON object per line, Go's
    encoder escaping `<`, `>` and `&`."""
    out = []
    for i, ln in enumerate(text.splitlines(keepends=True)):
        rec = json.dumps({"log": ln, "stream": "stderr" if "Error" in ln else "stdout",
                          "time": f"2026-12-04T10:00:{i % 60:02d}.123456789Z"})
        out.append(rec.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026") + "\n")
    return "".join(out)


def test_a_container_s_json_log_file_reads_as_its_output(pb):
    tb = RUN.replace("Tried to allocate", "<ray> Tried to allocate")  # escaped in the file
    plain = essence(verdict(pb, tb))
    assert essence(verdict(pb, docker_json(tb))) == plain
    assert essence(verdict(pb, docker_json(tb), lines=3)) == plain
    # JSON lines that are the run's own records (no text field) are read as they are
    records = "".join(json.dumps({"step": i, "loss": 0.1}) + "\n" for i in range(5))
    a = Analyzer(pb)
    a.feed(records.encode())
    assert a.framing is None


WIDE = RUN.replace("Training from scratch", "Training from scratch: the run's configuration was read from "
                   "/srv/tinyrl/configs/ppo_megatron_trainer.yaml with 12 overrides") \
    .replace("Error executing job with overrides: []", "Error executing job with overrides: "
             "['trainer.n_gpus_per_node=8', 'actor_rollout_ref.rollout.tensor_model_parallel_size=2']") \
    .replace("of 79.10 GiB\n", "of 79.10 GiB of which 3.19 GiB is free. Including non-PyTorch memory, this process "
             "has 75.90 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch\n")


def hard_wrapped(text: str, width: int) -> str:
    """`text` as a terminal of `width` columns shows it, copied from the screen: each line broken
    into pieces of exactly `width` characters and a shorter rest."""
    out = []
    for ln in text.splitlines():
        out += [ln[i:i + width] for i in range(0, len(ln), width)] or [""]
    return "".join(x + "\n" for x in out)


@pytest.mark.parametrize("width", [80, 97])
def test_a_paste_a_terminal_hard_wrapped_reads_as_its_lines(pb, width):
    """Copied from a terminal's screen, every long line is broken at the terminal's width, mid-word:
    the pieces are read as the line they were (the exception's text whole — three pieces —, its stage
    from the frames), whole or as a followed log comes in pieces cut anywhere."""
    want = essence(verdict(pb, WIDE))
    assert want[0] == "crash" and want[4].endswith("70.12 GiB is allocated by PyTorch"), want
    wrapped = hard_wrapped(WIDE, width)
    assert max(map(len, wrapped.splitlines())) == width
    assert essence(verdict(pb, wrapped)) == want
    assert essence(verdict(pb, wrapped, lines=3)) == want
    # collected under a head on each physical line (the terminal showed `docker logs -t`'s output)
    for tool in ("docker -t", "srun --label"):
        assert essence(verdict(pb, framed(HEADS[tool], wrapped))) == want, tool


def test_lines_of_one_format_or_a_table_as_wide_as_each_other_are_no_wrap():
    """Lines equally wide because they share a format (a trainer's fixed-width timing line each step,
    a collector's cut at a width), or a table's rows, are lines of their own: no wrap is learned."""
    timing = [f"|E2E latency=2.0{i}s |Gather latency=0.00s (0.00%) |Generate time=1.5{i}s (74.8{i}%) "
              f"|Training time=0.4{i}s (20.3{i}%) |Others=0.10 (4.7{i}%)" for i in range(6)]
    assert len({len(t) for t in timing}) == 1 and wrap_width(timing) is None
    table = [f"| {i}  NVIDIA A100-SXM4-80GB  On | 00000000:{i}7:00.0 Off | 0 |" + " " * 30 + "|" for i in range(6)]
    assert wrap_width(table) is None
    pieces = hard_wrapped(WIDE, 80).splitlines()
    assert wrap_width(pieces) == 80


def test_pieces_of_a_wrapped_line_held_for_their_rest_are_read_when_the_log_goes_quiet(pb):
    """A followed log whose last line so far is a full-width piece: it waits for its rest, and is
    read as it is when the log goes quiet (a run that stopped printing there)."""
    pieces = hard_wrapped(WIDE, 80).splitlines(keepends=True)
    assert len(pieces[-1].rstrip("\n")) < 80 and len(pieces[-2].rstrip("\n")) == 80
    a = Analyzer(pb)
    a.feed("".join(pieces[:-1]).encode())
    assert pieces[-2].rstrip("\n") not in "\n".join(a.tail)  # held: its rest may still come
    a.quiet()
    assert a.tail[-1].endswith(pieces[-2].rstrip("\n")), a.tail[-3:]
