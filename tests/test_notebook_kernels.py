"""Notebooks in kernels that are not told their path (nbclient, papermill), issue #36: two such
notebooks never share ids, a new kernel of one keeps its results, and two kernels on one
project at once wait for the metadata database rather than failing."""
from __future__ import annotations

import ast
import re
import threading

import pytest
from conftest import Project
from nbtools import error, execute, notebook, result, text

pytestmark = pytest.mark.slow  # real kernels

ASSET = ("from barca import asset\n\n@asset()\ndef summary() -> dict:\n"
         "    return {{'from': {which!r}}}")
IDS = "st = %barca status\n[r.id for r in st.rows]"


def _notebook(which: str):
    return notebook("%load_ext barca", ASSET.format(which=which), "%barca get summary", IDS,
                    "%barca sql select * from summary")


def test_two_notebooks_without_a_path_never_share_ids(project: Project) -> None:
    a, b = _notebook("a"), _notebook("b")
    execute(a, project.path)
    execute(b, project.path)
    assert ast.literal_eval(result(a, 2)["text/plain"]) == {"from": "a"}
    assert ast.literal_eval(result(b, 2)["text/plain"]) == {"from": "b"}
    ids_a = ast.literal_eval(result(a, 3)["text/plain"])
    ids_b = ast.literal_eval(result(b, 3)["text/plain"])
    assert len(ids_a) == len(ids_b) == 1 and ids_a != ids_b, (ids_a, ids_b)
    assert all(re.fullmatch(r"__notebook-[0-9a-f]{8}__:summary", i) for i in ids_a + ids_b)

    again = _notebook("a")          # the first notebook in a new kernel: its results kept
    execute(again, project.path)
    assert ast.literal_eval(result(again, 2)["text/plain"]) == {"from": "a"}
    assert "ran" not in text(again, 2), text(again, 2)      # nothing computed again
    assert "'a'" in result(again, 4)["text/plain"] or "a" in result(again, 4)["text/plain"]
    assert "b" not in result(again, 4)["text/plain"].split("from")[-1]


RANDOM = ("import random\nfrom barca import asset, collect, partitions\n\n"
          "@asset(partitions={'k': partitions([str(i) for i in range(6)])})\n"
          "def noisy(k: str) -> float:\n    return random.random()\n\n"
          "@asset(inputs={'xs': collect(noisy)})\ndef total(xs: list) -> float:\n"
          "    return sum(xs)\n")


def test_two_kernels_at_once_on_one_project(project: Project) -> None:
    """The same notebook in two kernels, with values that differ run to run: every round of
    both succeeds (no "input artifact corrupt", no "database is locked")."""
    rounds = [f"%barca get total --refresh-all;\nprint('round {i} ok')" for i in range(4)]
    books = [notebook("%load_ext barca", RANDOM, *rounds) for _ in range(2)]
    errors: list[BaseException] = []

    def run(nb) -> None:
        try:
            execute(nb, project.path, timeout=120)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(nb,)) for nb in books]
    for t in threads:
        t.start()
    for t in threads:
        t.join(240)
    assert not errors, errors
    for nb in books:
        for i in range(2, 2 + len(rounds)):
            assert error(nb, i) is None, (i, error(nb, i))
            assert f"round {i - 2} ok" in text(nb, i), text(nb, i)
