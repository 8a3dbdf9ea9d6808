"""The run spec (harness.yaml): defaults, errors naming file:line:field, `-c` overrides,
durations, the model key's name, dump_spec, and `harness init` run as a user runs it."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from harness.errors import SpecError
from harness.spec import RunSpec, dump_spec, format_duration, load_spec, parse_duration
from harness.spec_template import render

ROOT = Path(__file__).resolve().parent.parent
BASE = "host: gpu1\nworkdir: /w\nlaunch:\n  command: bash run.sh\n"  # lines 1-4


def harness(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def spec_at(tmp_path, text: str) -> Path:
    p = tmp_path / "harness.yaml"
    p.write_text(text)
    return p


def error(tmp_path, text: str, overrides=()) -> SpecError:
    with pytest.raises(SpecError) as e:
        load_spec(spec_at(tmp_path, text), overrides)
    return e.value


def test_defaults(tmp_path):
    s = load_spec(spec_at(tmp_path, BASE))
    assert (s.host, s.transport, s.workdir, s.launch.command) == ("gpu1", "asyncssh", "/w", "bash run.sh")
    assert (s.launch.timeouts, s.launch.stall, s.launch.settle, s.launch.devices) == ({}, 600, 20, 1)
    assert (s.playbooks, s.passing.actor_updates, s.keep_run, s.model, s.notify) == ([], 2, False, None, [])
    b = s.budgets
    assert (b.relaunches, b.agent_steps, b.tokens, b.money, b.wall_clock) == (20, 200, 2_000_000, 20.0, 8 * 3600)
    assert (b.accelerator_hours, b.stuck_after, b.infra_retries, b.agent_steps_per_attempt) == (None, 3, 2, 40)
    assert (s.policy.deny, s.policy.protected, s.ledger.exclude) == ([], [], [])


def test_full_spec_loads(tmp_path):
    s = load_spec(spec_at(tmp_path, BASE + (
        "  timeouts: {engine_start: 30m, actor_update: 7200}\n  stall: 20m\n  devices: 16\n"
        "playbooks: [verl]\npass_rule: {actor_updates: 2}\nkeep_run: true\n"
        "model:\n  base_url: http://127.0.0.1:8000/v1\n  name: qwen\n  api_key_env: QWEN_KEY\n  price_in: 0.5\n"
        "budgets: {wall_clock: 1h30m, accelerator_hours: 64, stuck_after: 2}\n"
        "policy: {deny: ['\\bsudo\\b'], protected: [checkpoints/]}\nledger: {exclude: ['*.pt']}\n"
        "notify: [$NOTIFY_URL, 'ntfy://topic']\n")))
    assert s.launch.timeouts == {"engine_start": 1800, "actor_update": 7200} and s.launch.stall == 1200
    assert s.passing.actor_updates == 2 and s.keep_run and s.launch.devices == 16
    assert (s.model.name, s.model.api_key_env, s.model.price_in, s.model.max_retries) == ("qwen", "QWEN_KEY", 0.5, 6)
    assert (s.budgets.wall_clock, s.budgets.accelerator_hours, s.budgets.stuck_after) == (5400, 64, 2)
    assert s.policy.deny == [r"\bsudo\b"] and s.ledger.exclude == ["*.pt"]


# (text appended to BASE, line, field, a piece of the message)
SECTION_ERRORS = [
    ("  timeouts:\n    engine_start: 1m\n    bogus: 5\n", 7, "launch.timeouts.bogus", "unknown stage 'bogus'"),
    ("  stall: forever\n", 5, "launch.stall", "not a duration: 'forever'"),
    ("  settle: 0\n", 5, "launch.settle", "greater than 0"),
    ("  devices: many\n", 5, "launch.devices", "valid integer"),
    ("  env:\n    OK: '1'\n    1BAD: x\n", 7, "launch.env.1BAD", "not an environment variable name"),
    ("  env: {A: 1}\n", 5, "launch.env.A", 'quote it: "1"'),
    ("preflight: {ports: [80, http]}\n", 5, "preflight.ports.1", "valid integer"),
    ("playbooks:\n  - verl\n  - nosuch\n", 7, "playbooks.1", "no playbook 'nosuch'"),
    ("pass_rule:\n  actor_updates: 0\n", 6, "pass_rule.actor_updates", "greater than or equal to 1"),
    ("passing: {actor_updates: 2}\n", 5, "passing", "unknown field; known here: host, user"),
    ("keep_run: maybe\n", 5, "keep_run", "valid boolean"),
    ("model:\n  base_url: ftp://x\n  name: m\n", 6, "model.base_url", "not an http(s) URL"),
    ("model:\n  base_url: http://127.0.0.1/v1\n", 6, "model.name", "Field required"),  # the section's first line
    ("model:\n  base_url: https://api.x.com\n  name: m\n  api_key_env: my key\n", 8, "model.api_key_env",
     "not an environment variable name"),
    ("model:\n  base_url: http://h\n  name: m\n  temprature: 1\n", 8, "model.temprature",
     "unknown field; known here: base_url, name, api_key_env, temperature"),
    ("budgets:\n  money: 5\n  relaunches: -1\n", 7, "budgets.relaunches", "greater than or equal to 0"),
    ("budgets:\n  wall_clock: 8 hours\n", 6, "budgets.wall_clock", "not a duration: '8 hours'"),
    ("budgets:\n  stuck_after: 0\n", 6, "budgets.stuck_after", "greater than or equal to 1"),
    ("policy:\n  deny:\n    - ok\n    - '(['\n", 8, "policy.deny.1", "invalid regex '(['"),
    ("policy:\n  protected: ['']\n", 6, "policy.protected.0", "at least 1 character"),
    ("ledger:\n  exclude: 5\n", 6, "ledger.exclude", "valid list"),
    ("notify: [not-a-url]\n", 5, "notify", "not an apprise URL"),
    ("transport: telnet\n", 5, "transport", "'asyncssh', 'paramiko' or 'local'"),
]


@pytest.mark.parametrize("extra,line,field,needle", SECTION_ERRORS, ids=[c[2] for c in SECTION_ERRORS])
def test_each_section_error_names_file_line_and_field(tmp_path, extra, line, field, needle):
    e = error(tmp_path, BASE + extra)
    assert str(e).startswith(f"{tmp_path / 'harness.yaml'}:{line}: {field}: "), str(e)
    assert needle in str(e) and "\n" not in str(e)
    assert (e.line, e.field) == (line, field)


def test_unreadable_and_non_mapping_files(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    assert "is a YAML mapping" in str(error(tmp_path, "- a\n"))
    assert "not valid YAML" in str(error(tmp_path, BASE + "  env: {A: [}\n"))


def test_overrides_nested_new_keys_and_values(tmp_path):
    p = spec_at(tmp_path, BASE + "budgets: {relaunches: 3}\nmodel: {base_url: 'http://h/v1', name: m}\n")
    s = load_spec(p, ["budgets.relaunches=5", "launch.env.FOO=bar", "keep_run=true", "budgets.wall_clock=90m",
                      "launch.env.N=1", "cleanup=[ray stop --force, pkill x]", "launch.command=echo a: b # c",
                      "pass_rule.actor_updates=3", "launch.timeouts.reward=1h"])
    assert s.budgets.relaunches == 5 and s.launch.env == {"FOO": "bar", "N": "1"} and s.keep_run is True
    assert s.budgets.wall_clock == 5400 and s.cleanup == ["ray stop --force", "pkill x"]
    assert s.launch.command == "echo a: b # c" and s.passing.actor_updates == 3
    assert s.launch.timeouts == {"reward": 3600} and s.model.name == "m"
    assert load_spec(p, ["model=null"]).model is None
    assert load_spec(p, ["budgets.relaunches=5", "budgets.relaunches=7"]).budgets.relaunches == 7
    assert load_spec(p, ["cleanup=[a, b]", "cleanup.1=c"]).cleanup == ["a", "c"]
    s = load_spec(spec_at(tmp_path, BASE), ["model.base_url=http://127.0.0.1:9/v1", "model.name=scripted"])
    assert (s.model.base_url, s.model.name) == ("http://127.0.0.1:9/v1", "scripted")


def test_overrides_can_complete_a_spec(tmp_path):
    s = load_spec(spec_at(tmp_path, "workdir: /w\nlaunch: {command: x}\n"), ["host=gpu2"])
    assert s.host == "gpu2"


def test_an_override_error_names_the_override(tmp_path):
    p = spec_at(tmp_path, BASE + "budgets: {relaunches: 3}\n")
    for overrides, want in [
        (["budgets.relaunches=abc"], "-c budgets.relaunches=abc: budgets.relaunches: Input should be a valid integer"),
        (["keep_run=true", "budgets.relaunchez=1"], "-c budgets.relaunchez=1: budgets.relaunchez: unknown field"),
        (["model.name=m"], "-c model.name=m: model.base_url: Field required"),
        (["launch.timeouts.bogus=5"], "-c launch.timeouts.bogus=5: launch.timeouts.bogus: unknown stage"),
        (["launch.env.1X=a"], "-c launch.env.1X=a: launch.env.1X: not an environment variable name"),
        (["launch={}"], "-c launch={}: launch.command: Field required"),
        (["policy.deny=['(']"], "-c policy.deny=['(']: policy.deny.0: invalid regex"),
    ]:
        with pytest.raises(SpecError) as e:
            load_spec(p, overrides)
        assert str(e.value).startswith(want), str(e.value)
        assert e.value.line is None


def test_a_file_error_is_still_the_files_with_overrides_given(tmp_path):
    e = error(tmp_path, BASE + "budgets:\n  money: lots\n", ["budgets.relaunches=5"])
    assert str(e).startswith(f"{tmp_path / 'harness.yaml'}:6: budgets.money: ")


@pytest.mark.parametrize("bad,why", [
    ("nope", "use key.sub=value"), ("=5", "use key.sub=value"), ("a..b=1", "use key.sub=value"),
    (".a=1", "use key.sub=value"), ("a b=1", "use key.sub=value"),
    ("launch.command.x=1", "launch.command is a value, not a section"),
    ("cleanup.5=x", "cleanup is a list of 1: give an index below it"),
    ("launch.logs=[x", "not a valid YAML value; quote the value or fix its brackets"),
])
def test_malformed_overrides(tmp_path, bad, why):
    e = error(tmp_path, BASE + "cleanup: [a]\n", [bad])
    assert str(e) == f"bad -c override {bad!r}: {why}"


@pytest.mark.parametrize("text,seconds", [("90m", 5400), ("8h", 28800), ("1h30m", 5400), ("45s", 45), ("3600", 3600),
                                          (3600, 3600), (2.5, 2.5), ("1.5h", 5400), ("1d", 86400), (" 2h 5m ", 7500)])
def test_wall_clock_parsing(tmp_path, text, seconds):
    p = spec_at(tmp_path, BASE + f"budgets: {{wall_clock: {text!r}}}\n" if isinstance(text, str)
                else BASE + f"budgets: {{wall_clock: {text}}}\n")
    assert load_spec(p).budgets.wall_clock == seconds
    assert load_spec(spec_at(tmp_path, BASE), [f"budgets.wall_clock={text}"]).budgets.wall_clock == seconds


@pytest.mark.parametrize("bad", ["8 hours", "h", "", "1h30", "-5", "0", "m5", True])
def test_wall_clock_refuses(tmp_path, bad):
    e = error(tmp_path, BASE, [f"budgets.wall_clock={str(bad).lower()}"])
    assert e.field == "budgets.wall_clock"


@given(st.integers(min_value=1, max_value=10**7))
def test_format_duration_reads_back(n):
    assert parse_duration(format_duration(n)) == n


@pytest.mark.parametrize("key", ["sk-proj-Abcdefghijklmnop1234567890", "sk-1234", "ghp_" + "a1B2" * 8,
                                 "AbCdEfGh12345678IjKlMnOp", "x" * 40])
def test_api_key_env_refuses_a_literal_key(tmp_path, key):
    text = BASE + f"model:\n  base_url: https://api.example.com/v1\n  name: m\n  api_key_env: '{key}'\n"
    e = error(tmp_path, text)
    assert str(e).endswith("model.api_key_env: this looks like a key: put the key in an environment variable "
                           "and give its name") and e.line == 8
    assert key not in str(e)
    e = error(tmp_path, BASE + "model: {base_url: 'http://h', name: m}\n", [f"model.api_key_env={key}"])
    assert key not in str(e) and str(e).startswith("-c model.api_key_env=<redacted>: model.api_key_env: this looks")


def test_api_key_env_takes_names_and_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_TEST_KEY", "s3cret-value")
    for name in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY", "my_key", "HARNESS_TEST_KEY"):
        s = load_spec(spec_at(tmp_path, BASE + f"model: {{base_url: 'https://x/v1', name: m, api_key_env: {name}}}\n"))
        assert s.model.api_key_env == name
    assert s.model.api_key() == "s3cret-value" and "s3cret-value" not in dump_spec(s)
    e = error(tmp_path, BASE + "model: {base_url: 'https://me:pw@x/v1', name: m}\n")
    assert "no credentials in the URL" in str(e) and "pw" not in str(e)


def test_dump_spec_round_trips(tmp_path):
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    p = spec_at(tmp_path, BASE + "playbooks: [verl, mine.yaml]\nmodel: {base_url: 'http://h/v1', name: m}\n"
                "budgets: {wall_clock: 2h}\nnotify: ['json://user:pass@example.com/hook']\n")
    s = load_spec(p, ["launch.env.A=1", "pass_rule.actor_updates=2"])
    assert s.playbooks == ["verl", str((tmp_path / "mine.yaml").resolve())]
    text = dump_spec(s)
    assert "pass_rule:" in text and "pass:" not in text and "user:pass" not in text
    frozen = tmp_path / "elsewhere" / "spec.yaml"
    frozen.parent.mkdir()
    frozen.write_text(text)
    again = load_spec(frozen)
    assert again.model_dump(exclude={"notify"}) == s.model_dump(exclude={"notify"})


def _fields(model, prefix=""):
    from harness.spec_template import _section

    for name, f in model.model_fields.items():
        key = prefix + (f.alias or name)
        yield key
        if _section(f):
            yield from _fields(_section(f), key + ".")


def test_every_field_has_a_description():
    from harness.spec_template import _section

    def walk(model):
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
            if _section(f):
                walk(_section(f))
    walk(RunSpec)


def test_init_writes_a_spec_that_loads_and_documents_every_field(tmp_path):
    r = harness("init", "--host", "gpu1", "--command", "bash scripts/run.sh", "--workdir", "/home/me/rl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "wrote harness.yaml: edit model: and budgets:, then `harness run harness.yaml`"
    text = (tmp_path / "harness.yaml").read_text()
    s = load_spec(tmp_path / "harness.yaml")
    assert (s.host, s.transport, s.workdir) == ("gpu1", "asyncssh", "/home/me/rl")
    assert s.launch.command == "bash scripts/run.sh"
    assert s.model is None and s.budgets.relaunches == 20  # optional sections are commented out
    for key in _fields(RunSpec):
        leaf = key.rsplit(".", 1)[-1]
        assert re.search(rf"^\s*(# )?\s*{leaf}:.*# \S", text, re.M), f"{key} is not in the template with a comment"
    assert max(map(len, text.splitlines())) <= 120


def test_init_template_uncommented_loads_with_its_examples(tmp_path):
    """What a user gets by uncommenting every line: valid YAML and a valid spec."""
    r = harness("init", "-o", "spec.yaml", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "spec.yaml").read_text()
    uncommented = re.sub(r"^(\s*)# (\s*[a-z_]+:)", r"\1\2", text, flags=re.M)
    assert "\n# model:" in text and "\nmodel:" in uncommented
    s = load_spec(spec_at(tmp_path, uncommented))
    assert (s.host, s.transport, s.workdir) == ("localhost", "local", str(tmp_path.resolve()))
    assert (s.model.name, s.model.api_key_env, s.budgets.wall_clock, s.launch.stall) == (
        "deepseek-chat", "DEEPSEEK_API_KEY", 8 * 3600, 600)
    assert s.launch.timeouts == {"engine_start": 1800} and s.playbooks == ["verl"]
    given = s.model_dump(include={"host", "transport", "workdir", "launch"})
    everything = load_spec(spec_at(tmp_path, render(given, everything=True)))
    assert everything.model_dump() == s.model_dump()


def test_init_refuses_to_overwrite_without_force(tmp_path):
    (tmp_path / "harness.yaml").write_text("mine\n")
    r = harness("init", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == "error: harness.yaml exists; use --force to overwrite it\n"
    assert (tmp_path / "harness.yaml").read_text() == "mine\n"
    r = harness("init", "--force", "--command", "python train.py --x 1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert load_spec(tmp_path / "harness.yaml").launch.command == "python train.py --x 1"


@pytest.mark.parametrize("args,err", [
    (("--host", "h", "--workdir", "rel"), "error: --workdir: workdir must be an absolute path on the host, got 'rel'"),
    (("--transport", "telnet"), "error: --transport: Input should be 'asyncssh', 'paramiko' or 'local'"),
    (("--command", ""), "error: --command: String should have at least 1 character"),
])
def test_init_bad_flags_are_one_line(tmp_path, args, err):
    r = harness("init", *args, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == err + "\n" and not (tmp_path / "harness.yaml").exists()
