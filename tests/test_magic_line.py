"""The ``%barca`` line in a real IPython shell (in-process): values from the user's namespace
stay one argument each, and a trailing ``;`` hides the output as for any IPython line."""
from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from barca.core.errors import UsageError
from barca.faces.jupyter.magics import _split

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ipython: InteractiveShell
          ) -> InteractiveShell:
    (tmp_path / "pipeline.py").write_text((REPO / "examples/seed/pipeline.py").read_text())
    (tmp_path / "feed_version.txt").write_text("v1\n")
    monkeypatch.chdir(tmp_path)
    return ipython


def _run(ip: InteractiveShell, code: str):
    res = ip.run_cell(code, store_history=False)
    return res


def test_a_value_with_flags_in_it_stays_one_argument(shell: InteractiveShell) -> None:
    assert _run(shell, "%barca get report pipeline.py;").success
    # IPython's own expansion would have made '--refresh-all' a flag and re-run every step
    shell.user_ns["t"] = "report --refresh-all"
    res = _run(shell, "%barca get {t} pipeline.py")
    assert isinstance(res.error_in_exec, UsageError), res.error_in_exec
    assert "report --refresh-all" in str(res.error_in_exec)
    plan = _run(shell, "%barca get report pipeline.py --dry-run").result
    assert plan.summary()["will_run"] == 1, plan   # the sensor, which always runs; nothing else


def test_references_expand_inside_their_argument(shell: InteractiveShell) -> None:
    shell.user_ns["t"] = "MSFT"
    for ref in ("{t}", "$t", '{" ".join([t]).strip()}'):
        value = _run(shell, f"%barca get prices pipeline.py --partition ticker={ref}").result
        assert list(value) == ["ticker=MSFT"], (ref, value)


def test_a_trailing_semicolon_hides_the_output(shell: InteractiveShell) -> None:
    res = _run(shell, "%barca get report pipeline.py;")
    assert res.success and res.result is None
    res = _run(shell, "%barca get report pipeline.py")
    assert res.result == {"buys": ["GOOG", "MSFT"], "tickers": 3}


def test_a_reference_with_spaces_is_never_split() -> None:
    assert _split('get {", ".join(x)} pipeline.py') == ["get", '{", ".join(x)}', "pipeline.py"]
    assert _split("sql 'select 1' --limit {n}") == ["sql", "select 1", "--limit", "{n}"]


def test_help_says_what_the_magic_returns(shell: InteractiveShell, capsys) -> None:
    """Issue #30: `%barca --help` said `plan` is JSON, where the magic returns a table."""
    _run(shell, "%barca --help")
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("plan "))
    assert "a table in a notebook" in line, line
