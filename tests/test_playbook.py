import subprocess
import sys

import pytest

from harness.analyze import Analyzer
from harness.errors import PlaybookError
from harness.playbook import load_merged, load_playbook, read_file, shipped_names

GOOD = """\
name: {name}
extends: [{parent}]
stages:
  reward:
    markers:
      - {{id: r, regex: 'reward done', evidence: test}}
signatures:
  - {{id: boom, regex: 'Boom(Error)?', category: other, class: code, evidence: test}}
"""


def write(tmp_path, name, text):
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    return p


def test_invalid_regex_names_file_line_field_and_regex(tmp_path):
    p = write(tmp_path, "bad", "name: bad\nsignatures:\n  - id: x\n    regex: 'oops(['\n    category: oom\n"
                               "    evidence: t\n")
    with pytest.raises(PlaybookError) as e:
        read_file(p)
    msg = str(e.value)
    assert f"{p}:4:" in msg and "signatures.0.regex" in msg and "oops([" in msg


def test_unknown_category_and_unknown_field_are_named(tmp_path):
    p = write(tmp_path, "cat", "name: cat\nsignatures:\n  - {id: x, regex: a, category: nope, evidence: t}\n")
    with pytest.raises(PlaybookError, match=r"cat.yaml:3: signatures.0.category"):
        read_file(p)
    p = write(tmp_path, "extra", "name: extra\nstagez: {}\n")
    with pytest.raises(PlaybookError, match=r"extra.yaml:2: stagez"):
        read_file(p)


def test_a_metric_bound_goes_with_its_rule(tmp_path):
    rule = "name: m\nmetric_rules:\n  - {{id: r, metric: loss, when: {when}, category: oom, stage: reward{extra}}}\n"
    for when, extra in [("above", ""), ("below", ""), ("zero", ", limit: 3")]:
        p = write(tmp_path, "m", rule.format(when=when, extra=extra))
        with pytest.raises(PlaybookError, match=r"limit"):
            read_file(p)
    assert read_file(write(tmp_path, "m", rule.format(when="above", extra=", limit: 3"))).metric_rules[0].limit == 3
    assert read_file(write(tmp_path, "m", rule.format(when="below", extra=", limit: 0.1"))).metric_rules[0].limit == 0.1


def test_a_stage_word_names_its_stage_and_a_neutral_one_none(tmp_path):
    words = "name: w\nstage_words:\n  - {{id: s, words: [forward_backward], evidence: t{extra}}}\n"
    for extra in ["", ", neutral: true, stage: actor_update"]:
        with pytest.raises(PlaybookError, match=r"w.yaml:3: stage_words.0.*neutral one none"):
            read_file(write(tmp_path, "w", words.format(extra=extra)))
    assert read_file(write(tmp_path, "w", words.format(extra=", neutral: true"))).stage_words[0].neutral


def test_pattern_without_evidence_must_be_marked_guess(tmp_path):
    p = write(tmp_path, "ev", "name: ev\nnoise:\n  - {id: n, regex: x}\n")
    with pytest.raises(PlaybookError, match="needs `evidence:` or `guess: true`"):
        read_file(p)
    write(tmp_path, "ev2", "name: ev2\nnoise:\n  - {id: n, regex: x, guess: true}\n")
    assert read_file(tmp_path / "ev2.yaml").noise[0].guess


def test_bad_yaml_and_name_mismatch(tmp_path):
    with pytest.raises(PlaybookError, match=r"y.yaml:2: not valid YAML"):
        read_file(write(tmp_path, "y", "name: y\n  - : [\n"))
    with pytest.raises(PlaybookError, match="must equal the file name 'z'"):
        read_file(write(tmp_path, "z", "name: other\n"))


def test_extends_merges_parent_first_and_child_overrides_by_id(tmp_path):
    write(tmp_path, "parent", GOOD.format(name="parent", parent="").replace("extends: []\n", "")
          .replace("category: other", "category: oom"))
    child = write(tmp_path, "child", GOOD.format(name="child", parent="parent"))
    pb = load_merged(str(child))
    assert pb.extends == ["parent"]
    assert [s.id for s in pb.signatures] == ["boom"] and pb.signatures[0].category == "other"
    assert [m.id for m in pb.stages["reward"].markers] == ["r"]


def test_extends_cycle_is_reported(tmp_path):
    write(tmp_path, "a", "name: a\nextends: [b]\n")
    write(tmp_path, "b", "name: b\nextends: [a]\n")
    with pytest.raises(PlaybookError, match="cycle: a -> b -> a"):
        load_merged(str(tmp_path / "a.yaml"))


def test_every_shipped_playbook_loads_and_compiles():
    names = shipped_names()
    for required in ("base", "ray", "vllm", "verl", "rllm", "mindspeed-rl", "ascend", "megatron", "pangu-ascend-rl"):
        assert required in names
    for name in names:
        pb = load_playbook(name)
        assert pb.patterns(), name
    union = {s.id for s in load_playbook(None).source.signatures}
    for name in names:  # every playbook's evidenced signatures, none of its guesses (`guess: true`)
        own = load_playbook(name).source.signatures
        assert {s.id for s in own if not s.guess} <= union, name
        assert not {s.id for s in own if s.guess} & union, name


def test_a_guess_applies_where_its_playbook_is_chosen_not_to_every_log():
    """A `guess: true` pattern is written for one project's logs (pangu-ascend-rl's ten failures,
    from the story): where no playbook is detected or chosen, the union of the shipped ones reads
    an errno text as what every framework means by it, not as that project's setting."""
    log = "OSError: [Errno 24] Too many open files: '/srv/run/data.jsonl'\n"
    union = Analyzer(load_playbook(None))
    union.feed(log)
    union.finish()
    pangu = Analyzer(load_playbook("pangu-ascend-rl"))
    pangu.feed(log)
    pangu.finish()
    assert union.verdict()["root_cause"]["category"] == "other"
    assert pangu.verdict()["root_cause"]["category"] == "config_mismatch"


