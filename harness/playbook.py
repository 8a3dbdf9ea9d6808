"""Playbooks: YAML knowledge of a training stack (stage markers, failure signatures, noise,
line prefixes, metrics), composed with `extends:` and compiled for the analyzer.

A playbook file is validated with pydantic; an error names the file, the line and the field,
and an invalid regex names itself. `load_playbook(None)` is the union of the shipped ones.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from .patterns import Matchers, valid_regex
from .yamlfile import Loader, load_model, node_line
from .chain import CATEGORIES, STAGES
from .errors import PlaybookError

Stage = Literal[STAGES]  # type: ignore[valid-type]
Category = Literal[CATEGORIES]  # type: ignore[valid-type]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Pattern(_Model):
    """A regex with its provenance. `evidence` says where the text is printed or seen;
    `guess: true` marks a pattern that no evidence backs yet."""

    id: str
    regex: str
    evidence: str = ""
    guess: bool = False
    note: str = ""

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return valid_regex(v)

    @model_validator(mode="after")
    def _backed(self) -> "Pattern":
        if not self.evidence and not self.guess:
            raise ValueError(f"pattern {self.id!r} needs `evidence:` or `guess: true`")
        return self


class Fix(_Model):
    """A deterministic fix the controller may apply without a model call."""

    kind: Literal["set_env", "unset_env", "replace", "set_yaml", "cleanup_retry"]
    name: str | None = None
    value: str | None = None
    names: list[str] = []
    file: str | None = None
    old: str | None = None
    new: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> "Fix":
        need = {"set_env": ("name", "value"), "unset_env": ("names",), "replace": ("file", "old", "new"),
                "set_yaml": ("file", "key", "value"), "cleanup_retry": ()}[self.kind]
        missing = [n for n in need if not getattr(self, n)]
        if missing:
            raise ValueError(f"fix of kind {self.kind} needs {', '.join(missing)}")
        return self


class Signature(Pattern):
    """A failure signature. `role`: cause (can be a root cause), wrapper (re-raises another
    error, e.g. RayTaskError), downstream (a consequence, e.g. a watchdog timeout on a peer).
    `priority` ranks lines of one error block: the most specific line becomes the root-cause text.
    No `category`: the error families (`categories:`) decide from the line (a generic error shape)."""

    category: Category | None = None
    cls: Literal["infra", "code"] = Field("code", alias="class")
    hint: str = ""
    stage: Stage | None = None
    role: Literal["cause", "wrapper", "downstream"] = "cause"
    priority: int = 0
    outcome: Literal["crash", "hang", "wrong_result"] = "crash"
    fix: Fix | None = None
    alone: bool = False  # an error shape for lines outside a traceback only (inside one, the traceback decides)
    # it says what failed, not what the process was doing: a supervisor's report that a process died
    # (Ray's raylet and GCS: which process, and how), a device's fault inside a kernel that any phase's
    # computation runs — nothing else placing it, its stage is unknown
    phaseless: bool = Field(False, validation_alias=AliasChoices("phaseless", "death_report"))  # its name until 2026-12-08


class StageHint(Pattern):
    """Maps a traceback frame (`in <func>`) or a Ray method (`ray::Actor.<method>()`) to a stage.
    `confines`: a process of this kind (matched on its actor name) does only this stage's work once
    it is set up — whatever its frames are called, its failures are of this stage (an engine's
    `logprobs` are a completion's); set-up frames stay engine_start, and while the engine is still
    starting the stage under way says so. `encloses`: a frame of this kind runs other stages' work
    as part of its own (vLLM's start-up profile run generates dummy tokens): a failure with it on
    its own path is of this stage, whatever the frames inside it name."""

    stage: Stage
    confines: bool = False
    encloses: bool = False


class StageWords(_Model):
    """Words of the names on a failing call path — a frame's function, a Ray method, their module
    or class — that say which stage the call does (`compute_log_prob` → training_data). A phrase
    is words joined by `_`; names are split at `_` and camelCase, lower-cased, and a phrase
    matches consecutive words. The longest phrase of the innermost name that has one wins."""

    id: str
    stage: Stage | None = None  # none: a mechanism every stage uses (`neutral`)
    words: list[str] = Field(min_length=1)
    weak: bool = False  # set-up words: they count only when no other stage word is on the path
    loop: bool = False  # the training loop's own functions: they count only when nothing else names a stage
    neutral: bool = False  # a name of no stage's work, though a shorter phrase in it names one: the caller says
    collective: bool = False  # work that steps processes together through collectives: a run silent in it waits in one
    evidence: str = Field(min_length=1)

    @model_validator(mode="after")
    def _staged(self):
        if (self.stage is None) != self.neutral:
            raise ValueError("a stage word names its stage, a neutral one none")
        return self


class CategoryFamily(Pattern):
    """A family of errors across frameworks (`out of memory` in any wording → oom): the category
    of an error no signature names, from its exception type or its message (the first family
    whose regex matches either wins; none: `other`)."""

    category: Category
    stage: Stage | None = None  # where errors of the family arise, when nothing on the path says
    # `scope: frames`: the regex is matched against the function names of the failing call (innermost
    # first) — an error raised inside a weight loader — for an error no message family names;
    # `scope: statement`: against the source line that raised it (the innermost frame's), which says
    # what the failing operation was more precisely than its exception's type, a message family's
    scope: Literal["message", "frames", "statement"] = "message"


class MetricRule(_Model):
    """A metric value that makes an update unhealthy or a result wrong, checked on every step
    line, not only the first. `when`: nonfinite (NaN/inf); zero; same (equal to the metric
    `against` in the same line: a reward whose max is its min has no spread); above / below (beyond
    `limit`, a value no healthy run reaches); drift (above the mean + 3σ of the previous `window`
    values, once 5 were seen); explode / collapse (above 10× / below a tenth of the median of the
    previous values, once 3 were seen)."""

    id: str
    metric: str
    when: Literal["nonfinite", "zero", "same", "above", "below", "drift", "explode", "collapse"]
    against: str | None = None
    limit: float | None = None
    window: int = Field(20, ge=5)
    # the rule holds only while these metrics of the same line are finite: a KL that is NaN beside
    # a finite loss started in log-probs the loss does not use; beside a NaN loss, the loss's rule says it
    while_finite: list[str] = []
    category: Category
    stage: Stage
    hint: str = ""
    evidence: str = ""
    fix: Fix | None = None  # as a signature's (a learned rule carries the change that cured the value)

    @model_validator(mode="after")
    def _paired(self) -> "MetricRule":
        if (self.when == "same") != (self.against is not None):
            raise ValueError("`against:` names the metric to compare with, for `when: same` (and only then)")
        if (self.when in ("above", "below")) != (self.limit is not None):
            raise ValueError("`limit:` is the bound a value must not pass, for `when: above` or `below` (and only then)")
        return self


class Marker(Pattern):
    """A line that shows a stage's progress. `at: end` (the default): printed once the stage's work
    is done — the stage passed. `at: during`: printed when the stage begins or while it is under
    way (a step's banner, a progress bar created before the first batch, the KV cache sized before
    the engine is warmed up and serving): the stage is under way, not passed."""

    at: Literal["end", "during"] = "end"


class StageSpec(_Model):
    timeout: float | None = Field(None, gt=0, description="seconds of silence before the run is a hang")
    markers: list[Marker] = []


class PlaybookFile(_Model):
    name: str
    description: str = ""
    extends: list[str] = []
    detect: list[Pattern] = []  # a whole stack's vocabulary: makes it a candidate default playbook
    prefixes: list[Pattern] = []
    stages: dict[Stage, StageSpec] = {}
    signatures: list[Signature] = []
    noise: list[Pattern] = []
    stage_hints: list[StageHint] = []
    stage_words: list[StageWords] = []
    plumbing: list[Pattern] = []  # frames (by file) that only relay a call: no stage is read from them
    categories: list[CategoryFamily] = []  # error families: the category of an error no signature names
    metric_lines: list[Pattern] = []
    metrics: dict[str, list[str]] = {}
    metric_rules: list[MetricRule] = []


# ---------------------------------------------------------------- loading
#
# A playbook name is looked up in, in order: the directory of the file that names it (the spec's,
# or the playbook's that `extends:` it), each directory of $HARNESS_PLAYBOOKS (a team's checkout),
# ~/.config/harness/playbooks ($XDG_CONFIG_HOME), then the shipped ones. The first `<name>.yaml`
# found is used; a file that extends its own name (a team's verl.yaml over the shipped verl) gets
# the next one down the path.

PATH_ENV = "HARNESS_PLAYBOOKS"


def shipped_dir() -> Path:
    return Path(str(resources.files("harness.playbooks")))


def shipped_names() -> list[str]:
    return sorted(p.stem for p in shipped_dir().glob("*.yaml"))


def user_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "harness" / "playbooks"


def search_dirs(base: Path | None = None) -> list[tuple[str, Path]]:
    """(where, directory) in lookup order; `base`: the directory of the file naming the playbook."""
    dirs = [("here", base)] if base is not None else []
    dirs += [(f"${PATH_ENV}", Path(d).expanduser()) for d in os.environ.get(PATH_ENV, "").split(os.pathsep) if d]
    return dirs + [("user", user_dir()), ("shipped", shipped_dir())]


def where(path: Path) -> str:
    """Which part of the lookup path a playbook file lies in: $HARNESS_PLAYBOOKS, user, shipped, or file."""
    parent = path.resolve().parent
    for label, d in search_dirs():
        if d.resolve() == parent:
            return label
    return "file"


def locate(name: str, base: Path | None = None, skip: Path | None = None) -> Path:
    """The file of a playbook named by file (relative to `base`) or by name (along the lookup path);
    `skip`: the file that names it, when that extends its own name."""
    p = Path(name).expanduser()
    if p.suffix in (".yaml", ".yml") or "/" in name:
        p = base / p if base is not None and not p.is_absolute() else p
        if not p.is_file():
            raise PlaybookError(name, None, "", "no such playbook file")
        return p
    dirs = search_dirs(base if skip is None else None)  # extending its own name: in the path's own order
    found = list({f.resolve(): f for _, d in dirs if (f := d / f"{name}.yaml").is_file()}.values())
    if skip is not None:  # ... the next one down the path after the file (all of it for a file off the path)
        real = [f.resolve() for f in found]
        found = found[real.index(skip.resolve()) + 1:] if skip.resolve() in real else found
    if found:
        return found[0]
    looked = ", ".join(str(d) for _, d in search_dirs(base)[:-1])
    raise PlaybookError(name, None, "", f"no such playbook in {looked or 'the lookup path'} nor shipped "
                        f"({', '.join(shipped_names())})")


def read_file(path: Path) -> PlaybookFile:
    """Parse and validate one playbook file (no `extends:` resolution); cached per mtime."""
    try:
        return _read_cached(str(path), path.stat().st_mtime_ns)
    except OSError as e:
        raise PlaybookError(str(path), None, "", f"cannot read: {e}") from None


@functools.lru_cache(maxsize=256)
def _read_cached(name: str, _mtime_ns: int) -> PlaybookFile:
    pb = load_model(Path(name), PlaybookFile, "playbook (name:, stages:, signatures:, …)")
    stem = Path(name).stem
    if pb.name != stem:
        node = yaml.compose(Path(name).read_text(encoding="utf-8"), Loader=Loader)
        raise PlaybookError(name, node_line(node, ("name",)), "name", f"must equal the file name {stem!r}")
    return pb


Lineage = list[tuple[PlaybookFile, Path]]


def _lineage(path: Path, seen: tuple[Path, ...] = (), done: dict | None = None) -> Lineage:
    """The playbook (`path` resolved) and its ancestors with their files, ancestors first, each
    once; `done` memoises the lineages of one lookup (ancestors are shared: base, ray, vllm…)."""
    done = {} if done is None else done
    if path in seen:
        raise PlaybookError(str(path), None, "extends", f"cycle: {' -> '.join(p.stem for p in seen + (path,))}")
    if path not in done:
        pb = read_file(path)
        parents = [locate(p, path.parent, skip=path if p == path.stem else None).resolve() for p in pb.extends]
        done[path] = _union([_lineage(p, seen + (path,), done) for p in parents]) + [(pb, path)]
    return done[path]


def _union(lineages: list[Lineage]) -> Lineage:
    out: dict[Path, PlaybookFile] = {}
    for items in lineages:
        for pb, path in items:
            out.setdefault(path, pb)
    return [(pb, path) for path, pb in out.items()]


def lineage(names: str | list[str] | None, base: Path | None = None) -> Lineage:
    """The files of one playbook, of a list of them (in order), or of all shipped ones (None)."""
    tops = [shipped_dir() / f"{n}.yaml" for n in shipped_names()] if names is None else \
        [locate(n, base) for n in ([names] if isinstance(names, str) else names)]
    done: dict = {}
    return _union([_lineage(top.resolve(), (), done) for top in tops])


def _merge_list(items: list) -> list:
    """Later entries with the same id replace earlier ones, keeping the first position."""
    by_id: dict[str, object] = {}
    for it in items:
        by_id[it.id] = it
    return list(by_id.values())


def merge(files: list[PlaybookFile], name: str) -> PlaybookFile:
    # no playbook chosen (the union): a guess written for one project's logs is no rule for any log,
    # whatever kind of pattern it is
    kept = (lambda items: [x for x in items if not getattr(x, "guess", False)]) if name == UNION else list
    stages: dict[str, StageSpec] = {}
    metrics: dict[str, list[str]] = {}
    for f in files:
        for st, spec in f.stages.items():
            old = stages.get(st, StageSpec())
            stages[st] = StageSpec(timeout=spec.timeout or old.timeout,
                                   markers=_merge_list(old.markers + kept(spec.markers)))
        for k, keys in f.metrics.items():
            metrics[k] = list(dict.fromkeys(metrics.get(k, []) + keys))
    cat = lambda attr: _merge_list([x for f in files for x in kept(getattr(f, attr))])  # noqa: E731
    return PlaybookFile(
        name=name, description=files[-1].description if files else "",
        extends=[f.name for f in files[:-1]], detect=files[-1].detect if files else [],
        prefixes=cat("prefixes"), stages={s: stages[s] for s in STAGES if s in stages},
        signatures=cat("signatures"), noise=cat("noise"), stage_hints=cat("stage_hints"),
        stage_words=cat("stage_words"), plumbing=cat("plumbing"), categories=cat("categories"),
        metric_lines=cat("metric_lines"), metrics=metrics, metric_rules=cat("metric_rules"))


UNION = "union"  # the name of the shipped playbooks merged, when none is chosen


def _name(names: str | list[str] | None) -> str:
    if names is None:
        return UNION
    return "+".join(Path(n).stem for n in ([names] if isinstance(names, str) else names))


def load_merged(names: str | list[str] | None, base: Path | None = None) -> PlaybookFile:
    """The merged playbook of a name or file, of a list of them, or of all shipped ones (None)."""
    return merge([pb for pb, _ in lineage(names, base)], _name(names))


LEARNED = re.compile(r"session (\S+) attempt (\d+)")  # the evidence `harness learn` writes


def origins(items: Lineage) -> dict[str, str]:
    """Signature and metric-rule id -> the playbook it comes from and where that lies
    (`minichain (shipped)`), and for a learned entry the session it was learned from
    (`pangu-learned ($HARNESS_PLAYBOOKS), learned from session 20261203-… attempt 3`)."""
    out: dict[str, str] = {}
    for pb, path in items:
        label = f"{pb.name} ({where(path)})"
        for x in pb.signatures + pb.metric_rules:
            m = LEARNED.match(x.evidence)
            out[x.id] = label + (f", learned from {m.group(0)}" if m else "")
    return out


# ---------------------------------------------------------------- compiled form


@dataclass(eq=False)
class Playbook:
    """A merged playbook compiled for the analyzer: matchers test each pattern's required
    literals before its regex, so hundreds of patterns stay cheap per line."""

    source: PlaybookFile
    prefixes: list[re.Pattern]
    match: Matchers  # groups: marker -> (stage no, Pattern), signature, noise, metric_line
    stage_hints: list[tuple[StageHint, re.Pattern]]
    stage_words: list[tuple[tuple[str, ...], int | None, str]] = field(default_factory=list)  # phrase, stage, kind ("", weak, loop, neutral); longest first
    stage_vocab: frozenset[str] = frozenset()  # every word of the stage words' phrases
    collective_words: tuple[tuple[str, ...], ...] = ()  # the phrases of work done through collectives
    plumbing: re.Pattern | None = None
    categories: list[tuple[str, re.Pattern, int | None]] = field(default_factory=list)  # category, regex, stage
    frame_categories: list[tuple[str, re.Pattern]] = field(default_factory=list)  # category, regex on frames
    statement_categories: list[tuple[str, re.Pattern]] = field(default_factory=list)  # category, regex on the raising line
    metric_keys: dict[str, re.Pattern] = field(default_factory=dict)
    timeouts: dict[int, float] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)  # signature / metric rule id -> its playbook (where)

    @property
    def name(self) -> str:
        return self.source.name

    def patterns(self) -> list[str]:
        """Every regex the analyzer matches lines against (used by the grep benchmark)."""
        s = self.source
        pats = [p.regex for p in s.prefixes + s.noise + s.metric_lines]
        pats += [m.regex for spec in s.stages.values() for m in spec.markers]
        pats += [x.regex for x in s.signatures + s.stage_hints]
        return pats


_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def name_words(name: str) -> tuple[str, ...]:
    """A code name as lower-case words: `DTensorPolicyWorkerV2.get_logprobs` → (d, tensor,
    policy, worker, v, 2, get, logprobs); `__init__` → (init,)."""
    return tuple(w.lower() for part in re.split(r"[_\W]+", name) for w in _CAMEL.findall(part))


def lemma(word: str) -> str:
    """A word of a name in its singular (`rewards`, `trajectories`, `log_probs` → `reward`,
    `trajectory`, `prob`): code names the same work in either number (`update_weight` and
    `update_weights`, `compute_reward` and `compute_rewards`); `loss`, `status` stay."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _in_number(words: tuple[str, ...]) -> tuple[str, ...]:
    """A phrase of several words as `lemma`s (the same work in either number); a single word as
    written: alone, its number is what it says (`values`, a critic's, not any `return_value`)."""
    return tuple(map(lemma, words)) if len(words) > 1 else words


def compile_playbook(pb: PlaybookFile, origins: dict[str, str] | None = None) -> Playbook:
    stage_no = {s: i + 1 for i, s in enumerate(STAGES)}
    stage_words = sorted(((_in_number(name_words(w)), stage_no[sw.stage] if sw.stage else None,
                           "weak" if sw.weak else "loop" if sw.loop else "neutral" if sw.neutral else "")
                          for sw in pb.stage_words for w in sw.words), key=lambda x: -len(x[0]))
    return Playbook(
        source=pb,
        prefixes=[re.compile(p.regex) for p in pb.prefixes],
        match=Matchers({
            "marker": [((stage_no[s], m), m.regex) for s, spec in pb.stages.items() for m in spec.markers],
            "signature": [(sig, sig.regex) for sig in pb.signatures],
            "noise": [(n, n.regex) for n in pb.noise],
            "metric_line": [(m, m.regex) for m in pb.metric_lines]}),
        stage_hints=[(h, re.compile(h.regex)) for h in pb.stage_hints],
        stage_words=stage_words,
        stage_vocab=frozenset(w for phrase, _, _ in stage_words for w in phrase),
        collective_words=tuple(_in_number(name_words(w)) for sw in pb.stage_words if sw.collective for w in sw.words),
        plumbing=re.compile("|".join(f"(?:{p.regex})" for p in pb.plumbing)) if pb.plumbing else None,
        categories=[(c.category, re.compile(c.regex), stage_no[c.stage] if c.stage else None)
                    for c in pb.categories if c.scope == "message"],
        frame_categories=[(c.category, re.compile(c.regex)) for c in pb.categories if c.scope == "frames"],
        statement_categories=[(c.category, re.compile(c.regex)) for c in pb.categories if c.scope == "statement"],
        metric_keys={k: re.compile("|".join(f"(?:{x})" for x in keys)) for k, keys in pb.metrics.items() if keys},
        timeouts={stage_no[s]: spec.timeout for s, spec in pb.stages.items() if spec.timeout},
        origins=origins or {},
    )


def load_playbook(names: str | list[str] | None, base: Path | None = None) -> Playbook:
    """The compiled playbook of a name or file, a list of them, or all shipped ones (None);
    cached while none of the files it could be read from has changed."""
    items = lineage(names, base)  # reading is cached per file: compiling is what costs
    key = tuple((str(path.resolve()), path.stat().st_mtime_ns) for _, path in items)
    return _compiled(key, _name(names))


@functools.lru_cache(maxsize=32)
def _compiled(key: tuple, name: str) -> Playbook:
    items = [(read_file(Path(path)), Path(path)) for path, _ in key]
    return compile_playbook(merge([pb for pb, _ in items], name), origins(items))


def to_yaml(pb: PlaybookFile) -> str:
    data = pb.model_dump(by_alias=True, exclude_defaults=True)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def listing(used: list[str] | None = None) -> list[dict]:
    """Each playbook file along the lookup path: name, where, path, which file shadows it (an
    earlier one of the same name), and whether `used` (a spec's list) reads it. The spec's own
    files (outside the path) come first."""
    reads = {str(p.resolve()) for _, p in lineage(used)} if used is not None else set()
    rows, first = [], {}
    extra = [Path(p) for p in used or [] if Path(p).is_absolute() and where(Path(p)) == "file"]
    found = [("file", p) for p in extra] + [(w, f) for w, d in search_dirs() for f in sorted(d.glob("*.yaml"))]
    for w, f in found:
        path = str(f.resolve())
        if any(r["path"] == path for r in rows):
            continue
        rows.append({"name": f.stem, "where": w, "path": path, "used": path in reads,
                     "shadowed_by": first.get(f.stem) if w != "file" else None})
        if w != "file":
            first.setdefault(f.stem, path)
    return rows
