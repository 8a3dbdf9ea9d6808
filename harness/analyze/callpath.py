"""The stage of a failure read from its call path: the names of the frames of a traceback and of
the Ray methods it passed through, innermost first, against the playbook's `stage_words`.

Stage hints of the playbook (regexes on frames and methods) and the words are read innermost first
in each group of names: whichever names the innermost entry decides. Each frame gives three names —
its function, then its module (`reward_manager.py in __call__` is a reward), then its package
(`math_verify/utils.py in handler` is a verifier's) —, a Ray method two — the method, then its
class. Frames of modules that only relay a call (the playbook's `plumbing`: Ray's `get`, asyncio,
contextlib…) are skipped. The source line printed under a frame adds the names it calls, as if
they were frames inside it:
`old_log_prob = self.actor_rollout_wg.compute_log_prob(batch)` under `fit` is computing
log-probs (a remote call's own frames are Ray's, skipped as plumbing); the name it gives the
result (`ref_logprobs, … = self.batched_forward_pass(…)`) says what the frames inside compute when
no function there names it. Set-up words (`weak`,
engine_start's) count only when nothing on the path names a stage's work: a tensor built inside
`compute_log_prob` is training_data, not engine_start.
"""

from __future__ import annotations

import builtins
import re

from ..chain import STAGE_NO
from ..playbook import Playbook, lemma, name_words
from .blocks import FRAME
from .stacks import REMOTE_WAIT


def _names(pb: Playbook, entry: str) -> list[str]:
    m = FRAME.match(entry)
    if m:
        path, func = m[1], m[3]
        if pb.plumbing is not None and pb.plumbing.search(path):
            return []
        parts = path.rsplit("/", 2)
        module = parts[-1].rsplit(".", 1)[0]
        if module == "__init__" and len(parts) > 1:  # a package's own file: the package names it
            module = parts[-2]
        return [func, module, *parts[-2:-1]]  # its package last (`math_verify/utils.py`: a verifier)
    cls, _, method = entry.rstrip("()").rpartition(".")
    if MODEL_CLASS.fullmatch(cls):  # a model's architecture, whatever it serves: its forward computes log-probs,
        return [method]          # values and the update's loss as well as a generation's next token
    return [method, cls] if cls else [entry]


# transformers names a model class `<Architecture>For<Head>` (`Qwen2_5_VLForConditionalGeneration`,
# `LlamaForCausalLM`, `…ForSequenceClassification`; GPT-2's `GPT2LMHeadModel`; TRL's value-head
# wrapper `AutoModelForCausalLMWithValueHead`): its head's name, not the phase that calls it.
MODEL_CLASS = re.compile(r"\b\w+?(?:For(?:Conditional|Causal)?(?:Generation|LM|SequenceClassification|"
                         r"TokenClassification)(?:WithValueHead)?|LMHeadModel)\b")


# `with self.rollout_sharding_manager:` — a frame on that line runs the manager's __enter__ or
# __exit__ (a traceback shows the `with` line for both), whatever frames come inside it: the
# manager names the work (a rollout's weight sync), not the generic wrappers (a profiler's, a
# timer's) its methods pass through.
WITH = re.compile(r"^(?:async\s+)?with\s+(?:(?P<bare>[A-Za-z_][\w.]*)(?:\s+as\s+\w+)?\s*:)?")
CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")
_BUILTINS = frozenset(dir(builtins))


def calls(code: str) -> list[str]:
    """The functions a source line calls, as names (`x.remote(…)` names `x`; a class called is
    an object being built, `__init__`), builtins and the exception a `raise` builds left out."""
    if code.startswith("raise "):
        return []
    if (m := WITH.match(code)) and m["bare"]:  # entering a context manager calls its __enter__
        code = m["bare"] + "()"
    out = []
    for dotted in CALL.findall(code):
        parts = [p for p in dotted.split(".") if p and p != "remote"]
        if not parts or parts[-1] in _BUILTINS or parts[-1] in ("self", "cls"):
            continue
        out.append("__init__" if _is_class(parts[-1]) else parts[-1])
    return out


BRANDED = re.compile(r"[a-z]{1,2}[A-Z]{2,}[a-z]")  # a brand in lower case, its acronym, a word


