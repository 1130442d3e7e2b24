"""What a saved notebook keeps (nbclient, a real kernel): the progress output's last state --
an interrupt before any step finished, a finished run -- as the widget, its text and its HTML."""
from __future__ import annotations

import pytest
from conftest import Project
from nbtools import execute, notebook, outputs

pytestmark = pytest.mark.slow  # real kernels

SLOW = """\
import time
from barca import asset

@asset()
def first() -> int:
    time.sleep(60)
    return 1

@asset(inputs={"x": first})
def second(x: int) -> int:
    return x + 1
"""

QUICK = """\
from barca import asset

@asset()
def one() -> int:
    return 1

@asset(inputs={"x": one})
def two(x: int) -> int:
    return x + 1
"""


def _bar(nb, i: int) -> dict:
    shown = [o for o in outputs(nb, i) if o["output_type"] == "display_data"]
    assert len(shown) == 1, outputs(nb, i)
    return shown[0]["data"]


def test_saved_progress_is_the_last_state(project: Project) -> None:
    project.write("slow.py", SLOW)
    project.write("quick.py", QUICK)
    nb = notebook("%load_ext barca",
                  # the stop button, pressed while the first step still runs
                  "import os, signal, threading\n"
                  "threading.Timer(4, os.kill, (os.getpid(), signal.SIGINT)).start()",
                  "%barca get second slow.py",
                  "%barca get two quick.py",
                  "threading.Timer(4, os.kill, (os.getpid(), signal.SIGINT)).start()",
                  "%barca get second slow.py --refresh-all")
    execute(nb, project.path)
    stopped = _bar(nb, 2)
    plain = stopped["text/plain"]
    assert plain.startswith("[barca] 0/2 steps ["), plain
    assert plain.endswith("| interrupted"), plain
    assert "100%" not in stopped["text/html"] and "0/0" not in plain
    assert stopped["text/html"].startswith('<div class="barca-progress"')
    assert 'class="barca-bar-failed"' in stopped["text/html"]  # red, where it stopped
    assert "application/vnd.jupyter.widget-view+json" not in stopped  # no script needed
    err = next(o for o in outputs(nb, 2) if o["output_type"] == "error")
    assert err["ename"] == "Cancelled", err
    assert err["evalue"].startswith("the run was interrupted"), err  # not "cancelled:" twice

    done = _bar(nb, 3)
    assert done["text/plain"].startswith("[barca] 2/2 steps ["), done
    assert done["text/plain"].endswith("| done")
    assert "100%" in done["text/html"] and "HBox" not in done["text/plain"]
    assert 'class="barca-bar-done"' in done["text/html"]
    streams = "".join(o.get("text", "") for o in outputs(nb, 3))
    assert "[barca] 2 ran, 0 cached | done in" in streams

    # after --refresh-all, the line that resumes is the one without it
    err = next(o for o in outputs(nb, 5) if o["output_type"] == "error")
    shown = "\n".join(err["traceback"])
    assert "Run %barca get second slow.py (without --refresh-all)" in shown, shown
