"""The scope switch explained (issue #30), in a real kernel: once a cell defines an asset,
magics without a file read the notebook's own assets; a name that is a pipeline file's says
so, with the line that names the file. Also the trailing ';' and an empty log, as nbclient
sees them."""
from __future__ import annotations

import pytest
from conftest import Project
from nbtools import error, execute, notebook, outputs, result, text

pytestmark = pytest.mark.slow  # a real kernel


def test_a_pipeline_files_name_in_a_notebook_scope_says_which_file(seed: Project) -> None:
    nb = notebook("%load_ext barca",
                  "%barca get prices;",
                  "%barca sql select count(*) as n from prices",
                  "%barca logs",
                  "from barca import asset\n\n@asset()\ndef local() -> int:\n    return 1",
                  "%barca sql select count(*) as n from prices",
                  "%barca get prices",
                  "%barca get nothing_like_it",
                  "%barca sql select count(*) as n from prices pipeline.py",
                  "%barca status",
                  "%barca status pipeline.py")
    execute(nb, seed.path)
    # a trailing ';' hides the value, as for any IPython line (the file is not "pipeline.py;")
    assert error(nb, 1) is None
    assert not [o for o in outputs(nb, 1) if o["output_type"] == "execute_result"]
    assert "3" in result(nb, 2)["text/plain"]     # before any cell asset: the project's files
    # a run that printed nothing says so (not an empty table)
    logs = result(nb, 3)
    assert "no output recorded for this run" in logs["text/plain"] + logs.get("text/html", "")
    assert "<table" not in logs.get("text/html", "")
    for i, form in ((5, '%barca sql "select count(*) as n from prices" pipeline.py'),
                    (6, "%barca get prices pipeline.py")):
        err = error(nb, i)
        assert err is not None and err["ename"] == "UsageError", (i, err)
        shown = err["evalue"] + "\n".join(err["traceback"])
        assert "defined in pipeline.py" in shown and "notebook's own assets" in shown, shown
        assert form in shown, shown
    plain = error(nb, 7)
    assert plain is not None and "pipeline.py" not in plain["evalue"]  # no file defines it
    assert "3" in result(nb, 8)["text/plain"]
    # status says which scope it read
    assert "[barca] status reads the 1 node defined in this notebook (no file named); " \
        "name a file to read a pipeline's: %barca status pipeline.py" in text(nb, 9), text(nb, 9)
    assert "reads the" not in text(nb, 10)