def _is_class(name: str) -> bool:
    """A class's name, by Python's convention (`RolloutWorker`, not a CONSTANT), or one led by a
    brand spelled in lower case before its acronym (verl's `vLLMRollout`, `vLLMHttpServer`), or a
    variable that holds a class by its name (`reward_manager_cls(tokenizer=…)` in verl's main_ppo,
    `worker_cls`, `model_class`: PEP 8's `cls`)."""
    return ((name[0].isupper() and not name.isupper()) or BRANDED.match(name) is not None
            or name.endswith(("_cls", "_class")))


# `ref_logprobs, ref_logits, _, _ = self.batched_forward_pass(…)`: what a caller names the result
# of a call says what the call computes, where the called function's own name is generic (a
# forward pass serves log-probs, values and the update alike). TRL's PPOTrainer.step
# (`ref_logprobs, … = self.batched_forward_pass(`: tests/corpus/realworld26/2630), verl's
# RayPPOTrainer.fit (`old_log_prob = self.actor_rollout_wg.compute_log_prob(batch)`,
# `values = self.critic_wg.compute_values(batch)`), OpenRLHF's experience maker
# (`action_log_probs = self.actor(…)`, `value = self.critic(…)`).
ASSIGNED = re.compile(r"^(?P<targets>[A-Za-z_][\w.]*(?:\s*,\s*\*?[A-Za-z_][\w.]*)*)\s*(?::[^=]*)?=(?!=)\s*\S.*\(")


TARGET = "="  # an entry that is a name a result was assigned to, not a function


def assigned(code: str) -> list[str]:
    """The names a source line assigns a call's result to (`self.values` → `=values`), `_` left
    out; none when the call builds an object (`self.rollout = self._build_rollout(…)`,
    `loader = DataLoader(…)`): the name is then the object's, not the work of the frames inside."""
    if (m := ASSIGNED.match(code)) is None:
        return []
    called = (calls(code) or [""])[0]
    if called == "__init__" or (name_words(called) or ("",))[0] in SETUP_VERBS:
        return []
    names = [t.strip().lstrip("*").rpartition(".")[2] for t in m["targets"].split(",")]
    return [TARGET + n for n in names if n.strip("_")]


ARGS = re.compile(r"\((?P<args>[^()]*)\)\s*$")
HANDED = re.compile(r"^\s*(?:\w+\s*=\s*)?(?:self\.)?(?P<name>[A-Za-z_]\w*)\s*$")


def handed(code: str) -> list[str]:
    """The one value a source line's call is handed by name (`batch = batch.union(gen_batch_output)`
    → `=gen_batch_output`): a call that merges or checks what a phase returned (verl's trainer
    joining the generation's output to its batch: tests/corpus/realworld38/3802,
    realworld39/3904, 3906) fails on that phase's product, where neither the call (`union`) nor
    the name it assigns (`batch`) says whose."""
    if (m := ARGS.search(code)) is None or (h := HANDED.match(m["args"])) is None:
        return []  # one value, by its name: several (`self.loss(old_logprobs, values, rewards, …)`) say no one phase
    return [TARGET + h["name"]] if h["name"] not in ("self", "cls") and h["name"].strip("_") else []


# An attribute's lookup (torch nn.Module.__getattr__ raising `'ActorCritic' object has no attribute
# 'module'`: tests/corpus/realworld52/5219) runs before the call its line makes on what it finds: the
# caller's line says which work was about to run (`self.actor_critic.module.generate(`).
LOOKUPS = frozenset(("__getattr__", "__getattribute__"))


def with_calls(pb: Playbook, frames: list[str], code: dict[int, str]) -> list[str]:
    """A segment's frames, each followed by the calls of its source line (none in plumbing) when
    the traceback does not show that call itself: under the innermost frame, or above frames that
    only relay it (a remote call: Ray's own frames). Above a frame of the code it called, the
    line's other calls had returned (`SwiftRLHF(args).main()` built the object, then failed in
    `main`) — except a `with` line's manager, whose __enter__ the frames inside are (`WITH`).
    Above frames of the code it called, the names the line assigns the call's result to
    (`ASSIGNED`) come first: they name what those frames compute (the innermost frame's own
    statement names a local value: `entropy_list = torch.split(…)` inside the loss), then the one
    value the call is handed by name (`handed`)."""
    def relay(fr: str) -> bool:
        m = FRAME.match(fr)
        return bool(m and ((pb.plumbing is not None and pb.plumbing.search(m[1])) or m[3] in LOOKUPS))

    own = max((i for i, fr in enumerate(frames) if not relay(fr)), default=-1)  # the last one not relayed
    out = []
    for i, fr in enumerate(frames):
        out.append(fr)
        if i in code and FRAME.match(fr) and i < own and not relay(fr):  # the frames inside compute it
            out.extend(assigned(code[i]) + handed(code[i]))
        if i in code and FRAME.match(fr) and (i == own or WITH.match(code[i])):
            out.extend(calls(code[i]))
    return out


