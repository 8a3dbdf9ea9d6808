"""Playbook fixes (harness.agent.fixes) and the comment-preserving YAML key setter (harness.yamledit)."""

import asyncio
import copy
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.agent.fixes import FixResult, apply_fix
from harness.playbook import Fix
from harness.remote.local import LocalTransport
from harness.yamledit import is_set, same, set_key

ROOT = Path(__file__).resolve().parent.parent
MINICHAIN = ROOT / "fixtures/targets/minichain"
PRECISION = "actor_rollout_ref.actor.optim.override_optimizer_config.use_precision_aware_optimizer"


def _minichain_loader():
    spec = importlib.util.spec_from_file_location("minichain_config", MINICHAIN / "minichain/config.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _faulted_config() -> str:
    """config.yaml as the faults 03, 08, 09 and 10 leave it (the text their patches put there)."""
    text = (MINICHAIN / "config.yaml").read_text()
    for patch in ("03-token-margin-2048", "08-workers-through-proxy", "09-precision-aware-optimizer-fp16",
                  "10-parallel-agents-256"):
        hunks = (MINICHAIN / "faults" / f"{patch}.patch").read_text().split("+++ b/config.yaml\n", 1)[1]
        body = [ln for ln in hunks.split("diff --git")[0].splitlines() if not ln.startswith("@@")]
        old = "".join(ln[1:] + "\n" for ln in body if ln[:1] in " -")
        new = "".join(ln[1:] + "\n" for ln in body if ln[:1] in " +")
        assert text.count(old) == 1, patch
        text = text.replace(old, new)
    return text


def _comments(text: str) -> list[str]:
    return re.findall(r"#.*", text)


# ---------------------------------------------------------------- yamledit on the real config


def test_minichain_config_fixes_keep_comments_and_load_alike():
    text = _faulted_config()
    assert "token_margin: 2048           # the rollout" in text
    out, old = set_key(text, "rollout.token_margin", "16384")
    assert old == "2048"
    assert "  token_margin: 16384          # the rollout server's max_model_len (prompt + max_tokens)\n" in out
    out, old = set_key(out, PRECISION, "false")
    assert old == "true" and "        use_precision_aware_optimizer: false\n" in out
    out, old = set_key(out, "rllm.agent.engine_args.n_parallel_agents", "1")
    assert old == "256" and out.endswith("      # agents running episodes at once, each with its own connection"
                                         " to the rollout server\n      n_parallel_agents: 1\n")
    out, old = set_key(out, "ray_init.runtime_env.env_vars.no_proxy", "127.0.0.1,localhost")
    assert old is None
    assert '      https_proxy: "http://127.0.0.1:9"\n      no_proxy: 127.0.0.1,localhost\n\nrllm:\n' in out

    assert _comments(out) == _comments(text)  # every comment kept, in order
    assert len(out.splitlines()) == len(text.splitlines()) + 1  # only the new key's line added
    data = yaml.safe_load(out)
    assert data["rollout"]["token_margin"] == 16384
    assert data["actor_rollout_ref"]["actor"]["optim"]["override_optimizer_config"] == \
        {"use_precision_aware_optimizer": False}
    assert data["rllm"]["agent"]["engine_args"] == {"n_parallel_agents": 1}
    assert data["ray_init"]["runtime_env"]["env_vars"]["no_proxy"] == "127.0.0.1,localhost"
    assert _minichain_loader().parse(out) == data  # the run's own YAML-subset reader agrees
    healthy = yaml.safe_load((MINICHAIN / "config.yaml").read_text())
    healthy["ray_init"]["runtime_env"]["env_vars"].update(
        http_proxy="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9", no_proxy="127.0.0.1,localhost")
    healthy["rllm"]["agent"]["engine_args"]["n_parallel_agents"] = 1
    assert data == healthy


def test_values_are_written_to_load_as_the_intended_scalar():
    text = "a:\n  b: 1  # keep\n"
    cases = {"16384": 16384, "false": False, "'1'": "1", "yes please": "yes please", "null": None,
             "'no'": "no", '"x # y"': "x # y", "1.5": 1.5, "a: b'": None, "~": None, "": None}
    for value, want in cases.items():
        if value == "a: b'":
            with pytest.raises(ValueError):
                set_key(text, "a.b", value)
            continue
        out, old = set_key(text, "a.b", value)
        assert old == "1"
        assert same(yaml.safe_load(out)["a"]["b"], want), (value, out)
        assert out.rstrip("\n").endswith("# keep")
    out, _ = set_key(text, "a.b", "x # not a comment?")  # a YAML comment in the value text: it loads as x
    assert yaml.safe_load(out) == {"a": {"b": "x"}} and out.count("#") == 1


def test_comment_column_kept_when_it_fits_else_one_space():
    text = "k: 1        # c\nj: 2\n"
    out, _ = set_key(text, "k", "123456")
    assert out == "k: 123456   # c\nj: 2\n"
    out, _ = set_key(text, "k", "'a string longer than the gap'")
    assert out == "k: 'a string longer than the gap' # c\nj: 2\n"


def test_insert_creates_parents_at_the_files_indentation():
    text = "# top\nx:\n    y: 1    # y\n\n    z:\n        w: 2\n# tail comment\n"
    out, old = set_key(text, "x.z.new.deep", "v")
    assert old is None
    assert out == "# top\nx:\n    y: 1    # y\n\n    z:\n        w: 2\n        new:\n            deep: v\n# tail comment\n"
    out, _ = set_key(text, "top2.a", "1")
    assert out.endswith("        w: 2\ntop2:\n    a: 1\n# tail comment\n")


def test_insert_under_an_empty_key_and_into_empty_or_unterminated_files():
    out, old = set_key("env:   # none yet\nb: 1\n", "env.X", "1")
    assert (out, old) == ("env:   # none yet\n  X: 1\nb: 1\n", None)
    out, _ = set_key("env: null\n", "env.X", "1")
    assert yaml.safe_load(out) == {"env": {"X": 1}}
    out, old = set_key("env:\n", "env", "3")
    assert (out, old) == ("env: 3\n", "")
    assert set_key("# only a comment", "a.b", "1")[0] == "# only a comment\na:\n  b: 1\n"
    assert set_key("", "a", "1")[0] == "a: 1\n"
    assert set_key("a: 1", "b", "2")[0] == "a: 1\nb: 2\n"
    assert set_key("a:\r\n  b: 1\r\n", "a.c", "2")[0] == "a:\r\n  b: 1\r\n  c: 2\r\n"


def test_awkward_keys_are_quoted():
    out, _ = set_key("a: 1\n", "a2.no", "1")
    assert yaml.safe_load(out) == {"a": 1, "a2": {"no": 1}}  # plain `no:` would be the key False
    out, _ = set_key("a: 1\n", "1", "x")
    assert yaml.safe_load(out) == {"a": 1, "1": "x"}


def test_after_a_block_scalar_and_a_list():
    text = "a:\n  s: |\n    line\n\n  l:\n  - 1\n  - 2\nb: 1\n"
    out, _ = set_key(text, "a.t", "1")
    assert yaml.safe_load(out) == {"a": {"s": "line\n", "l": [1, 2], "t": 1}, "b": 1}
    assert "  - 2\n  t: 1\nb: 1\n" in out


@pytest.mark.parametrize("text,key,why", [
    ("a: {b: 1}\n", "a.b", "flow mapping"),
    ("a: {b: 1}\n", "a.c", "flow mapping"),
    ("{a: 1}\n", "a", "flow mapping"),
    ("a: 1\n---\nb: 2\n", "a", "multi-document"),
    ("base: &b\n  x: 1\nother: *b\n", "base.x", "anchors"),
    ("a: 1\n", "a.b", "not a mapping"),
    ("a:\n  b: 1\n", "a", "mapping, not a scalar"),
    ("a: [1, 2]\n", "a", "list, not a scalar"),
    ("a: |\n  x\n", "a", "several lines"),
    ("a: 1\na: 2\n", "a", "2 times"),
    ("- 1\n", "a", "not a mapping"),
    ("a: 1\n", "a..b", "empty part"),
    ("a: [\n", "a", "not one valid YAML document"),
])
def test_refusals(text, key, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        set_key(text, key, "5")


def test_verification_refuses_an_edit_that_changed_anything_else():
    from harness import yamledit

    before = {"a": {"b": 1, "c": 2}}
    yamledit._verify(before, "a:\n  b: 5\n  c: 2\n", ["a", "b"], 5, "a.b")  # as intended: no error
    for wrong in ("a:\n  b: 5\n  c: 3\n", "a:\n  b: '5'\n  c: 2\n", "a:\n  b: 5\n", "a: [\n"):
        with pytest.raises(ValueError, match="cannot set a.b safely"):
            yamledit._verify(before, wrong, ["a", "b"], 5, "a.b")


def test_is_set():
    assert is_set("a:\n  b: 0x10\n", "a.b", "16")
    assert not is_set("a:\n  b: 1\n", "a.b", "true")  # 1 is not true
    assert not is_set("a:\n  b: 1\n", "a.c", "1")
    assert not is_set("a: 1\n", "a.b", "1")


# ---------------------------------------------------------------- yamledit properties

KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True).filter(lambda k: yaml.safe_load(f"{k}: 1") == {k: 1})
SCALARS = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.none(), st.text("abc xyz:#'\"-", max_size=8),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
TREES = st.dictionaries(KEYS, st.recursive(SCALARS, lambda c: st.dictionaries(KEYS, c, min_size=1, max_size=4),
                                           max_leaves=12), max_size=5)
VALUES = st.one_of(st.sampled_from(["16384", "false", "1", "127.0.0.1,localhost", "null", "''", "-3", "a b",
                                    "x: y", "[1]", "'quoted'", "1e3", "2024-01-01", "'#'", "@x", "*a", "{a: 1}"]),
                   st.text("ab 1:#,-'\"[]{}&*!|>%@`", max_size=10))


def _scalar_text(v) -> str:
    return json.dumps(v) if isinstance(v, str) else yaml.safe_dump(v).splitlines()[0]


def _render(tree: dict, data, step: int, indent: int = 0) -> list[str]:
    """Block YAML for a tree, with full-line and trailing comments and blank lines drawn by hypothesis."""
    lines = []
    for k, v in tree.items():
        if data.draw(st.booleans()):
            lines.append(" " * indent + f"# about {k} §")
        if data.draw(st.booleans()):
            lines.append("")
        tail = f"  # {k} trailing §" if data.draw(st.booleans()) else ""
        if isinstance(v, dict):
            lines.append(" " * indent + f"{k}:{tail}")
            lines += _render(v, data, step, indent + step)
        else:
            lines.append(" " * indent + f"{k}: {_scalar_text(v)}{tail}")
    return lines


def _marks(text: str) -> list[str]:
    return re.findall(r"# (?:about \w+|\w+ trailing) §", text)


def _paths(tree: dict, prefix=()) -> list[tuple]:
    out = []
    for k, v in tree.items():
        out.append(prefix + (k,))
        if isinstance(v, dict):
            out += _paths(v, prefix + (k,))
    return out


def _expected(tree: dict, path: tuple, value):
    """What the tree should become, or None when set_key must refuse."""
    want = copy.deepcopy(tree)
    node = want
    for part in path[:-1]:
        if node.get(part) is None:
            node[part] = {}
        elif not isinstance(node[part], dict):
            return None
        node = node[part]
    if isinstance(node.get(path[-1]), dict):
        return None
    node[path[-1]] = value
    return want


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.data(), st.sampled_from([2, 4]), VALUES)
def test_set_key_gives_the_value_and_leaves_the_rest(tree, data, step, value):
    text = "\n".join(_render(tree, data, step)) + "\n"
    assert same(yaml.safe_load(text) or {}, tree)
    existing = _paths(tree)
    path = data.draw(st.sampled_from(existing)) if existing and data.draw(st.booleans()) else ()
    path += tuple(data.draw(st.lists(st.sampled_from(["new", "no", "k1", "1", "a b", "x#y"]), min_size=0 if path else 1,
                                     max_size=3, unique=True)))
    try:
        value_is = yaml.safe_load(value)
    except yaml.YAMLError:
        value_is = [None]  # not a scalar: must be refused
    want = None if isinstance(value_is, (dict, list)) else _expected(tree, path, value_is)
    if want is None:
        with pytest.raises(ValueError):
            set_key(text, ".".join(path), value)
        return
    out, old = set_key(text, ".".join(path), value)
    assert same(yaml.safe_load(out) or {}, want)
    assert _marks(out) == _marks(text)  # every comment kept, in order
    assert is_set(out, ".".join(path), value)
    assert (old is None) == (not _has(tree, path))


