"""One memo story: every memo layer that outlives a command (discovery cache, definitions table,
snapshots, settle records, warm state) is keyed by the one salt (barca.core.salt), so a barca
whose rules changed ignores every older memo and decides from its own rules."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rulechange import rules

import barca
from barca import api

PIPE = """
from barca import asset
from helpers import bump


@asset()
def a() -> int:
    return bump(1)
"""


def _project(root: Path) -> None:
    (root / "pipeline.py").write_text(PIPE)
    (root / "helpers.py").write_text("def bump(x):\n    return x + 1\n")


def _executed(root: Path) -> int:
    here = os.getcwd()
    os.chdir(root)
    try:
        return api.materialize("a", "pipeline.py").to_json()["steps_executed"]
    finally:
        os.chdir(here)


def test_a_barca_whose_rules_changed_ignores_every_older_memo(tmp_path: Path) -> None:
    _project(tmp_path)
    assert _executed(tmp_path) == 1
    assert _executed(tmp_path) == 0
    assert _executed(tmp_path) == 0  # every memo written: settle record, warm state
    with rules(1):
        here = os.getcwd()
        os.chdir(tmp_path)
        try:
            row = api.status("a", "pipeline.py").to_json()["nodes"][0]
            assert row["cache"]["state"] == "stale", row
            assert api.plan_run("a", "pipeline.py").to_json()["summary"]["will_run"] == 1
        finally:
            os.chdir(here)
        assert _executed(tmp_path) == 1  # the new rule's run hash: computed under it
        assert _executed(tmp_path) == 0
    # and back: barca's own rules find the result made under them (memos of rules 1 ignored)
    assert _executed(tmp_path) == 0


def test_salt_is_stable_and_ignores_the_faces() -> None:
    from barca.core.salt import salt
    assert re.fullmatch(r"[0-9a-f]{64}", salt())
    assert salt() == salt()


@pytest.mark.slow
def test_an_edited_copy_of_barca_reruns_a_project_made_by_the_original(tmp_path: Path) -> None:
    """The issue's probe: edit ``cone.binding_digest`` in a copy of barca, run the CLI from the
    copy against a project the original made. Before the one salt: ``cached`` until the
    definitions rows were deleted by hand."""
    proj = tmp_path / "proj"
    proj.mkdir()
    _project(proj)
    src = Path(barca.__file__).parent
    copy = tmp_path / "copy"
    shutil.copytree(src, copy / "barca", ignore=shutil.ignore_patterns("__pycache__"))
    cone = copy / "barca" / "identity" / "cone.py"
    # the copy's rule: a helper's digest taken differently (as a fix of a hashing bug would)
    cone.write_text(cone.read_text() + (
        "\n\n_v1 = Project.binding_digest\n\n\n"
        "def _v2(self, mod, name, stmts):\n"
        "    import hashlib\n"
        "    return hashlib.sha256(b'v2' + _v1(self, mod, name, stmts).encode()).hexdigest()\n"
        "\n\nProject.binding_digest = _v2\n"))

    def cli(pkg: Path, *args: str) -> dict:
        env = dict(os.environ, PYTHONPATH=str(pkg))
        env.pop("BARCA_OUTPUT", None)
        r = subprocess.run([sys.executable, "-m", "barca", *args, "--json"], cwd=proj,
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        import json
        return json.loads(r.stdout)

    mine = src.parent
    assert cli(mine, "get", "a", "pipeline.py")["steps_executed"] == 1
    assert cli(mine, "get", "a", "pipeline.py")["steps_executed"] == 0
    assert cli(mine, "get", "a", "pipeline.py")["steps_executed"] == 0  # settle record kept
    assert cli(copy, "status", "a", "pipeline.py")["nodes"][0]["cache"]["state"] == "stale"
    assert cli(copy, "get", "a", "pipeline.py")["steps_executed"] == 1
    assert cli(copy, "get", "a", "pipeline.py")["steps_executed"] == 0