def _stage(pb: Playbook, words: tuple[str, ...], prose: bool = False) -> tuple[int, str] | None:
    """(stage, kind: "", "weak" or "loop") of the longest phrase in `words` (phrases are sorted
    longest first): `actor_rollout_init_model` is set-up (init_model), not a rollout; none when
    that phrase is a neutral one (`forward_backward_func` is no `backward`'s update). In `prose`,
    of phrases as long, the one said first: a sentence names its subject before what it goes on
    about (TRL's `KL divergence is starting to become negative … the generation kwargs are not
    correctly set`: the KL's values, not a generation — tests/corpus/realworld28/2827,
    realworld34/3426)."""
    lemmas = tuple(map(lemma, words))
    found, length, first = None, 0, len(words)  # the (stage, kind) said first of the longest phrases found
    for phrase, stage, kind in pb.stage_words:
        if found is not None and len(phrase) < length:
            break
        mine = _worded(words, lemmas, phrase)
        # a loop's name is the whole name
        at = (0 if mine == phrase else None) if kind == "loop" else _contains(mine, phrase)
        if at is not None and at < first:
            found, length, first = (stage, kind), len(phrase), at
            if not prose:
                break
    return None if found is None or found[1] == "neutral" else found


def named_stage(pb: Playbook, name: str) -> int | None:
    """The stage of work a phrase of prose names (a progress bar's `Compute log probs`:
    training_data; `Generating sequences`, its verb's `-ing` read as the verb: completion), neither
    set-up (loading is also what a weight sync does) nor a whole loop."""
    found = _prose_stage(pb, name)
    return found[0] if found is not None and not found[1] else None


def requested_stage(pb: Playbook, path: str) -> int | None:
    """The stage of work a request's path asks a server for (`/update_named_param/`: the weight
    sync; `/v1/completions`: a generation; `/init_communicator/`: set-up), not a whole loop. A
    server asked to update its parameters is a rollout server taking the trainer's new weights:
    the optimizer updates the trainer's own, in its process, never over a request (TRL's and
    ms-swift's rollout servers: `/update_flattened_params/`, `/update_adapter_flattened_param/`)."""
    found = _prose_stage(pb, path)
    if found is None or found[1] == "loop":
        return None
    return STAGE_NO["completion"] if found[0] == STAGE_NO["actor_update"] else found[0]


def _prose_stage(pb: Playbook, text: str) -> tuple[int, str] | None:
    """`_stage` of the words of prose or a path, each `-ing` read as its verb."""
    return _stage(pb, _prose_words(pb, text), prose=True)


def _prose_words(pb: Playbook, text: str) -> tuple[str, ...]:
    """The words of prose or a path, each `-ing` read as its verb."""
    return tuple(_verb(pb, w) for w in name_words(text))


def names_set_up(pb: Playbook, text: str) -> bool:
    """Whether prose names a set-up call as the work it was doing (`… while running X's function
    init_worker`): set-up words only, no stage's own."""
    return _prose_stage(pb, text) == (STAGE_NO["engine_start"], "weak")


def names_collective_work(pb: Playbook, text: str) -> bool:
    """Whether prose or a request's path names work its processes do together through collectives
    (a weight sync's broadcast: `POST /update_named_param/`, `POST /prepare_weights_update`)."""
    words = _prose_words(pb, text)
    lemmas = tuple(map(lemma, words))
    return any(_contains(_worded(words, lemmas, phrase), phrase) is not None for phrase in pb.collective_words)


def _verb(pb: Playbook, word: str) -> str:
    """`generating` → `generate`, `scoring` → `score` when the stage words know that verb."""
    if len(word) > 5 and word.endswith("ing"):
        for verb in (word[:-3] + "e", word[:-3]):
            if verb in pb.stage_vocab:
                return verb
    return word


