"""What a cached ``%barca get`` sends to the front end: the value, shown exactly as the kernel
shows that value from a variable -- one ``execute_result`` holding only ``text/plain`` -- and
nothing else: no progress bar, no widget, no stream line. Each extra message or mimetype is
paid on every cell (issue #31 item 5: a cached get within 3 ms of an empty cell); a run that
computes something keeps its bar and its end line."""
from __future__ import annotations

import pytest
from conftest import Project
from nbtools import execute, notebook, outputs

pytestmark = pytest.mark.slow  # a real kernel

GET = "%barca get total pipeline.py"
PIPELINE = """
from barca import asset, collect, partitions

KEYS = [f"k{i:03d}" for i in range(20)]


@asset(partitions={"key": partitions(KEYS)})
def item(key: str) -> dict:
    return {"key": key, "n": len(key)}


@asset(inputs={"items": collect(item)})
def total(items: list[dict]) -> dict:
    return {"count": len(items), "sum": sum(i["n"] for i in items)}
"""


def _messages(client, i: int) -> list[str]:
    """The kinds of output message cell i sent (status and the echoed input left out)."""
    return [m["msg_type"] for m in client.messages.get(i, [])
            if m["msg_type"] not in ("status", "execute_input")]


def test_a_cached_get_sends_the_value_and_nothing_else(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    nb = notebook(
        "%load_ext barca\nimport barca.api.warm as warm\nwarm.RACY_NS = 0",
        GET,  # computes: progress is shown
        GET,  # cached, on the normal path (keeps the outcome)
        GET,  # cached, served from what the kernel kept
        "assert len(warm._ENTRIES) == 1, warm._ENTRIES\nshown = _",
        "shown",  # the same value, shown by no barca
    )
    client = execute(nb, project.path, allow_errors=False)
    ran = _messages(client, 1)
    assert "stream" in ran and ran[-1] == "execute_result", ran  # the end line, then the value
    plain = outputs(nb, 5)
    assert [o["output_type"] for o in plain] == ["execute_result"], plain
    assert set(plain[0]["data"]) == {"text/plain"}, plain[0]["data"]
    for i in (2, 3):
        assert _messages(client, i) == ["execute_result"], (i, client.messages.get(i))
        got = outputs(nb, i)
        assert [o["data"] for o in got] == [plain[0]["data"]], (i, got)
        assert got[0]["metadata"] == plain[0]["metadata"], (i, got)
