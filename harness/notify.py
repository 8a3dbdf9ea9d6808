"""Phone notifications through apprise: a stage reached for the first time in the session, the
chain passed, stuck, out of budget, or a person needed.

    notifier = Notifier(spec.notify, session_id)    # "$NAME" entries read from the environment
    notifier(ev, state)                             # from Session.emit's ui hook; never blocks
    notifier.close(timeout=10)                      # at session end: wait (bounded) for the sends

`message_for` (pure) decides what an event says; `Notifier` delivers it on one worker thread,
in order, so a slow or dead endpoint never holds up the controller and a failed push never
raises into it (failures are counted, and reported once, in one line). Notify URLs carry
tokens: no URL is ever printed, and message text passes through `redact`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import Callable, Mapping, NamedTuple

from .chain import STAGES
from .redact import redact

log = logging.getLogger(__name__)

TITLE_MAX, BODY_MAX = 60, 200


class Message(NamedTuple):
    """What a phone shows: `title` (≤ 60 chars, names the session) and `body` (≤ 200 chars)."""

    title: str
    body: str
    level: str = "info"  # info | success | warning | failure (apprise's notify types)


# ---------------------------------------------------------------------------- what to say
def message_for(ev: dict, state, seen: set) -> Message | None:
    """The phone message for a journal event, or None. Pure but for `seen`, the stage numbers
    already announced in this session (the caller keeps it across calls; it is updated here).

    `state` is the folded session state (harness.session.state.State) with or without `ev`
    applied; stages reached before a resume count as reached, so `continue` does not announce
    them again. A stage is announced only when it is further than any reached before."""
    session = getattr(state, "session", "") or ev.get("session", "") or "?"
    kind = ev.get("type")
    if kind == "stage":
        no = ev["stage"]
        if no <= max(seen | _earlier_stages(state, ev), default=0):
            return None
        seen.add(no)
        n = ev.get("attempt", "?")
        return _msg(session, f"{_stage_name(no)} reached",
                    f"Attempt {n} reached stage {no}/{len(STAGES)} {_stage_name(no)}, the furthest yet: "
                    f"{_marks(no)}. The run goes on; next word when it gets further or the session ends.")
    if kind != "end":
        return None
    reason, detail = ev.get("reason", ""), " ".join(str(ev.get("detail") or "").split())
    attempts = getattr(state, "attempts", None) or []
    took = _took(state, ev)
    if reason == "passed":
        return _msg(session, "chain passed",
                    f"Attempt {len(attempts) or '?'} passed all {len(STAGES)} stages {_marks(len(STAGES))}{took}, "
                    f"{_count(max(len(attempts) - 1, 0), 'relaunch')}.", "success", tail=f" Next: harness report {session}")
    where = _where(attempts) + took + ". "
    if reason == "stuck":
        return _msg(session, "stuck, needs a person", where + _sentence(detail or "the same failure repeated"),
                    "failure", tail=" Next: harness report")
    if reason.startswith("budget:"):
        which = reason.split(":", 1)[1]
        return _msg(session, f"out of budget ({which})", where + _sentence(detail or f"the {which} budget is spent"),
                    "warning", tail=f" Next: raise budgets.{which}, harness continue")
    if reason == "gave_up":
        return _msg(session, "needs a person", where + "Gave up: " + _sentence(detail or "no fix found"),
                    "failure", tail=" Next: harness report")
    if reason == "unreachable":
        return _msg(session, "host unreachable", where + _sentence(detail or "the host stayed unreachable"),
                    "failure", tail=" Next: check the host, then harness continue")
    if reason == "error" or (reason == "stopped" and _stopped_by_error(detail)):
        return _msg(session, "stopped by an error", where + _sentence(detail or "the controller stopped on an error"),
                    "failure", tail=" Next: harness status, then continue")
    return None


def _stopped_by_error(detail: str) -> bool:
    """A `stopped` end is an error when its detail is empty (the controller ended on an exception
    it did not expect) or starts with "error"; any other detail ("interrupted", a stop somebody
    asked for) was deliberate, and whoever did it knows: no message."""
    return not detail or detail.lower().startswith("error")


def _earlier_stages(state, ev: dict) -> set[int]:
    """Stages reached in the session before `ev` (which `state` may already hold)."""
    out: set[int] = set()
    for a in getattr(state, "attempts", None) or ():
        out.update(s for s in a.stages if not (a.n == ev.get("attempt") and s == ev.get("stage")))
    return out


def _where(attempts: list) -> str:
    if not attempts:
        return "Before any attempt"
    furthest = max(a.reached for a in attempts)
    return f"Attempt {len(attempts)}, furthest stage {furthest}/{len(STAGES)}" + \
        (f" {_stage_name(furthest)}" if furthest else "")


def _took(state, ev: dict) -> str:
    started, end = getattr(state, "started", None), ev.get("t")
    return f", {_duration(end - started)}" if started is not None and end is not None else ""


def _sentence(text: str) -> str:
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _msg(session: str, what: str, body: str, level: str = "info", tail: str = "") -> Message:
    """Redact, then fit: the title keeps `what` whole (the session id is shortened if it must
    be), the body keeps `tail` (what to do next) whole."""
    what, body, tail, session = redact(what), redact(body), _fit(redact(tail), BODY_MAX // 2), redact(session)
    room = TITLE_MAX - len("harness : ") - len(what)
    if len(session) > room:
        session = session[: max(room - 1, 1)] + "…"
    title = f"harness {session}: {what}"[:TITLE_MAX]
    return Message(title, _fit(body, BODY_MAX - len(tail)) + tail, level)


def _fit(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("ch") else "s")


def _stage_name(no: int) -> str:
    return STAGES[no - 1] if 1 <= no <= len(STAGES) else f"stage {no}"


def _marks(no: int) -> str:
    return "✓" * no + "·" * (len(STAGES) - no)


def _duration(seconds: float) -> str:
    s = max(int(seconds), 0)
    if s < 60:
        return f"{s}s"
    h, m = divmod(s // 60, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m"


# ---------------------------------------------------------------------------- delivery
class Notifier:
    """Sends `message_for`'s messages to the spec's apprise URLs, in order, off the caller's thread.

    `urls`: apprise URLs, or `$NAME` / `${NAME}` of an environment variable holding one; an unset
    variable is skipped with a one-line warning naming the variable. `warn` receives each warning
    line (default: this module's logger). Counters: `sent`, `failed` (messages not delivered to
    every URL; the first failure is reported once, later ones only counted)."""

    def __init__(self, urls: list[str], session: str, *, env: Mapping[str, str] | None = None,
                 warn: Callable[[str], None] | None = None):
        self.session, self.seen = session, set()
        self.sent = self.failed = 0
        self._warn = warn or log.warning
        self._apprise = None
        self._queue: deque[Message] = deque()
        self._cond = threading.Condition()
        self._busy = False
        self._closed = False
        self._thread: threading.Thread | None = None
        env = os.environ if env is None else env
        resolved: list[tuple[str, str]] = []  # (how to name it in a warning, the URL)
        for i, entry in enumerate(urls, 1):
            if entry.startswith("$"):
                name = entry[1:].strip("{}")
                if not env.get(name, "").strip():
                    self._warn(f"notify: ${name} is not set; skipping it")
                    continue
                resolved.append((f"${name}", env[name].strip()))
            else:
                resolved.append((f"notify entry {i}", entry))
        if not resolved:
            return
        import apprise  # only when there is something to send: it is slow to import

        self._apprise = apprise.Apprise()
        for label, url in resolved:
            if not self._apprise.add(url):
                self._warn(f"notify: {label} is not a URL apprise can use; skipping it")
        if not len(self._apprise):
            self._apprise = None

    @property
    def enabled(self) -> bool:
        return self._apprise is not None

    def __call__(self, ev: dict, state) -> None:
        """The controller's ui hook: queue the event's message, if it has one. Never raises."""
        if not self.enabled:
            return
        try:
            msg = message_for(ev, state, self.seen)
        except Exception as exc:  # a bad event must not stop the session; say so once
            self._failure(f"notify: could not word a message for a {ev.get('type')!r} event "
                          f"({type(exc).__name__})")
            return
        if msg:
            self.send(*msg)

    def send(self, title: str, body: str, level: str = "info") -> None:
        """Queue one message (redacted again here, for direct callers); returns at once."""
        if not self.enabled or self._closed:
            return
        with self._cond:
            self._queue.append(Message(redact(title), redact(body), level))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="harness-notify", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait up to `timeout` seconds for every queued message to be sent (or to fail);
        True when nothing is left pending."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, timeout: float = 10.0) -> bool:
        """Flush (bounded), then stop the worker; later messages are dropped. True if all went out.
        A send still hanging after `timeout` is abandoned on its daemon thread."""
        done = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closed)
                if not self._queue:
                    return
                msg = self._queue.popleft()
                self._busy = True
            ok = self._deliver(msg)
            with self._cond:
                self._busy = False
                if ok:
                    self.sent += 1
                self._cond.notify_all()
            if not ok:
                self._failure("notify: a message could not be delivered (the session goes on; "
                              "further failures are only counted)")

    def _deliver(self, msg: Message) -> bool:
        try:
            return bool(self._apprise.notify(body=msg.body, title=msg.title, notify_type=msg.level))
        except Exception:  # apprise or a plugin raising must not kill the worker
            return False

    def _failure(self, line: str) -> None:
        with self._cond:
            self.failed += 1
            first = self.failed == 1
        if first:
            self._warn(line)
