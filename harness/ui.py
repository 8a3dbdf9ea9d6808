"""rich views of verdicts. Only the CLI imports this."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from .chain import STAGES

_STYLE = {"passed": ("✓", "green"), "implied": ("✓", "dim green"), "failed": ("✗", "bold red"),
          "not_reached": ("·", "dim")}
_OUTCOME = {"pass": "bold green", "crash": "bold red", "hang": "bold yellow", "wrong_result": "bold magenta",
            "running": "cyan", "unknown": "dim"}


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
                + (f"  failed: {fs} {STAGES[fs - 1]}" if fs else "") + f"  [playbook {verdict['playbook']}]", style="dim")
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
    m = verdict["metrics"]
    if m["steps"]:
        console.print(Text(f"metrics: {m['steps']} step lines; last " +
                           ", ".join(f"{k}={v:g}" for k, v in m["last"].items()), style="dim"))
    if verdict.get("digest") is not None:
        console.print(Text("\n" + verdict["digest"]))
