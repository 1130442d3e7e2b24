"""Plain-text and HTML tables, and the colour of each state: defined once, used by every face."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# state/action/status -> colour. White text on each reaches WCAG AA (contrast >= 4.5:1); the
# same fill reads on light and dark backgrounds, so one palette serves both themes.
COLOURS = {
    "cached": "#1f7a3d", "ran": "#1f7a3d", "success": "#1f7a3d",
    "will run": "#975a00", "stale": "#975a00", "run": "#975a00",
    "partial": "#b0420f", "never_run": "#5b5fa0",
    "unknown": "#6b6b6b", "skipped": "#6b6b6b",
    "always_runs": "#2a6aa8",
    "failed": "#c02626", "running": "#0b7a7a",
    "ok": "#1f7a3d", "PROBLEM": "#c02626",   # barca doctor's checks
}
RICH_STYLES = {
    "cached": "green", "ran": "green", "will run": "yellow", "stale": "yellow",
    "partial": "dark_orange", "never_run": "medium_purple", "unknown": "grey50",
    "skipped": "grey50", "always_runs": "blue", "failed": "red",
}
# A state has one spelling in code and JSON (``never_run``); a table cell prints it with a
# hyphen (``never-run``), prose -- the summary line, the DAG picture -- with a space.
_CELL = {"never_run": "never-run", "always_runs": "always-runs"}
_STATE_OF_CELL = {cell: state for state, cell in _CELL.items()}


def cell_label(state: str) -> str:
    """A state as a table cell prints it: ``never-run``."""
    return _CELL.get(state, state)


def prose_label(state: str) -> str:
    """A state as a sentence or a picture says it: ``never run``."""
    return state.replace("_", " ")


def colour(word: str) -> str:
    """The colour of a state, an action or a status, given as a word or as its table cell."""
    return COLOURS.get(_STATE_OF_CELL.get(word, word), COLOURS["unknown"])


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


# Front ends style tables of their own (JupyterLab: `.jp-RenderedHTMLCommon td {text-align:
# right}`); every cell also carries its alignment inline, which no stylesheet rule outranks.
_CSS = ("<style>.barca-table{border-collapse:collapse;font-family:var(--jp-code-font-family,"
        "monospace);font-size:12px;color:inherit;background:transparent;table-layout:auto}"
        ".barca-table th,.barca-table td{padding:2px 10px;text-align:left!important;"
        "vertical-align:top;border-bottom:1px solid rgba(127,127,127,.3)}"
        ".barca-table th{font-weight:600;white-space:nowrap}"
        # a cell keeps its words whole: names, times and shapes stay on one line (a long one
        # ends in an ellipsis, its full text in the tooltip); WHY wraps between words only
        ".barca-table td.barca-cell{white-space:nowrap;max-width:24em;overflow:hidden;"
        "text-overflow:ellipsis}"
        ".barca-table td.barca-why{white-space:normal;overflow-wrap:normal;word-break:normal;"
        "min-width:12em;max-width:40em}"
        ".barca-table details{margin:0}.barca-table summary{cursor:pointer}"
        ".barca-more{margin:2px 0 0;white-space:pre-wrap;font-size:11px;max-height:12em;"
        "overflow:auto}"
        # a table wider than the output scrolls sideways inside it instead of being cut
        ".barca{overflow-x:auto;max-width:100%}"
        ".barca-badge{display:inline-block;padding:0 6px;border-radius:8px;color:#fff;"
        "font-weight:600;white-space:nowrap}.barca-summary{margin-top:4px;font-family:"
        "var(--jp-code-font-family,monospace);font-size:12px;text-align:left}"
        "</style>")
_LEFT = ' style="text-align:left"'


def short_names(ids: Sequence[str]) -> dict[str, str]:
    """Each id's name where that name is unambiguous among ``ids`` (``pipeline.py:prices`` ->
    ``prices``), else the id; a key's suffix is kept (``prices[ticker=AAPL]``)."""
    def node(i: str) -> str:
        return i.split("[", 1)[0]

    def name(i: str) -> str:
        return node(i).rsplit(":", 1)[-1]  # types.short_name: a leaf imports no sibling

    owners: dict[str, set[str]] = {}
    for i in ids:
        owners.setdefault(name(i), set()).add(node(i))
    return {i: name(i) + i[len(node(i)):] if len(owners[name(i)]) == 1 else i for i in ids}