def _worded(words: tuple[str, ...], lemmas: tuple[str, ...], phrase: tuple[str, ...]) -> tuple[str, ...]:
    """A name's words as `phrase` is looked for in them: a phrase of several words in either number
    (their `lemmas`: `_in_number`), a single word as written."""
    return lemmas if len(phrase) > 1 else words


def _contains(words: tuple[str, ...], phrase: tuple[str, ...]) -> int | None:
    """Where `phrase`'s words first stand together in `words`, in either order (None: nowhere):
    code names an action verb first or last (`update_weights`, `weight_update`; `compute_advantage`,
    `advantage_compute`)."""
    n, key = len(phrase), sorted(phrase)
    return next((i for i in range(len(words) - n + 1) if sorted(words[i:i + n]) == key), None)


SETUP_VERBS = ("init", "initialize", "build", "create", "construct", "setup", "set")  # `_build_rollout` sets up
# how telling a name is: a function's own words, set-up, a module's or class's, the training loop's
STRONG, SETUP, MODULE, LOOP = 0, 1, 2, 3


def _entry_stage(pb: Playbook, entry: str) -> tuple[int, int] | None:
    """(stage, level) of one frame or method: its function (method) first — one named for
    set-up, `__init__` or `_build_rollout` or an import, is set-up whatever its module; a set-up
    verb alone names no object, so its module says of what (the OpenAI client's
    `completions.create` asks for a completion) —, then its module (class) name, which says
    less; a training loop's name (`fit`, `grpo_train`) only when none of its names says more."""
    if entry.startswith(TARGET):  # a result's name says less than a function's own
        found = _stage(pb, name_words(entry))
        return (found[0], MODULE) if found is not None and not found[1] else None
    loop = setup = None
    names = _names(pb, entry)
    for i, n in enumerate(names):
        words = name_words(n)
        if words[:1] == ("async",) and len(words) > 1:  # `async_init_weight_update_connections`: its
            words = words[1:]  # coroutine's (or remote) twin, named for the same work (slime, asyncio's `async_`)
        if i == 0 and (n == "<module>" or (words and words[0] in SETUP_VERBS)):
            if len(words) > 1 or n == "<module>":
                return STAGE_NO["engine_start"], SETUP
            setup = (STAGE_NO["engine_start"], SETUP)  # a verb alone (`create`): its module says of what
            continue
        if (found := _stage(pb, words)) is not None:
            stage, kind = found
            if kind == "loop":  # a function's (method's) own name, never a script's (`train.py`)
                loop = loop or ((stage, LOOP) if i == 0 else None)
                continue
            return stage, SETUP if kind == "weak" else (STRONG if i == 0 else MODULE)
        if i == 0 and len(words) == 1 and n[:1] != "<" and (found := _object_stage(pb, words[0], names[1:])):
            return found
    return setup or loop


def _object_stage(pb: Playbook, verb: str, where: list[str]) -> tuple[int, int] | None:
    """(stage, level) of a function named by a verb alone, read with a noun of its module's or
    package's name: what it does to what it lives among — Megatron's `dist_checkpointing/…py in
    save` saves a checkpoint, torch.distributed.checkpoint's `state_dict_saver.py in save` the same."""
    for name in where:
        for noun in (_verb(pb, w) for w in name_words(name)):
            found = _stage(pb, (verb, noun))
            if found is not None and found[1] in ("", "weak") and _stage(pb, (noun,)) is None:  # the two words'
                return found[0], SETUP if found[1] == "weak" else STRONG  # phrase, not the noun's own
    return None


def naming_frame(pb: Playbook, frames: list[str], code: dict[int, str]) -> int | None:
    """The index of the innermost frame (outermost first) whose function — or a `with` line's
    manager, whose __enter__ the frames inside it run — names a stage's work by its own words:
    where in the program's work a traceback cut short before its exception was (the frames
    inside it relay the call, a profiler's wrapper, a library's internals)."""
    for i in range(len(frames) - 1, -1, -1):
        names = [frames[i]] + (calls(code[i]) if i in code and WITH.match(code[i]) else [])
        if any((found := _entry_stage(pb, n)) is not None and found[1] == STRONG for n in names):
            return i
    return None


