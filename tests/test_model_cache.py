"""The discovery model cache (.barca/discovery/): a pipeline file is parsed only when its text
changes, and the cache never changes a decision."""
from __future__ import annotations

from conftest import Project

PIPELINE = """
    from barca import asset, collect, partitions

    from helpers import scale


    @asset(partitions={"k": partitions(["a", "b"])})
    def item(k: str) -> int:
        return scale(len(k))


    @asset(inputs={"items": collect(item)})
    def single(items: list, **extra) -> int:
        return sum(items)
"""


def _cache_files(project: Project) -> list:
    return sorted((project.path / ".barca" / "discovery").glob("*.pickle"))


def test_the_model_is_cached_and_a_damaged_cache_is_a_miss(project: Project) -> None:
    project.write("helpers.py", "def scale(n):\n    return n * 10\n")
    project.write("pipeline.py", PIPELINE.replace("def single(items: list, **extra)",
                                                  "def single(items: list)"))
    assert project.barca("status", "pipeline.py", "--json").code == 0
    assert not (project.path / ".barca").exists()  # read-only: nothing written, not even this
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.code == 0, r.err
    # kept once the run has made .barca/ (never before it: a usage error leaves none), so
    # that the second command of a new project parses nothing (#31 item 2)
    assert len(_cache_files(project)) == 1
    assert project.barca("status", "pipeline.py", "--json").code == 0
    files = _cache_files(project)
    assert len(files) == 1 and files[0].stat().st_size > 0
    files[0].write_bytes(b"garbage")
    # the kept graph (barca.model.graphcache) too, else the model is not read at all
    graphs = sorted((project.path / ".barca" / "discovery").glob("*.graph"))
    assert len(graphs) == 1
    graphs[0].write_bytes(b"garbage")
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["steps_executed"] == 0
    assert _cache_files(project)[0].read_bytes() != b"garbage"  # written again
    assert graphs[0].read_bytes() != b"garbage"


def test_a_cached_model_still_hashes_definitions_from_the_source(project: Project) -> None:
    """With the pipeline's model cached, an edited helper is still seen (the function's tree
    is parsed again for the definition hash), and the **kwargs check still holds."""
    project.write("helpers.py", "def scale(n):\n    return n * 10\n")
    project.write("pipeline.py", PIPELINE)
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"k=a": 10, "k=b": 10}
    assert project.barca("get", "item", "pipeline.py", "--json").json()["steps_executed"] == 0
    assert _cache_files(project)
    project.write("helpers.py", "def scale(n):\n    return n * 100\n")
    plan = project.barca("get", "item", "pipeline.py", "--dry-run", "--pretty")
    assert plan.code == 0, plan.err
    assert "changed: helper helpers.py:scale" in plan.out
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.json()["final_output"] == {"k=a": 100, "k=b": 100}
    # an input that is not a parameter is still an error, with the model from the cache
    project.edit("pipeline.py", "def single(items: list, **extra)", "def single(other: list)")
    bad = project.barca("get", "single", "pipeline.py", "--json")
    assert bad.code == 2 and "not a parameter" in bad.err
