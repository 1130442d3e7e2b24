"""Plain-text and HTML tables, and the colour of each state: defined once, used by every face."""
from __future__ import annotations

from typing import Sequence

# state/status -> colour (CSS colour names read well on light and dark backgrounds)
COLOURS = {
    "cached": "#2e9d4f", "ran": "#2e9d4f", "success": "#2e9d4f",
    "will run": "#d08a00", "stale": "#d08a00", "run": "#d08a00",
    "partial": "#c06000", "never-run": "#7b7fb8", "never_run": "#7b7fb8",
    "unknown": "#8a8a8a", "skipped": "#8a8a8a",
    "always-runs": "#3b82c4", "always_runs": "#3b82c4",
    "failed": "#d03030", "running": "#0f9b9b",
}
RICH_STYLES = {
    "cached": "green", "ran": "green", "will run": "yellow", "stale": "yellow",
    "partial": "dark_orange", "never-run": "medium_purple", "unknown": "grey50",
    "skipped": "grey50", "always-runs": "blue", "failed": "red",
}


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], dashes: bool = False,
               max_widths: dict[int, int] | None = None) -> str:
    """Columns padded to the widest cell, two spaces apart; no trailing spaces. A column with a
    maximum width pads to at most that; a longer cell overflows its row (never truncated)."""
    widths = [len(h) for h in headers]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    for i, cap in (max_widths or {}).items():
        widths[i] = min(widths[i], max(cap, len(headers[i])))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(widths[i]) if i < len(cells) - 1 else c
                         for i, c in enumerate(cells)).rstrip()

    out = [line(headers)]
    if dashes:
        out.append("-" * len(out[0]))
    out.extend(line(r) for r in rows)
    return "\n".join(out)


_CSS = ("<style>.barca-table{border-collapse:collapse;font-family:var(--jp-code-font-family,"
        "monospace);font-size:12px;color:inherit;background:transparent}"
        ".barca-table th,.barca-table td{padding:2px 10px;text-align:left;border-bottom:"
        "1px solid rgba(127,127,127,.3)}.barca-table th{font-weight:600}"
        ".barca-badge{display:inline-block;padding:0 6px;border-radius:8px;color:#fff;"
        "font-weight:600}.barca-summary{margin-top:4px;font-family:monospace;font-size:12px}"
        "</style>")


def html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], state_col: int | None,
               summary: str = "", title: str = "") -> str:
    import html  # only for notebooks and the widget: not on the CLI path
    parts = [_CSS, '<div class="barca">']
    if title:
        parts.append(f'<div class="barca-summary"><b>{html.escape(title)}</b></div>')
    parts.append('<table class="barca-table"><thead><tr>')
    parts.extend(f"<th>{html.escape(h)}</th>" for h in headers)
    parts.append("</tr></thead><tbody>")
    for r in rows:
        parts.append("<tr>")
        for i, cell in enumerate(r):
            if i == state_col:
                colour = COLOURS.get(cell, "#8a8a8a")
                parts.append(f'<td><span class="barca-badge" data-state="{html.escape(cell)}" '
                             f'style="background:{colour}">{html.escape(cell)}</span></td>')
            else:
                parts.append(f"<td>{html.escape(cell)}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    if summary:
        parts.append(f'<div class="barca-summary">{html.escape(summary)}</div>')
    parts.append("</div>")
    return "".join(parts)


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]], state_col: int | None,
               summary: str = "") -> object:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, pad_edge=False, header_style="bold")
    for h in headers:
        t.add_column(h)
    for r in rows:
        cells = [Text(c, style=RICH_STYLES.get(c, "")) if i == state_col else Text(c)
                 for i, c in enumerate(r)]
        t.add_row(*cells)
    return Group(t, Text(""), Text(summary)) if summary else t


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
