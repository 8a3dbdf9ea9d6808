"""The session report as ONE self-contained HTML file: inline CSS, no script, no font, image or
link to fetch, so it opens from a mail attachment or a chat on a phone with no network and
leaks nothing when opened. Every text is escaped (and was redacted by harness.report.build).

    page = html(events, diff)      # same arguments as harness.report.markdown
"""

from __future__ import annotations

from html import escape

from .chain import STAGES
from .report import Report, build

MARK_CLASS = {"✓": "ok", "✗": "fail", "·": "none"}
TITLE = {"passed": "chain passed", "not_passed": "chain not passed", "running": "running"}

# Dark text on light ground; 16px body and never under 14px; wide tables scroll sideways in
# their own box instead of widening the page on a phone.
CSS = """
*{box-sizing:border-box}
body{margin:0;padding:12px;background:#fff;color:#1b1f24;font:16px/1.5 system-ui,-apple-system,"Segoe UI",
Roboto,"Noto Sans",Arial,sans-serif;-webkit-text-size-adjust:100%}
main{max-width:960px;margin:0 auto}
h1{font-size:20px;margin:4px 0 8px;word-break:break-all}
h2{font-size:18px;margin:24px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.headline{font-size:18px;font-weight:700;padding:10px 12px;border-radius:6px;border-left:6px solid}
.passed{background:#e6f4ea;border-color:#1e7e34;color:#0f3d1c}
.not_passed{background:#fdecea;border-color:#c62828;color:#5c1010}
.running{background:#fff4e5;border-color:#b26a00;color:#4d2e00}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;max-width:100%}
table{border-collapse:collapse;font-size:15px}
th,td{border:1px solid #d0d7de;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f7}
table.facts th{white-space:nowrap}
table.facts td{word-break:break-word}
table.attempts{min-width:640px}
table.attempts td:nth-child(2),table.attempts td:nth-child(3){min-width:14em}
table.matrix td,table.matrix th{text-align:center;min-width:40px;font-size:16px}
table.matrix td.ok{background:#b7e4c2;color:#0b4619}
table.matrix td.fail{background:#f5b5b5;color:#7f1010;font-weight:700}
table.matrix td.none{background:#eceff1;color:#6b7280}
table.timeline td:first-child{white-space:nowrap;font-family:ui-monospace,Menlo,Consolas,monospace}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:14px}
code{background:#f3f5f7;padding:1px 4px;border-radius:4px;word-break:break-word}
.legend,.note{color:#4b5563;font-size:14px}
pre.diff{overflow-x:auto;background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:8px;line-height:1.4}
pre.diff span{display:inline-block;min-width:100%}
.add{background:#dafbe1;color:#0f3d1c}.del{background:#ffebe9;color:#6e1010}
.hunk{color:#0550ae}.file{font-weight:700}
"""


def html(events: list[dict], diff: str | None = None, *, diff_error: str | None = None) -> str:
    r = build(events, diff, diff_error=diff_error)
    title = f"harness session {r.session}"
    body = [f"<h1>{escape(title)}</h1>", f'<p class="headline {r.status}">{escape(r.headline)}</p>',
            _facts(r), "<h2>The chain</h2>", _matrix(r), "<h2>Attempts</h2>", _attempts(r),
            "<h2>Timeline</h2>", _timeline(r), '<h2 id="diff">The cumulative diff</h2>', _diff(r)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)} — {escape(TITLE[r.status])}</title><style>{CSS}</style></head>\n"
            "<body><main>\n" + "\n".join(body) + "\n</main></body></html>\n")


def _table(cls: str, head: list[str], rows: list[list[str]]) -> str:
    """Cells are HTML already (escaped by the caller)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>\n" for row in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{th}</tr></thead><tbody>\n{trs}</tbody></table></div>'


def _facts(r: Report) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>\n" for k, v in r.facts)
    return f'<div class="scroll"><table class="facts"><tbody>\n{rows}</tbody></table></div>'


def _matrix(r: Report) -> str:
    head = "<th>attempt</th>" + "".join(f'<th title="{s}">{i}</th>' for i, s in enumerate(STAGES, 1))
    trs = "".join(f"<tr><th>{x.n}</th>" + "".join(f'<td class="{MARK_CLASS[m]}">{m}</td>' for m in x.marks)
                  + "</tr>\n" for x in r.rows)
    legend = " · ".join(f"{i} {s}" for i, s in enumerate(STAGES, 1))
    return (f'<div class="scroll"><table class="matrix"><thead><tr>{head}</tr></thead><tbody>\n{trs}'
            f'</tbody></table></div><p class="legend">✓ passed, ✗ failed, · not reached. Stages: {legend}</p>')


def _attempts(r: Report) -> str:
    rows = [[str(x.n), escape(x.saw) + (f": <code>{escape(x.root)}</code>" if x.root else ""),
             "<br>".join(escape(c) for c in x.changed) or "—", escape(x.result)] for x in r.rows]
    return _table("attempts", ["attempt", "what it saw", "what was changed before the next", "result"], rows)


def _timeline(r: Report) -> str:
    return _table("timeline", ["time", "event", "what"], [[escape(t), escape(k), escape(x)] for t, k, x in r.timeline])


def _diff(r: Report) -> str:
    note = f'<p class="note">{escape(r.diff_note)}</p>' if r.diff_note else ""
    if not r.diff:
        return note
    return '<pre class="diff">' + "\n".join(f"<span{_line_class(ln)}>{escape(ln) or ' '}</span>"
                                            for ln in r.diff.splitlines()) + "</pre>" + note


def _line_class(line: str) -> str:
    if line.startswith(("diff --git", "+++", "---", "index ")):
        return ' class="file"'
    if line.startswith("@@"):
        return ' class="hunk"'
    return ' class="add"' if line.startswith("+") else (' class="del"' if line.startswith("-") else "")
