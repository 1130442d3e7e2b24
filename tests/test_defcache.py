"""The persistent memo of definition parts never serves a stale hash."""
from __future__ import annotations

from conftest import Project

PIPE = """
from barca import asset
import helpers


@asset()
def a() -> int:
    return helpers.value()
"""


def _ran(p: Project) -> list[str]:
    r = p.barca("get", "a", "flows/pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    return r.completed()


def test_a_new_module_that_shadows_an_import_reruns(project: Project) -> None:
    project.write("flows/pipeline.py", PIPE)
    project.write("helpers.py", "def value():\n    return 1\n")
    assert _ran(project) == ["flows/pipeline.py:a"]
    assert _ran(project) == []                        # served by the memo, still cached
    project.write("flows/helpers.py", "def value():\n    return 2\n")  # now found first
    assert _ran(project) == ["flows/pipeline.py:a"]
    r = project.barca("get", "a", "flows/pipeline.py", "-o", "value")
    assert r.out.strip() == "2"


def test_editing_the_helper_reruns_and_status_agrees(project: Project) -> None:
    project.write("flows/pipeline.py", PIPE)
    project.write("helpers.py", "def value():\n    return 1\n")
    assert _ran(project) == ["flows/pipeline.py:a"]
    project.write("helpers.py", "def value():\n    return 3\n")
    st = project.barca("status", "flows/pipeline.py", "--json").json()
    assert st["nodes"][0]["cache"]["state"] == "stale"
    assert _ran(project) == ["flows/pipeline.py:a"]
    assert _ran(project) == []
