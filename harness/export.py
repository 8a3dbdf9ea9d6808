"""`harness export`: a session directory as a fixture directory — its spec, journal and recording
(the recording has every byte a replay serves back, so no attempt logs) and `fixture.json` saying
what it is. With `scrub`, every text goes through a Scrubber (harness/scrub.py) first.

File modes: a scrubbed fixture is meant to be committed, so its files are 0644 (directory 0755);
an unscrubbed one may hold secrets and keeps the session's 0600 (directory 0700).
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from .errors import BadInput
from .scrub import Scrubber, decode_data, is_secret_name, to_bytes, to_text
from .session.detach import LOCK, holder
from .session.journal import Journal

FORMAT = 1


def export_session(session_dir: Path, out: Path, *, scrub: bool, words: Sequence[str] = ()) -> dict:
    """Write the fixture of `session_dir` into `out` (absent or empty); returns its manifest."""
    session_dir, out = Path(session_dir), Path(out)
    spec_text, events, entries = _read_session(session_dir)
    _check_out(out)
    spec_text, playbooks = _own_playbooks(spec_text)
    placeholders: dict[str, int] = {}
    if scrub:
        spec_text, events, entries, placeholders = scrub_session(spec_text, events, entries, words)
    manifest = {"format": FORMAT, "session": session_dir.name, "scrubbed": scrub, "placeholders": placeholders,
                "entries": len(entries), "events": len(events)}
    texts = {"spec.yaml": spec_text, "journal.jsonl": _jsonl(events), "recording.jsonl": _jsonl(entries),
             "fixture.json": json.dumps(manifest, indent=2) + "\n", **playbooks}
    _write_dir(out, texts, public=scrub)
    return manifest


def scrub_session(spec_text: str, events: list, entries: list, words: Sequence[str] = ()):
    """(spec text, events, entries, placeholders by kind), scrubbed: pass 1 over all three, then pass 2."""
    s = _scrubber(spec_text, words)
    images = _file_images(entries)
    s.collect(spec_text)
    s.collect_value(events)
    s.collect_value(entries)
    for _, image, _ in images:  # a value cut in two by consecutive reads of one log
        s.collect(to_text(image))
    done = _scrub_images(s, images)
    entries = [{k: done[id(e)] if k == "data" and id(e) in done else s.scrub_value(v, k) for k, v in e.items()}
               for e in entries]
    return s.scrub(spec_text), s.scrub_value(events), entries, s.placeholders


def _scrubber(spec_text: str, words: Sequence[str]) -> Scrubber:
    """A Scrubber knowing what the spec and this machine say is private: the host and user, launch.env
    values with secret names, the model key if set here, this machine's names."""
    try:
        spec = yaml.safe_load(spec_text)
    except yaml.YAMLError:
        spec = None  # still scrubbed as text below
    spec = spec if isinstance(spec, dict) else {}
    env = spec["launch"].get("env") if isinstance(spec.get("launch"), dict) else None
    secrets = [v for k, v in (env if isinstance(env, dict) else {}).items() if is_secret_name(str(k))]
    key_env = (spec.get("model") or {}).get("api_key_env") if isinstance(spec.get("model"), dict) else None
    if isinstance(key_env, str) and os.environ.get(key_env):
        secrets.append(os.environ[key_env])
    hosts = [spec.get("host"), socket.gethostname()]  # not getfqdn(): it may ask a DNS server
    names = [h for h in hosts if isinstance(h, str) and h]
    for h in list(names):  # gpu1.corp.example: also gpu1 and corp.example alone
        label, _, domain = h.partition(".")
        if domain and not label.isdigit():
            names += [label] + ([domain] if "." in domain else [])
    users = [u for u in (spec.get("user"), _login()) if isinstance(u, str)]
    return Scrubber(secrets=secrets, hosts=names, users=users, words=[w for w in words if w.strip()])


def _own_playbooks(spec_text: str) -> tuple[str, dict[str, str]]:
    """A playbook the spec names by its file on this machine travels with the fixture (a replay
    elsewhere needs the same patterns): copied in under its file name, which the spec then names
    (relative to the spec's directory). Shipped playbooks stay names. Playbooks are knowledge,
    not session data: they are copied as they are, never scrubbed (a changed regex would change
    the verdicts). A playbook it `extends:` by file is not copied: ship it, or name a shipped one."""
    spec = yaml.safe_load(spec_text)
    names = spec.get("playbooks") if isinstance(spec, dict) else None
    files = {}
    for i, name in enumerate(names or []):
        if isinstance(name, str) and name.startswith("/"):
            base = Path(name).name  # a playbook's name is its file's
            if base in files or base in ("spec.yaml", "fixture.json") or not base.endswith(".yaml"):
                raise BadInput(f"the session's playbook {name} cannot travel with the fixture under its file name; "
                               "rename it (NAME.yaml, unique) and export again")
            try:
                files[base] = Path(name).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise BadInput(f"the session's playbook {name} cannot be read ({e}); a replay needs it: "
                               "restore it, then export again") from None
            names[i] = base
    if not files:
        return spec_text, {}
    return yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=120), files


