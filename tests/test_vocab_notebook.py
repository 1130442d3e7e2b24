"""%barca stats and %barca list --groups render as tables in a real kernel."""
from __future__ import annotations

import pytest
from conftest import Project
from nbtools import error, execute, notebook, result

pytestmark = pytest.mark.slow  # a real kernel

PIPELINE = """
from barca import asset, group


@asset()
def raw() -> int:
    return 1


@asset(inputs={"raw": raw})
def report(raw: int) -> int:
    return raw + 1


everything = group("Everything", members=[raw, report], output=report)
"""


def test_stats_and_groups_are_tables(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    assert project.barca("get", "report", "pipeline.py").code == 0
    nb = notebook("%load_ext barca", "%barca stats report pipeline.py",
                  "%barca list pipeline.py --groups")
    execute(nb, project.path)
    for i in (1, 2):
        assert error(nb, i) is None, error(nb, i)
    stats = result(nb, 1)
    assert "<table" in stats["text/html"] and "CREATED AT" in stats["text/html"]
    assert stats["text/plain"].startswith("pipeline.py:report: 1 run")
    groups = result(nb, 2)
    assert "<table" in groups["text/html"] and "group:pipeline.py:everything" in groups[
        "text/html"]
    assert groups["text/plain"].startswith("Everything (group:pipeline.py:everything)")