def _has(tree, path) -> bool:
    for part in path:
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


@settings(max_examples=200, deadline=None)
@given(TREES.filter(bool), st.data(), st.text(max_size=20))
def test_any_string_round_trips_through_safe_dump_output(tree, data, string):
    text = yaml.safe_dump(tree, sort_keys=False)
    path = data.draw(st.sampled_from(_paths(tree)))
    if data.draw(st.booleans()):
        path += (data.draw(st.text(min_size=1, max_size=5).filter(lambda p: "." not in p and p.strip())),)
    value = json.dumps(string, ensure_ascii=data.draw(st.booleans()))  # the fix's value text: a quoted scalar
    try:
        want = _expected(tree, path, yaml.safe_load(value))  # "\\ud83d\\ude00" reads as two surrogates
    except yaml.YAMLError:  # a raw character YAML refuses
        want = None
    if want is None:
        with pytest.raises(ValueError):
            set_key(text, ".".join(path), value)
        return
    out, _ = set_key(text, ".".join(path), value)
    assert same(yaml.safe_load(out), want)


# ---------------------------------------------------------------- apply_fix


def _run(coro):
    return asyncio.run(coro)


@pytest.fixture
def workdir(tmp_path):
    w = tmp_path / "work"
    (w / "conf").mkdir(parents=True)
    (w / "config.yaml").write_text(_faulted_config())
    script = w / "run.sh"
    script.write_text("#!/bin/sh\necho old old\n")
    script.chmod(0o755)
    (tmp_path / "outside.txt").write_text("old\n")
    return w


