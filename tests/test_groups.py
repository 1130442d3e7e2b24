"""group(...) and barca list --groups: metadata only (no node, no step, no hash input), as JSON
and a tree; a badly formed group is exit 2 on every command."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Project

from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.model.topology import load_graph
from barca.queries.listing import list_nodes

NODES = """
from barca import asset, group


@asset()
def raw() -> int:
    return 1


@asset(inputs={"raw": raw})
def clean(raw: int) -> int:
    return raw + 1


@asset(inputs={"c": clean})
def report(c: int) -> int:
    return c + 1
"""
GROUPS = """
ingest = group("Ingest", members=[raw, clean], output=clean)
everything = group("Everything", members=[ingest, report], output=report,
                   description="all of it")
"""


def _groups(root: Path, groups: str) -> dict:
    (root / "pipeline.py").write_text(NODES + groups)
    return list_nodes(str(root / "pipeline.py"),
                      settings=Settings.resolve(root, environ={}), groups=True).to_json()


def test_groups_as_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _groups(tmp_path, GROUPS) == {"groups": [
        {"id": "group:pipeline.py:ingest", "name": "Ingest", "description": "",
         "members": ["pipeline.py:raw", "pipeline.py:clean"], "output": "pipeline.py:clean"},
        {"id": "group:pipeline.py:everything", "name": "Everything",
         "description": "all of it",
         "members": ["group:pipeline.py:ingest", "pipeline.py:report"],
         "output": "pipeline.py:report"}]}
    assert _groups(tmp_path, "") == {"groups": []}


@pytest.mark.parametrize(("groups", "says"), [
    ('g = group("G", members=[raw, clean], output=report)', "output"),
    ('a = group("A", members=[raw], output=raw)\nb = group("B", members=[raw], output=raw)',
     "two groups"),
    ('g = group("G", members=[raw, nope], output=raw)', "nope"),
    ('g = group("G", members=["raw"], output=raw)', "'raw'"),
    ('g = group("G", members=[raw, clean])', "output"),
    ('g = group("G", members=[raw], output=raw, colour="red")',
     "members, output, description"),
    ('g = group(title="G", members=[raw], output=raw)', "title"),
    ('g = group("G", members=[raw], output=raw)\ng = group("H", members=[clean], output=clean)',
     "two groups"),
])
def test_a_bad_group_is_a_usage_error(tmp_path: Path, groups: str, says: str) -> None:
    (tmp_path / "pipeline.py").write_text(NODES + "\n" + groups + "\n")
    with pytest.raises(UsageError) as err:
        load_graph([str(tmp_path / "pipeline.py")], Settings.resolve(tmp_path, environ={}),
                   tmp_path)
    assert says in str(err.value)


@pytest.mark.slow
def test_groups_change_nothing_else(project: Project) -> None:
    project.write("pipeline.py", NODES)
    plain = project.barca("list", "pipeline.py", "--json").out
    assert project.barca("get", "report", "pipeline.py").code == 0
    project.write("pipeline.py", NODES + GROUPS)
    assert project.barca("list", "pipeline.py", "--json").out == plain
    r = project.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert {s["status"] for s in r.json()["steps"]} == {"cached"}
    r = project.barca("get", "ingest", "pipeline.py")
    assert r.code == 2  # a group is no target
    r = project.barca("list", "pipeline.py", "--groups", "--pretty")
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        "Everything (group:pipeline.py:everything) -> pipeline.py:report",
        "  all of it",
        "  Ingest (group:pipeline.py:ingest) -> pipeline.py:clean",
        "    - pipeline.py:raw",
        "    - pipeline.py:clean (output)",
        "  - pipeline.py:report (output)"]
    r = project.barca("list", "pipeline.py", "--groups", "--json")
    assert [g["id"] for g in r.json()["groups"]] == ["group:pipeline.py:ingest",
                                                     "group:pipeline.py:everything"]


@pytest.mark.slow
def test_a_bad_group_exits_2_on_get_and_list(project: Project) -> None:
    project.write("pipeline.py", NODES + 'g = group("G", members=[raw], output=report)\n')
    for cmd in (["list"], ["list", "--groups"], ["get", "report"]):
        r = project.barca(*cmd, "pipeline.py")
        assert r.code == 2 and "output" in r.err, (cmd, r.err)


def test_a_notebook_shows_the_groups_as_a_table(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(NODES + GROUPS)
    res = list_nodes(str(tmp_path / "pipeline.py"), settings=Settings.resolve(tmp_path,
                                                                              environ={}),
                     groups=True)
    html = res._repr_mimebundle_()["text/html"]
    assert "<table" in html and "GROUP" in html and "Everything" in html
