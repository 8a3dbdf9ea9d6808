"""rich views of verdicts. Only the CLI imports this."""

from __future__ import annotations

import contextlib
import errno
import sys

from rich.console import Console
from rich.text import Text

from .analyze.verdict import basis_note
from .chain import STAGES

_STYLE = {"passed": ("✓", "green"), "implied": ("✓", "dim green"), "failed": ("✗", "bold red"),
          "not_reached": ("·", "dim")}
_OUTCOME = {"pass": "bold green", "crash": "bold red", "hang": "bold yellow", "wrong_result": "bold magenta",
            "running": "cyan", "unknown": "dim"}


def cli_console(cls: type[Console] = Console) -> Console:
    """The CLI's console: on a terminal rich's own; piped or redirected, lines are never wrapped at
    80 columns (a file or `grep` gets each line whole)."""
    return cls(highlight=False, soft_wrap=not sys.stdout.isatty())


class ViewConsole(Console):
    """A session view's console: a reader gone away (a closed pipe) is an error its view handles,
    where rich's default ends the process (and with it an unattended session)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError(errno.EPIPE, "the output's reader went away")


def chain_bar(verdict: dict) -> Text:
    bar = Text()
    for i, st in enumerate(verdict["stages"]):
        mark, style = _STYLE[st["status"]]
        bar.append(f"{mark} {st['name']}", style=style)
        if i < len(STAGES) - 1:
            bar.append(" → ", style="dim")
    return bar


def show_verdict(console: Console, verdict: dict) -> None:
    head = Text(f"{verdict['file']}  ", style="bold")
    head.append(verdict["outcome"].upper(), style=_OUTCOME[verdict["outcome"]])
    fs = verdict["failed_stage"]
    head.append(f"  last passed: {verdict['last_stage_passed']}/7"
                + (f"  failed: {fs} {STAGES[fs - 1]}{basis_note(verdict)}" if fs
                   else "  failed: stage unknown" if verdict["outcome"] in ("crash", "hang") else "")
                + f"  [playbook {verdict['playbook']}]", style="dim")
    console.print(head)
    console.print(chain_bar(verdict))
    rc = verdict["root_cause"]
    if rc:
        count = f" ×{rc['count']}" if rc["count"] > 1 else ""
        console.print(Text(f"root cause (line {rc['line_no']}{count}, {rc['category']}, {rc['class']}):", style="bold"))
        text = rc["text"] if len(rc["text"]) <= 400 else rc["text"][:400] + " …"
        console.print(Text("  " + (f"{rc['detail']}  in: {text[:160]} …" if rc.get("detail") else text)))
        if rc["hint"]:
            console.print(Text("  hint: " + rc["hint"], style="yellow"))
        if rc.get("signature"):
            console.print(Text(f"  signature: {rc['signature']}" + (f" from {rc['origin']}" if rc.get("origin") else ""),
                               style="dim"))
    m = verdict["metrics"]
    if m["steps"]:
        console.print(Text(f"metrics: {m['steps']} step lines; last " +
                           ", ".join(f"{k}={v:g}" for k, v in m["last"].items()), style="dim"))
    if verdict.get("digest") is not None:
        console.print(Text("\n" + verdict["digest"]))


def chain_marks(reached: list[int], failed: int | None = None) -> Text:
    """The chain as one line of marks, e.g. ✓✓✓✗····, for narrow screens."""
    top = max(reached, default=0)
    text = Text()
    for no in range(1, len(STAGES) + 1):
        if no == failed:
            text.append("✗", style="bold red")
        elif no <= top:
            text.append("✓", style="green")
        else:
            text.append("·", style="dim")
    return text


def event_line(ev: dict) -> Text | None:
    """One line per journal event for the session log on screen (None: not worth a line)."""
    k, n = ev["type"], ev.get("attempt")
    if k == "launch":
        return Text(f"attempt {n}: launched run {ev['run_id']} (pid {ev['pid']})", style="bold")
    if k == "stage":
        return Text(f"  ✓ {ev['name']}", style="green")
    if k == "verdict":
        root = (ev.get("root") or {}).get("text") or ""
        where = f" at {STAGES[ev['failed_stage'] - 1]}" if ev.get("failed_stage") else ""
        line = Text(f"attempt {n}: {ev['outcome']}{where} after {ev['run_seconds']:.1f}s", style=_OUTCOME.get(ev["outcome"], ""))
        return line.append(f"  {root[:160]}" if root else "", style="")
    if k == "fix":
        state = "fix" if ev["applied"] else "fix not applied"
        return Text(f"  {state} ({ev['signature']}): {ev['description']}", style="cyan" if ev["applied"] else "yellow")
    if k == "cleanup":
        return Text(f"  infra failure: cleanup {'; '.join(ev['commands']) or '(none)'} and retry"
                    + (f" — {ev['detail']}" if ev.get("detail") else ""), style="cyan" if ev.get("ok") else "yellow")
    if k == "unreachable":
        return Text(f"  host unreachable: {ev['error']}; waiting for it", style="yellow")
    if k == "reachable":
        return Text(f"  host back after {ev['after']:.0f}s", style="cyan")
    if k == "model":
        return Text(f"  model step {ev['step']}: {ev['prompt_tokens']}+{ev['completion_tokens']} tokens"
                    + (f", ${ev['cost']:.4f}" if ev["cost"] else "") + (f", {ev['retries']} retries" if ev["retries"] else ""),
                    style="dim")
    if k == "tool":
        mark = " REFUSED" if ev["refused"] else ""
        return Text(f"  {ev['name']} {ev['arguments']}{mark}", style="red" if ev["refused"] else "magenta")
    if k == "note":
        return Text(f"  note: {ev['text']}", style="yellow")
    if k == "protocol":
        how = "native tool calls" if ev["mode"] == "tools" else "text (one ```bash block per reply)"
        return Text(f"  the agent acts by {how}: {ev['reason']}", style="cyan")
    if k == "end":
        return Text(f"session ended: {ev['reason']}" + (f" — {ev['detail']}" if ev["detail"] else ""),
                    style="bold green" if ev["reason"] == "passed" else "bold red")
    return None


class SessionView:
    """The foreground view of a session: a line per event, and on a terminal a live footer with
    the chain, the attempt, what the controller or agent is doing and the budget used."""

    def __init__(self, console: Console, budgets=None, on_lost=None):
        from rich.live import Live

        self.console, self.budgets, self.doing, self.on_lost = console, budgets, "starting", on_lost
        self.live = Live(console=console, refresh_per_second=4, transient=True) if console.is_terminal else None
        self.state = None

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.__exit__(*exc)

    def __call__(self, ev: dict, state) -> None:
        self.state = state
        line = None
        if ev["type"] == "activity":
            self.doing = ev["text"]
        else:
            line = event_line(ev)
        self.say(line)

    def say(self, line) -> None:
        """Print a line (None: only redraw the footer); a reader gone away moves the view on, never ends the run."""
        try:
            if line is not None:
                self.console.print(line)
            if self.live:
                self.live.update(self.footer())
        except OSError:  # nobody reads any more (a closed pipe, a dead terminal): the session goes on
            if self.on_lost is None:
                raise
            self.lost()
            if line is not None:
                self.console.print(line)  # on the new console (the old one's buffer went with it)

    def lost(self, why: str = "the output could not be written (its reader went away)") -> None:
        """The terminal or pipe went away (a write failed, or SIGHUP): no footer any more, and plain
        lines from now on, wherever `on_lost(why)` sends stdout."""
        if self.on_lost is None:
            return
        on_lost, self.on_lost, live, self.live = self.on_lost, None, self.live, None
        if live:
            with contextlib.suppress(OSError):  # its last refresh may meet the dead terminal
                live.stop()
        on_lost(why)
        self.console = cli_console(ViewConsole)  # stdout is no terminal now: no colours, no wrapping

    def footer(self) -> Text:
        st = self.state
        a = st.attempts[-1] if st and st.attempts else None
        text = Text("attempt ", style="dim").append(str(a.n if a else 0), style="bold").append("  ")
        if a and a.verdict:  # the verdict decides what passed (a NaN update is not a passed actor_update)
            text.append_text(chain_marks(list(range(1, a.reached + 1)), a.verdict.get("failed_stage")))
        else:
            text.append_text(chain_marks(a.stages if a else []))
        text.append(f"  {self.doing}\n", style="cyan")
        if st and self.budgets:
            b = self.budgets
            text.append(f"relaunches {st.relaunches}/{b.relaunches}  steps {st.agent_steps}/{b.agent_steps}  "
                        f"tokens {st.tokens}/{b.tokens}  ${st.money:.2f}/{b.money:g}", style="dim")
        return text
