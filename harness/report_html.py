"""The session report as ONE self-contained HTML file: inline CSS, no script, no font, image or
link to fetch, so it opens from a mail attachment or a chat on a phone with no network and
leaks nothing when opened. Every text is escaped (and was redacted by harness.report.build).

    page = html(events, diff)      # same arguments as harness.report.markdown
"""

from __future__ import annotations

from html import escape

from .chain import STAGES
from .report import Report, build, duration

MARK_CLASS = {"✓": "ok", "✗": "fail", "·": "none"}
TITLE = {"passed": "chain passed", "not_passed": "chain not passed", "running": "running"}

# Dark text on light ground; 16px body and never under 14px. Nothing is wider than the screen:
# long words and diff lines wrap, and below 700px the attempts table becomes one card per
# attempt (each cell labelled by its column).
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
table.attempts{width:100%}
table.attempts td:nth-child(2),table.attempts td:nth-child(3){overflow-wrap:anywhere}
table.attempts td:first-child{white-space:nowrap}
table.attempts td:last-child{min-width:7em}
@media (max-width:700px){
table.attempts thead{display:none}
table.attempts,table.attempts tbody,table.attempts tr,table.attempts td{display:block;width:100%}
table.attempts tr{border:1px solid #d0d7de;border-radius:6px;margin:0 0 10px;padding:4px 10px}
table.attempts td{border:none;padding:3px 0}
table.attempts td::before{content:attr(data-label);display:block;font-weight:600;color:#4b5563;font-size:14px}
table.attempts td:first-child{font-weight:700}
}
svg.bars{display:block;width:100%;margin:4px 0}
svg.bars text{font-size:14px;fill:#1b1f24}
.key{display:inline-block;width:12px;height:12px;border-radius:2px;vertical-align:-1px;margin:0 4px 0 10px}
pre.hang{white-space:pre-wrap;overflow-wrap:anywhere;background:#fff8e6;border:1px solid #e6c35c;border-radius:6px;padding:8px}
table.matrix td,table.matrix th{text-align:center;min-width:40px;font-size:16px}
table.matrix td.ok{background:#b7e4c2;color:#0b4619}
table.matrix td.fail{background:#f5b5b5;color:#7f1010;font-weight:700}
table.matrix td.none{background:#eceff1;color:#6b7280}
table.timeline td{overflow-wrap:anywhere}
table.timeline td:first-child{white-space:nowrap;font-family:ui-monospace,Menlo,Consolas,monospace}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:14px}
code{background:#f3f5f7;padding:1px 4px;border-radius:4px;word-break:break-word}
.legend,.note{color:#4b5563;font-size:14px}
pre.diff{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;
padding:8px;line-height:1.4}
pre.diff span{display:inline-block;min-width:100%}
.add{background:#dafbe1;color:#0f3d1c}.del{background:#ffebe9;color:#6e1010}
.hunk{color:#0550ae}.file{font-weight:700}
"""


def html(events: list[dict], diff: str | None = None, *, diff_error: str | None = None) -> str:
    r = build(events, diff, diff_error=diff_error)
    title = f"harness session {r.session}"
    body = [f"<h1>{escape(title)}</h1>", f'<p class="headline {r.status}">{escape(r.headline)}</p>',
            _facts(r), "<h2>The chain</h2>", _matrix(r), "<h2>Where the time went</h2>", _bars(r),
            "<h2>Attempts</h2>", _attempts(r), *_hangs(r),
            "<h2>Timeline</h2>", _timeline(r), '<h2 id="diff">The cumulative diff</h2>', _diff(r)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)} — {escape(TITLE[r.status])}</title><style>{CSS}</style></head>\n"
            "<body><main>\n" + "\n".join(body) + "\n</main></body></html>\n")


def _table(cls: str, head: list[str], rows: list[list[str]]) -> str:
    """Cells are HTML already (escaped by the caller); each is labelled by its column (the cards
    of a narrow screen show the label)."""
    th = "".join(f"<th>{h}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f'<td data-label="{escape(h)}">{c}</td>' for h, c in zip(head, row))
                  + "</tr>\n" for row in rows)
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


# how far an attempt got, 0..7 stages: red, through amber, to green
REACHED = ["#c62828", "#d84315", "#e65100", "#ef8f00", "#c9a400", "#8bab2b", "#4c9a2a", "#1e7e34"]
MODEL, HARNESS = "#5b4bb7", "#9ca3af"
ROW = 36  # px per attempt: a line of text, the bar under it


def _bars(r: Report) -> str:
    """Inline SVG, one bar per attempt on the session's time axis: the run's time (coloured by
    how far it got), then the model's, then the harness's own. Widths are percentages, so the
    bars fill any screen while the text keeps its size."""
    if not r.bars:
        return '<p class="note">No attempt was launched.</p>'
    total = max(b.start + b.run + b.model + b.harness for b in r.bars) or 1.0
    parts = []
    for i, b in enumerate(r.bars):
        y, x = i * ROW, b.start / total * 100
        label = (f"{b.n} · {b.reached}/{len(STAGES)} {b.outcome} · run {duration(b.run)}, "
                 f"model {duration(b.model)}, harness {duration(b.harness)}")
        parts.append(f'<text x="0" y="{y + 14}">{escape(label)}</text>')
        for secs, colour, what in ((b.run, REACHED[min(b.reached, len(STAGES))], "run"), (b.model, MODEL, "model"),
                                   (b.harness, HARNESS, "harness")):
            w = secs / total * 100
            if secs > 0:
                parts.append(f'<rect x="{x:.3f}%" y="{y + 19}" width="{max(w, 0.2):.3f}%" height="12" fill="{colour}">'
                             f"<title>attempt {b.n}: {what} {duration(secs)}</title></rect>")
            x += w
    keys = "".join(f'<span class="key" style="background:{c}"></span>{w}' for c, w in
                   ((REACHED[0], "run (failed early)"), (REACHED[-1], "run (passed)"), (MODEL, "model"),
                    (HARNESS, "harness")))
    return (f'<svg class="bars" height="{len(r.bars) * ROW}" role="img" aria-label="time per attempt">'
            + "".join(parts) + f'</svg><p class="legend">{keys}; the axis is the session\'s '
            f"{duration(total)}.</p>")


def _hangs(r: Report) -> list[str]:
    if not r.hangs:
        return []
    out = ["<h2>Where it hung</h2>"]
    for n, text in r.hangs:
        out.append(f"<p>attempt {n}: the processes of the run, as they were before it was stopped</p>"
                   f'<pre class="hang">{escape(text)}</pre>')
    return out


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
