"""``barca list --groups``: the groups of the pipeline files (``barca.model.groups``), as JSON,
as a tree (outer groups first) and as a table in a notebook."""
from __future__ import annotations

from typing import Any

from barca.core.record import Record
from barca.core.render import text_table
from barca.present.display import _Displayable


class GroupListing(_Displayable, Record):
    __slots__ = ("groups",)
    groups: tuple[dict[str, Any], ...]   # {id, name, description, members, output}

    def to_json(self) -> dict[str, Any]:
        return {"groups": [dict(g) for g in self.groups]}

    def _outer(self) -> list[dict[str, Any]]:
        inner = {m for g in self.groups for m in g["members"]}
        return [g for g in self.groups if g["id"] not in inner]

    def tree(self) -> str:
        by_id = {g["id"]: g for g in self.groups}
        lines: list[str] = []

        def show(g: dict[str, Any], depth: int) -> None:
            pad = "  " * depth
            lines.append(f"{pad}{g['name']} ({g['id']}) -> {g['output']}")
            if g["description"]:
                lines.append(f"{pad}  {g['description']}")
            for m in g["members"]:
                if m in by_id:
                    show(by_id[m], depth + 1)
                else:
                    lines.append(f"{pad}  - {m}" + (" (output)" if m == g["output"] else ""))

        for g in self._outer():
            show(g, 0)
        return "\n".join(lines) if lines else "(no groups)"

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        rows = [[g["id"], g["name"], ", ".join(g["members"]), g["output"], g["description"]]
                for g in self.groups]
        n = len(self.groups)
        return (["GROUP", "NAME", "MEMBERS", "OUTPUT", "DESCRIPTION"], rows, None,
                f"{n} group{'s' if n != 1 else ''}")

    def __str__(self) -> str:
        return self.tree()

    def table_text(self) -> str:
        headers, rows, _, summary = self._table()
        return text_table(headers, rows) + "\n\n" + summary
