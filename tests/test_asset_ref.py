"""asset_ref("file.py:fn") as an input: an ordinary edge to a node of another file, found by
reading that file (never importing it); a reference that names no node is exit 2."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Project

from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.model.topology import load_graph

OTHER = """
from pathlib import Path
from barca import asset

Path("imported").write_text("other.py was imported")


@asset()
def prices() -> int:
    return 41
"""

PIPELINE = """
from barca import asset, asset_ref


@asset(inputs={"p": asset_ref(REF)})
def report(p: int) -> int:
    return p + 1
"""


def _graph(root: Path, ref: str) -> object:
    (root / "other.py").write_text(OTHER)
    (root / "pipeline.py").write_text(PIPELINE.replace("REF", ref))
    return load_graph([str(root / "pipeline.py")], Settings.resolve(root, environ={}), root)


def test_an_asset_ref_is_an_edge_to_the_other_file(tmp_path: Path) -> None:
    g = _graph(tmp_path, '"other.py:prices"')
    assert g.upstream["pipeline.py:report"] == ["other.py:prices"]
    assert g.order == ["other.py:prices", "pipeline.py:report"]
    assert not (tmp_path / "imported").exists()  # read, never imported


@pytest.mark.parametrize("ref", ['"other.py:nope"', '"missing.py:prices"', '"prices"'])
def test_an_unknown_reference_is_a_usage_error_naming_it(tmp_path: Path, ref: str) -> None:
    with pytest.raises(UsageError, match=ref.strip('"')):
        _graph(tmp_path, ref)


@pytest.mark.parametrize("ref", ['id="other.py:prices"', "", '"a.py:x", "b.py:y"', "1"])
def test_asset_ref_takes_one_positional_string(tmp_path: Path, ref: str) -> None:
    with pytest.raises(UsageError, match="asset_ref"):
        _graph(tmp_path, ref)


@pytest.mark.slow
def test_get_follows_an_asset_ref_and_an_edit_runs_both(project: Project) -> None:
    project.write("other.py", OTHER)
    project.write("pipeline.py", PIPELINE.replace("REF", '"other.py:prices"'))
    for cmd in (["list"], ["plan"], ["status"], ["get", "report", "--dry-run"]):
        assert project.barca(*cmd, "pipeline.py").code == 0
    assert not (project.path / "imported").exists()  # planning never imports it
    r = project.barca("list", "pipeline.py", "--json")
    report = next(n for n in r.json()["nodes"] if n["id"] == "pipeline.py:report")
    assert report["inputs"] == ["other.py:prices"]  # the ids it reads, as barca 0.30.2 lists them
    r = project.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == 42
    project.edit("other.py", "return 41", "return 9")
    r = project.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == 10
    assert [s["status"] for s in r.json()["steps"]] == ["ran", "ran"]


@pytest.mark.slow
def test_an_unknown_asset_ref_exits_2(project: Project) -> None:
    project.write("other.py", OTHER)
    project.write("pipeline.py", PIPELINE.replace("REF", '"other.py:nope"'))
    for cmd in (["list"], ["plan"], ["get", "report"]):
        r = project.barca(*cmd, "pipeline.py")
        assert r.code == 2 and "other.py:nope" in r.err, (cmd, r.err)