def _apply(workdir, fix: Fix, env=None, unset=None) -> FixResult:
    return _run(apply_fix(LocalTransport(), fix, workdir=str(workdir), env=env or {}, unset=unset or []))


def test_set_yaml_fix(workdir):
    r = _apply(workdir, Fix(kind="set_yaml", file="config.yaml", key="rollout.token_margin", value="16384"))
    assert r.applied and r.files == ["config.yaml"]
    assert r.description == "config.yaml: rollout.token_margin 2048 -> 16384"
    assert yaml.safe_load((workdir / "config.yaml").read_text())["rollout"]["token_margin"] == 16384
    again = _apply(workdir, Fix(kind="set_yaml", file="config.yaml", key="rollout.token_margin", value="16384"))
    assert not again.applied and again.already and "already set" in again.description and again.files == []
    r = _apply(workdir, Fix(kind="set_yaml", file=str(workdir / "config.yaml"),
                            key="ray_init.runtime_env.env_vars.no_proxy", value="127.0.0.1,localhost"))
    assert r.applied and r.files == ["config.yaml"]
    assert r.description == "config.yaml: ray_init.runtime_env.env_vars.no_proxy (new) -> 127.0.0.1,localhost"


def test_set_yaml_not_applied(workdir):
    r = _apply(workdir, Fix(kind="set_yaml", file="conf/missing.yaml", key="a", value="1"))
    assert not r.applied and not r.already and r.description == "conf/missing.yaml: no such file in the workdir"
    (workdir / "conf/flow.yaml").write_text("a: {b: 1}\n")
    r = _apply(workdir, Fix(kind="set_yaml", file="conf/flow.yaml", key="a.b", value="2"))
    assert not r.applied and "cannot set a.b safely" in r.description and "\n" not in r.description
    assert (workdir / "conf/flow.yaml").read_text() == "a: {b: 1}\n"
    (workdir / "conf/bad.yaml").write_text("a: [\n")
    r = _apply(workdir, Fix(kind="set_yaml", file="conf/bad.yaml", key="a", value="2"))
    assert not r.applied and "not one valid YAML document" in r.description
    (workdir / "conf/multi.yaml").write_text("a: 1\n---\na: 2\n")
    r = _apply(workdir, Fix(kind="set_yaml", file="conf/multi.yaml", key="a", value="3"))
    assert not r.applied and "cannot set a safely" in r.description and "\n" not in r.description