def _running(entries: list[str]) -> list[bool]:
    """Which entries say what the failing code was doing: not the script's own top level (a
    `<module>` frame with a function frame inside it is the entry point that called the failing
    code, not an import that failed; importlib's frozen frames do not count as functions)."""
    inner = [i for i, e in enumerate(entries) if (m := FRAME.match(e)) and m[3] != "<module>"
             and not m[1].startswith("<frozen")]
    last = inner[-1] if inner else -1
    return [i > last or not ((m := FRAME.match(e)) and m[3] == "<module>") for i, e in enumerate(entries)]


def _level_stage(pb: Playbook, entries: list[str], level: int) -> int | None:
    """The stage of the innermost entry (entries outermost first: frame lines, the calls of their
    source lines, `Class.method()`) that names one at that level: a playbook stage hint (at SETUP
    engine_start's, the weak ones like set-up words: loading weights is also what a weight sync
    does), else the words of its names. Innermost first, hint or word alike: `reward_func(…)`
    called inside `compute_loss` is the reward's failure, whatever hint names `compute_loss`."""
    waits = _waits(entries) if level == LOOP else set()
    for i, (entry, running) in reversed(list(enumerate(zip(entries, _running(entries))))):
        if i in waits:
            continue
        if level in (STRONG, SETUP):
            for hint, rx in pb.stage_hints:
                if (hint.stage == "engine_start") == (level == SETUP) and rx.search(entry):
                    return STAGE_NO[hint.stage]
        found = _entry_stage(pb, entry) if running else None
        if found is not None and found[1] == level:
            return found[0]
    return None


def _waits(entries: list[str]) -> set[int]:
    """The frames that wait on a remote task, every frame inside them a remote wait
    (`REMOTE_WAIT`): a training loop's own name does not place what failed there — OpenRLHF's
    driver `train(args)` → `ray.get(refs)` → Ray's `auto_init_wrapper`, its traceback cut there
    (tests/corpus/realworld52/5206): it ran in the remote task, not in the loop's own code between
    the phases it calls. The calls of the frame's line still name the remote work when they do
    (`ray.get(actor_model.async_train(…))`)."""
    frames = [i for i, e in enumerate(entries) if FRAME.match(e)]
    return {i for k, i in enumerate(frames)
            if frames[k + 1:] and all(REMOTE_WAIT.search(FRAME.match(entries[j])[1]) for j in frames[k + 1:])}


def path_level(pb: Playbook, groups: list[list[str]]) -> tuple[int | None, int | None]:
    """The stage of a failure from the names on its path, `groups` most telling first (the
    root's own frames, the Ray methods, every frame, the processes): in each group, innermost
    first, a stage hint of the playbook or the words of functions; set-up only when no group
    names another stage, and only on the failing call's own path (its frames and the Ray methods
    it went through): a caller that once built what is failing now (the driver's
    `TaskRunner.remote().run.remote(cfg)`) did its set-up long before; module and class names
    next; last, a training loop on the failing call's own path (`fit`, `grpo_train`,
    `train_actor`): its own code between the phases it calls builds the update's data. A frame
    that encloses its work (a hint's `encloses`: a start-up's profile run) on the failing call's
    own path decides before any of them."""
    for hint, rx in pb.stage_hints:
        if hint.encloses and groups and any(rx.search(e) for e in groups[0]):
            return STAGE_NO[hint.stage], SETUP
    for level in (STRONG, SETUP, MODULE, LOOP):
        for names in (groups[:2] if level in (SETUP, LOOP) else groups):
            if (stage := _level_stage(pb, names, level)) is not None:
                return stage, level
    return None, None


def sets_up(pb: Playbook, groups: list[list[str]]) -> bool:
    """Whether the failing call's own path (its frames, the Ray methods) passes through set-up
    (`init_model`, `__init__`, an engine_start hint): loading weights there is building a model."""
    return any(_level_stage(pb, names, SETUP) is not None for names in groups[:2])


def path_stage(pb: Playbook, groups: list[list[str]]) -> int | None:
    """The stage of `path_level`."""
    return path_level(pb, groups)[0]


def confined_stage(pb: Playbook, actors: list[str]) -> int | None:
    """The stage a process of the failing call does exclusively (a `confines` hint on its name)."""
    for hint, rx in pb.stage_hints:
        if hint.confines and any(rx.search(a) for a in actors):
            return STAGE_NO[hint.stage]
    return None
