"""Partition keys read from the source text without importing the pipeline, when they are
literals, module constants and pure builtins -- and the module imported otherwise."""
from __future__ import annotations

import ast
import textwrap

import pytest
from conftest import Project

from barca.model.keyexpr import NotPure, pure_value

MODULE = textwrap.dedent("""
    import os
    N = 5
    KEYS = [f"k{i:04d}" for i in range(N)]
    REGIONS = ["amer", "emea"]
    PAIRS = {r: len(r) for r in REGIONS}
    WIDTH = 2 + 1
    TWICE = 1
    TWICE = 2
    if True:
        IN_BLOCK = ["x"]
    A, B = ["a"], ["b"]
    FILES = sorted(os.listdir("."))


    def helper(x):
        return [x]
""")

PURE = [
    "KEYS", "REGIONS", "[r.upper() for r in REGIONS]", "REGIONS + KEYS", "PAIRS",
    "[f'{r}-{i:0{WIDTH}d}' for r in REGIONS for i in range(N) if i % 2]",
    "sorted({k[-1] for k in KEYS}, reverse=True)", "list(map(str, range(3)))",
    "dict(zip(REGIONS, range(2)))", "[str(d) for d in range(1, 32)]",
]
IMPURE = ["TWICE", "IN_BLOCK", "A", "FILES", "helper(1)", "open('x')", "().__class__",
          "UNDEFINED", "[1 / 0]", "(x := 3)"]


@pytest.mark.parametrize("expr", PURE)
def test_pure_key_expressions_equal_the_imported_value(expr: str) -> None:
    scope: dict = {}
    exec(compile(MODULE, "m.py", "exec"), scope)
    line = len(MODULE.splitlines()) + 1
    assert pure_value(ast.parse(MODULE), ast.parse(expr, mode="eval").body, line) == \
        eval(expr, scope)


@pytest.mark.parametrize("expr", IMPURE)
def test_anything_else_needs_the_module(expr: str) -> None:
    line = len(MODULE.splitlines()) + 1
    with pytest.raises(NotPure):
        pure_value(ast.parse(MODULE), ast.parse(expr, mode="eval").body, line)


def test_a_constant_bound_after_its_use_needs_the_module() -> None:
    tree = ast.parse("X = Y\nY = [1]\n")
    with pytest.raises(NotPure):
        pure_value(tree, ast.parse("X", mode="eval").body, 3)


def test_status_reads_literal_keys_without_importing_the_pipeline(project: Project) -> None:
    """The module writes a marker when imported: computed-but-pure keys never import it; keys
    from the file system do, and both give the right keys."""
    project.write("pipeline.py", """
        import os
        from pathlib import Path

        from barca import asset, partitions

        Path("imported").write_text("yes")
        N = 3
        KEYS = [f"k{i}" for i in range(N)]


        @asset(partitions={"k": partitions(KEYS)})
        def item(k: str) -> str:
            return k
    """)
    r = project.barca("status", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["nodes"][0]["partitions"]["total"] == 3
    assert not (project.path / "imported").exists()
    project.edit("pipeline.py", "KEYS = [f\"k{i}\" for i in range(N)]",
                 "KEYS = sorted(p.name for p in Path('data').iterdir())")
    (project.path / "data").mkdir()
    for name in ("x", "y"):
        (project.path / "data" / name).write_text("")
    r = project.barca("status", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["nodes"][0]["partitions"]["total"] == 2
    assert (project.path / "imported").exists()
