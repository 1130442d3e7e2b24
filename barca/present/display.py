"""What every result object shares: its renderings (plain text, HTML, rich), derived from its
``to_json()`` and ``_table()``."""
from __future__ import annotations

from barca.core import jsontext  # (json's C half: no re, #31 item 2)

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

# core.render (the tables) is imported by the renderings that draw one: JSON needs none


def more_hint(total: int, what: str) -> str:
    """What a cut list says about seeing the rest (barca 0.30.2's words)."""
    return f"pass --limit N for more, or --all for all {total} {what}"


def cut_note(shown: int, total: int, what: str) -> str:
    """What a table of ``shown`` of ``total`` things says under it ("" when it shows all)."""
    return "" if shown >= total else f"showing {shown} of {total} {what}; {more_hint(total, what)}"


class _NodeTable:
    """What a listing of nodes some of which a table may leave out shares (status, list):
    ``rows`` shown in JSON, ``total`` the nodes kept before a limit (None: the rows),
    ``table_limit`` the rows a table shows (None: all)."""
    __slots__ = ()
    rows: Any
    total: int | None
    table_limit: int | None

    @property
    def matched(self) -> int:
        return len(self.rows) if self.total is None else self.total

    def _shown(self) -> Any:
        return self.rows if self.table_limit is None else self.rows[:self.table_limit]

    def cut_note(self) -> str:
        """What a table that does not show every node says of the rest ("" when it does)."""
        return cut_note(len(self._shown()), self.matched, "nodes")


class _Displayable:
    """Shared renderings: every result object shows itself the same way everywhere."""
    __slots__ = ()

    def to_json(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        raise NotImplementedError

    def _html_table(self) -> tuple[list[str], list[list[str]], int | None, str, int | None]:
        """The table as HTML shows it: ``_table()`` plus the WHY column's index (names are
        shortened by the classes whose text keeps full ids)."""
        headers, rows, col, summary = self._table()
        return headers, rows, col, summary, None

    def _repr_html_(self) -> str:
        from barca.core.render import html_table
        headers, rows, col, summary, why = self._html_table()
        return html_table(headers, rows, col, summary, why_col=why)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """Plain text and HTML. No ``application/json`` unless asked for with ``include``:
        JupyterLab ranks it above HTML and would show a collapsed JSON tree, not the table."""
        bundle: dict[str, Any] = {"text/plain": str(self), "text/html": self._repr_html_()}
        if include and "application/json" in include:
            bundle["application/json"] = self.to_json()
        if include:
            bundle = {k: v for k, v in bundle.items() if k in include}
        if exclude:
            bundle = {k: v for k, v in bundle.items() if k not in exclude}
        return bundle

    def __rich__(self) -> object:
        from barca.core.render import rich_table
        headers, rows, col, summary = self._table()
        return rich_table(headers, rows, col, summary)

    def json_text(self) -> str:
        return jsontext.dumps(self.to_json(), indent=2, default=str, ensure_ascii=False)

    def json_line(self) -> str:
        """The compact document on one line (a pipe's): ``json.dumps(self.to_json(),
        separators=(",", ":"), default=str, ensure_ascii=False)``, byte for byte."""
        return jsontext.dumps(self.to_json(), separators=(",", ":"), default=str,
                              ensure_ascii=False)