def test_replace_fix_keeps_mode_and_is_idempotent(workdir):
    r = _apply(workdir, Fix(kind="replace", file="run.sh", old="old", new="new"))
    assert r.applied and r.files == ["run.sh"] and r.description == "run.sh: 'old' -> 'new' (2 places)"
    assert (workdir / "run.sh").read_text() == "#!/bin/sh\necho new new\n"
    assert os.stat(workdir / "run.sh").st_mode & 0o777 == 0o755
    r = _apply(workdir, Fix(kind="replace", file="run.sh", old="old", new="new"))
    assert not r.applied and r.already and "already applied" in r.description
    r = _apply(workdir, Fix(kind="replace", file="run.sh", old="absent", new="x"))
    assert not r.applied and not r.already and r.description == "run.sh: text not found: 'absent'"
    # `new` containing `old`: a second application changes nothing
    r = _apply(workdir, Fix(kind="replace", file="run.sh", old="echo", new="exec echo"))
    assert r.applied and (workdir / "run.sh").read_text() == "#!/bin/sh\nexec echo new new\n"
    r = _apply(workdir, Fix(kind="replace", file="run.sh", old="echo", new="exec echo"))
    assert not r.applied and r.already and "already applied" in r.description


@pytest.mark.parametrize("file", ["../outside.txt", "conf/../../outside.txt", "/etc/hostname", ".", "OUTSIDE_ABS"])
def test_paths_outside_the_workdir_are_refused(workdir, file):
    if file == "OUTSIDE_ABS":
        file = str(workdir.parent / "outside.txt")
    r = _apply(workdir, Fix(kind="replace", file=file, old="old", new="new"))
    assert not r.applied and "outside the workdir" in r.description and r.files == []
    assert (workdir.parent / "outside.txt").read_text() == "old\n"