# a WHY cell's codes as a notebook says them (the CLI's text keeps the seed page's codes)
WORDS = {"no_record": "never run", "partitions_missing": "keys missing",
         "materialized": "up to date", "sensor": "a sensor runs every time",
         "task": "a task runs when asked"}


def in_words(detail: str) -> str:
    """``2 of 3 keys cached; partitions_missing`` -> ``2 of 3 keys cached; keys missing``:
    each part of a WHY cell that is a bare code, in words."""
    return "; ".join(WORDS.get(part, part) for part in detail.split("; "))


def html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], state_col: int | None,
               summary: str = "", title: str = "", why_col: int | None = None) -> str:
    """A styled, self-contained table. The ``why_col`` cells wrap (the status widget cuts
    them instead) and carry their full text as a tooltip."""
    import html  # only for notebooks and the widget: not on the CLI path
    parts = [_CSS, '<div class="barca">']
    if title:
        parts.append(f'<div class="barca-summary"><b>{html.escape(title)}</b></div>')
    parts.append('<table class="barca-table"><thead><tr>')
    parts.extend(f"<th{_LEFT}>{html.escape(h)}</th>" for h in headers)
    parts.append("</tr></thead><tbody>")
    for r in rows:
        parts.append("<tr>")
        for i, cell in enumerate(r):
            if i == state_col:
                parts.append(f'<td{_LEFT}><span class="barca-badge" data-state="'
                             f'{html.escape(cell)}" style="background:{colour(cell)};color:#fff">'
                             f"{html.escape(cell)}</span></td>")
                continue
            kind = "barca-why" if i == why_col else "barca-cell"
            if i == why_col:
                cell = in_words(cell)
            parts.append(f'<td class="{kind}" title="{html.escape(cell)}"{_LEFT}>'
                         f"{_cell_html(cell, html.escape)}</td>")
        parts.append("</tr>")
    parts.append("</tbody></table>")
    if summary:
        parts.append(f'<div class="barca-summary">{html.escape(summary)}</div>')
    parts.append("</div>")
    return "".join(parts)


def _cell_html(cell: str, escape: Any) -> str:
    """A cell's first line; the rest of a multi-line cell (a traceback, a preview of many
    keys) folded under it, so one row stays one line tall until it is opened."""
    first, _, rest = cell.partition("\n")
    if not rest.strip():
        return escape(first)
    return (f"<details><summary>{escape(first)}</summary>"
            f'<pre class="barca-more">{escape(rest)}</pre></details>')


def rich_table(headers: Sequence[str], rows: Sequence[Sequence[str]], state_col: int | None,
               summary: str = "") -> object:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, pad_edge=False, header_style="bold")
    for h in headers:
        t.add_column(h)
    for r in rows:
        cells = [Text(c, style=RICH_STYLES.get(_STATE_OF_CELL.get(c, c), ""))
                 if i == state_col else Text(c)
                 for i, c in enumerate(r)]
        t.add_row(*cells)
    return Group(t, Text(""), Text(summary)) if summary else t


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def printable(text: str) -> str:
    """Text for a terminal: every control character but newline and tab shown as ``\\x1b``,
    never sent raw -- a key or a message from outside data cannot move the cursor, rewrite
    lines or set the clipboard (OSC 52). JSON output needs none of this: it escapes them."""
    import re
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def json_preview(value: Any) -> str:
    """A small JSON value's text as a command shows it under its path: indented, keys sorted."""
    import json
    # a scalar's text is the same indented or not: the C encoder (``indent`` takes the
    # pure-Python one)
    text = json.dumps(value, ensure_ascii=False) if type(value) in (
        int, float, str, bool, type(None)) else json.dumps(value, indent=2, sort_keys=True,
                                                           ensure_ascii=False)
    return "\n".join("  " + line for line in text.splitlines())