def _login() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return None


def _file_images(entries: list) -> list[tuple[int, bytes, list[tuple[dict, bytes]]]]:
    """The reads of each file grouped by the file's content they saw, as (offset of the image,
    the image, its reads): a read that agrees with what earlier reads of the path saw where they
    overlap (a log's next lines, its head read again to notice a rotation) joins their image; one
    that does not (a file rewritten, truncated) starts a new one."""
    groups: list[tuple[int, bytearray, list]] = []
    latest: dict = {}
    for e in entries:
        if e.get("k") != "read" or not isinstance(e.get("offset"), int) or not isinstance(e.get("data"), str):
            continue
        raw = decode_data(e["data"])
        if raw is None:
            continue
        g = latest.get(e.get("path"))
        if g is not None:
            base, image, reads = g
            at = e["offset"] - base
            if 0 <= at <= len(image) and image[at:at + len(raw)] == raw[:len(image) - at]:
                image.extend(raw[len(image) - at:])
                reads.append((e, raw))
                continue
        g = (e["offset"], bytearray(raw), [(e, raw)])
        groups.append(g)
        latest[e.get("path")] = g
    return [(base, bytes(image), reads) for base, image, reads in groups]


def _scrub_images(s: Scrubber, images: list) -> dict[int, str]:
    """New `data` by id(entry): each file image scrubbed whole and every read cut from it where it
    was cut, so a value split between two reads is hidden and a re-read of the head still equals
    the first read — when the image's length held (it does unless a value was shorter than its
    placeholder); else its reads are scrubbed one by one."""
    done: dict[int, str] = {}
    for base, image, reads in images:
        clean = to_bytes(s.scrub(to_text(image)))
        if len(clean) != len(image):
            continue
        for e, raw in reads:
            at = e["offset"] - base
            done[id(e)] = base64.b64encode(clean[at:at + len(raw)]).decode()
    return done


def _read_session(d: Path) -> tuple[str, list, list]:
    if not (d / "journal.jsonl").is_file():
        raise BadInput(f"{d} is not a session directory (no journal.jsonl); give a session id or its directory")
    if not (d / "recording.jsonl").is_file():
        raise BadInput(f"session {d.name} has no recording (it was recorded before recordings existed); "
                       f"nothing to export")
    if not (d / "spec.yaml").is_file():
        raise BadInput(f"session {d.name} has no spec.yaml; a fixture needs the spec its controller ran")
    pid = holder(d) if (d / LOCK).exists() else None  # no lock file: no controller ever ran here (a fixture)
    if pid is not None:
        raise BadInput(f"session {d.name} is running (controller pid {pid}); `harness stop {d.name}` "
                       f"first, or export it when it has ended")
    try:
        spec_text = (d / "spec.yaml").read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{d / 'spec.yaml'} is not UTF-8 ({e.reason}); the session directory is damaged") from None
    # the recording as written (a repeated command stays a reference to its first entry)
    return spec_text, Journal.read(d / "journal.jsonl"), Journal.read(d / "recording.jsonl")


def _jsonl(objs: list) -> str:
    return "".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")) + "\n" for o in objs)


def _check_out(out: Path) -> None:
    if out.exists() and not (out.is_dir() and not any(out.iterdir())):
        raise BadInput(f"{out} exists and is not an empty directory; give a new path (or empty it)")


def _write_dir(out: Path, texts: dict[str, str], *, public: bool) -> None:
    """All files into a temporary directory beside `out`, then renamed into place: never half a fixture."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as e:
        raise BadInput(f"cannot write {out}: {e.strerror or e}; give a writable path") from None
    try:
        for name, text in texts.items():
            fd = os.open(tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644 if public else 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.chmod(tmp / name, 0o644 if public else 0o600)  # whatever the umask
        os.chmod(tmp, 0o755 if public else 0o700)
        if out.is_dir():
            out.rmdir()  # empty (checked); rename cannot replace it otherwise
        os.rename(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BadInput(f"cannot write {out}: {e.strerror or e}; give a writable path") from None