def test_env_fixes():
    base = {"A": "1"}
    r = _run(apply_fix(None, Fix(kind="set_env", name="B", value="2"), workdir="/w", env=base, unset=["B", "C"]))
    assert r.applied and r.env == {"A": "1", "B": "2"} and r.unset == ["C"] and r.files == []
    assert r.description == "set B=2 for the run" and base == {"A": "1"}  # the caller's dict is not changed
    r = _run(apply_fix(None, Fix(kind="set_env", name="A", value="1"), workdir="/w", env=base, unset=[]))
    assert not r.applied and r.env == base
    r = _run(apply_fix(None, Fix(kind="set_env", name="HF_TOKEN", value="hunter2secret"), workdir="/w", env={},
                       unset=[]))
    assert r.env["HF_TOKEN"] == "hunter2secret" and "hunter2secret" not in r.description

    fix = Fix(kind="unset_env", names=["http_proxy", "https_proxy"])
    r = _run(apply_fix(None, fix, workdir="/w", env={"https_proxy": "http://p:3128", "A": "1"}, unset=[]))
    assert r.applied and r.description == "unset http_proxy, https_proxy for the run"
    assert r.env == {"A": "1"} and r.unset == ["http_proxy", "https_proxy"]
    r = _run(apply_fix(None, fix, workdir="/w", env=r.env, unset=r.unset))
    assert not r.applied and r.already and "already unset" in r.description and r.unset == ["http_proxy", "https_proxy"]
    r = _run(apply_fix(None, Fix(kind="unset_env", names=["bad name"]), workdir="/w", env={}, unset=[]))
    assert not r.applied and r.unset == []


def test_cleanup_retry():
    r = _run(apply_fix(None, Fix(kind="cleanup_retry"), workdir="/w", env={"A": "1"}, unset=["B"]))
    assert r == FixResult(True, "clean up and retry", {"A": "1"}, ["B"], [])


def test_shipped_minichain_fixes_apply_to_the_faulted_config(workdir):
    from harness.playbook import load_merged

    fixes = [s.fix for s in load_merged("minichain").signatures
             if s.fix and s.fix.kind == "set_yaml" and s.fix.file == "config.yaml"]
    assert len(fixes) == 4
    for fix in fixes:
        r = _apply(workdir, fix)
        assert r.applied, r.description
    data = _minichain_loader().load(str(workdir / "config.yaml"))
    assert data == yaml.safe_load((workdir / "config.yaml").read_text())
    assert data["rollout"]["token_margin"] == 16384 and data["rllm"]["agent"]["engine_args"]["n_parallel_agents"] == 1
