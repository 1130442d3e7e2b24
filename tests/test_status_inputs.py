"""`status --json`'s `inputs` are the nodes a function receives, as barca 0.30.2 lists them: a
partition source counts when a parameter is named after it, not when it only gives keys."""
from __future__ import annotations


def test_inputs_name_a_key_source_the_function_reads(seed) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    nodes = seed.barca("status", "pipeline.py", "--json").json()["nodes"]
    assert {n["name"]: n["inputs"] for n in nodes} == {
        "feed_version": [], "prices": ["pipeline.py:feed_version"],
        "signal": ["pipeline.py:prices"], "report": ["pipeline.py:signal"]}


def test_a_source_that_only_gives_keys_is_no_input(project) -> None:
    project.write("pipeline.py", '''
from barca import asset, partitions_from

@asset()
def keys() -> list:
    return ["a", "b"]

@asset(partitions={"k": partitions_from(keys)})
def per(k: str) -> str:
    return k
''')
    nodes = project.barca("status", "pipeline.py", "--json").json()["nodes"]
    assert {n["name"]: n["inputs"] for n in nodes} == {"keys": [], "per": []}
