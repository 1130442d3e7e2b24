"""The scope switch explained (issue #30), in a real kernel: once a cell defines an asset,
magics without a file read the notebook's own assets; a name that is a pipeline file's says
so, with the line that names the file."""
from __future__ import annotations

import pytest
from conftest import Project
from nbtools import error, execute, notebook, result

pytestmark = pytest.mark.slow  # a real kernel


def test_a_pipeline_files_name_in_a_notebook_scope_says_which_file(seed: Project) -> None:
    nb = notebook("%load_ext barca",
                  "%barca get prices;",
                  "%barca sql select count(*) as n from prices",
                  "from barca import asset\n\n@asset()\ndef local() -> int:\n    return 1",
                  "%barca sql select count(*) as n from prices",
                  "%barca get prices",
                  "%barca get nothing_like_it",
                  "%barca sql select count(*) as n from prices pipeline.py")
    execute(nb, seed.path)
    assert "3" in result(nb, 2)["text/plain"]     # before any cell asset: the project's files
    for i, form in ((4, '%barca sql "select count(*) as n from prices" pipeline.py'),
                    (5, "%barca get prices pipeline.py")):
        err = error(nb, i)
        assert err is not None and err["ename"] == "UsageError", (i, err)
        shown = err["evalue"] + "\n".join(err["traceback"])
        assert "defined in pipeline.py" in shown and "notebook's own assets" in shown, shown
        assert form in shown, shown
    plain = error(nb, 6)
    assert plain is not None and "pipeline.py" not in plain["evalue"]  # no file defines it
    assert "3" in result(nb, 7)["text/plain"]