def test_pangu_playbook_carries_the_ten_failures_with_hints():
    pb = load_merged("pangu-ascend-rl")
    own = [s for s in pb.signatures if s.id.startswith("pangu_")]
    assert len(own) >= 10
    assert all(s.hint for s in own)


def test_cli_playbook_check_and_show(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "harness.cli", "playbook", "check", "playbooks/verl.yaml"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "ok" in ok.stdout
    bad = write(tmp_path, "bad", "name: bad\nnoise:\n  - {id: n, regex: '(', evidence: t}\n")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "playbook", "check", str(bad)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "noise.0.regex" in r.stderr and "Traceback" not in r.stderr
    show = subprocess.run([sys.executable, "-m", "harness.cli", "playbook", "show", "rllm"],
                          capture_output=True, text=True)
    assert show.returncode == 0 and "extends:" in show.stdout and "signatures:" in show.stdout


# ---------------------------------------------------------------- the lookup path

TEAM_VERL = """\
name: verl
description: the team's verl, over the shipped one
extends: [verl]
signatures:
  - {id: team_boom, regex: 'TeamBoomError: the cluster says no', category: other, class: infra, evidence: test}
"""


@pytest.fixture
def path_env(tmp_path, monkeypatch):
    team, user = tmp_path / "team", tmp_path / "config" / "harness" / "playbooks"
    team.mkdir()
    user.mkdir(parents=True)
    monkeypatch.setenv("HARNESS_PLAYBOOKS", f"{tmp_path / 'missing'}:{team}")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return team, user


def test_a_team_playbook_shadows_the_shipped_one_and_extends_it(path_env):
    from harness.playbook import listing, locate, where

    team, user = path_env
    write(team, "verl", TEAM_VERL)
    assert locate("verl") == team / "verl.yaml" and where(team / "verl.yaml") == "$HARNESS_PLAYBOOKS"
    merged = load_merged("verl")
    ids = {s.id for s in merged.signatures}
    assert "team_boom" in ids and ids > {s.id for s in load_merged(str(shipped_dir_file("verl"))).signatures}
    pb = load_playbook("verl")
    assert pb.origins["team_boom"] == "verl ($HARNESS_PLAYBOOKS)"
    rows = {(r["name"], r["where"]): r for r in listing(["verl"])}
    assert rows[("verl", "shipped")]["shadowed_by"] == str((team / "verl.yaml").resolve())
    assert rows[("verl", "$HARNESS_PLAYBOOKS")]["used"] and rows[("verl", "shipped")]["used"]
    assert not rows[("rllm", "shipped")]["used"]


def test_the_user_directory_comes_after_the_team_and_before_shipped(path_env):
    team, user = path_env
    write(user, "mine", GOOD.format(name="mine", parent="base"))
    write(user, "verl", TEAM_VERL.replace("team_boom", "user_boom"))
    assert {"user_boom"} <= {s.id for s in load_merged("verl").signatures}  # no team verl: the user's
    write(team, "verl", TEAM_VERL)  # the team's extends the next verl down the path: the user's, then shipped
    from harness.playbook import locate

    assert locate("verl") == team / "verl.yaml"
    ids = {s.id for s in load_merged("verl").signatures}
    assert {"team_boom", "user_boom", "address_in_use"} <= ids
    assert load_playbook("mine").origins["boom"] == "mine (user)"
    with pytest.raises(PlaybookError, match="nor shipped"):
        load_merged("nosuch")


def test_a_spec_list_is_merged_and_frozen_as_files(path_env, tmp_path):
    from harness.spec import RunSpec

    team, _ = path_env
    write(team, "extra", GOOD.format(name="extra", parent="base"))
    spec = RunSpec.model_validate({"host": "h", "workdir": "/w", "launch": {"command": "x"},
                                   "playbooks": ["minichain", "extra"]}, context={"base": str(tmp_path)})
    assert spec.playbooks == ["minichain", str((team / "extra.yaml").resolve())]
    pb = load_playbook(spec.playbooks)
    assert pb.name == "minichain+extra"
    assert pb.origins["boom"] == "extra ($HARNESS_PLAYBOOKS)"
    assert pb.origins["minichain_worker_proxy"] == "minichain (shipped)"


def test_playbook_list_cli(path_env):
    import json
    import os

    team, _ = path_env
    write(team, "verl", TEAM_VERL)
    r = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "playbook", "list", "--json"],
                       capture_output=True, text=True, env=os.environ.copy(), timeout=60)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [r["where"] for r in rows if r["name"] == "verl"] == ["$HARNESS_PLAYBOOKS", "shipped"]


def shipped_dir_file(name):
    from harness.playbook import shipped_dir

    return shipped_dir() / f"{name}.yaml"


@pytest.mark.parametrize("name", shipped_names())
def test_every_pattern_the_gate_reads_keeps_a_literal(name):
    """The analyzer's gate skips the lines that hold none of its patterns' required literals; one
    pattern with no literal turns the gate off and every line is read closely (a third of the
    speed on the night log: a CANN code written as `\\bE[IJ]\\d{4}(?:…)` once did). Every marker,
    signature and metric line of a shipped playbook must keep one."""
    from harness.patterns import scan_literals

    src = load_merged(name)
    entries = [m for spec in src.stages.values() for m in spec.markers] + src.signatures + src.metric_lines
    bare = [e.id for e in entries if scan_literals(e.regex)[0] is None]
    assert not bare, f"{name}: patterns with no required literal: {bare}"
