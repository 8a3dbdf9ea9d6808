import subprocess
import sys

import pytest

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
    union = load_playbook(None)
    assert len(union.source.signatures) >= max(len(load_playbook(n).source.signatures) for n in names)


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
