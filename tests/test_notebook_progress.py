"""The notebook's progress display, in a real IPython shell (in-process): drawn when the first
steps go to the workers, a total that says when it may still grow, and a last state -- the one
a saved notebook keeps -- that agrees with the end line."""
from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

PIPELINES = Path(__file__).resolve().parent / "pipelines"


@pytest.fixture
def shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ipython: InteractiveShell
          ) -> InteractiveShell:
    (tmp_path / "pipeline.py").write_text((PIPELINES / "regions_from.py").read_text())
    (tmp_path / "regions.txt").write_text("eu us asia af\n")
    monkeypatch.chdir(tmp_path)
    return ipython


def _displays(ip: InteractiveShell, code: str) -> tuple[list, str]:
    with capture_output() as cap:
        assert ip.run_cell(code, store_history=False).success
    return cap.outputs, cap.stdout


def test_progress_from_the_first_step_to_a_full_last_state(shell: InteractiveShell) -> None:
    shown, out = _displays(shell, "%barca get summary pipeline.py")
    first, last = shown[0], shown[-1]
    # drawn before any step finished: nothing done, the step in flight, and a total that
    # says it may grow (the sales keys come from the sensor's output)
    assert not first.update
    assert first.data["text/plain"].startswith("[barca] 0/4+ steps ["), first.data
    assert first.data["text/plain"].endswith("? steps/s] | pipeline.py:region_list")
    # the last state replaces the display in place (what a saved notebook keeps): full, no '+'
    assert last.update and len([o for o in shown if not o.update]) == 1, shown
    assert last.data["text/plain"].startswith("[barca] 7/7 steps ["), last.data
    assert last.data["text/plain"].endswith("| done")
    assert ">100%<" in last.data["text/html"] or "100% <" in last.data["text/html"]
    assert "StatusWidget" not in last.data["text/plain"] and "HBox" not in last.data["text/plain"]
    assert "[barca] 7 ran, 0 cached | done in" in out

    # again: the sensor runs, the rest is cached -- still a full bar, never "1/7"
    shown, out = _displays(shell, "%barca get summary pipeline.py")
    assert shown[-1].data["text/plain"].startswith("[barca] 7/7 steps ["), shown[-1].data
    assert "[barca] 1 ran, 6 cached | done in" in out


def test_the_total_never_shrinks_and_the_plus_goes_once_keys_are_known(
        shell: InteractiveShell) -> None:
    """Keys from a sensor: the total grows once, from '4+' to 7, and is never shown smaller."""
    import barca
    from barca.core import events as ev
    seen: list[ev.StepsStarted] = []
    barca.api.materialize("summary", "pipeline.py",
                          on_event=lambda e: seen.append(e) if isinstance(e, ev.StepsStarted)
                          else None)
    assert [(e.done, e.total, e.unknown) for e in seen] == [
        (0, 4, 1), (1, 4, 1), (2, 7, 0), (6, 7, 0)], seen
    assert seen[2].steps == tuple(f"pipeline.py:sales[region={r}]"
                                  for r in ("eu", "us", "asia", "af"))


def test_one_downstream_step_is_singular(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        ipython: InteractiveShell) -> None:
    """Issue #30: "1 downstream steps" in the magic's error."""
    (tmp_path / "fails.py").write_text(
        "from barca import asset\n\n@asset()\ndef a() -> int:\n    raise ValueError('no')\n\n"
        "@asset(inputs={'x': a})\ndef b(x: int) -> int:\n    return x\n")
    monkeypatch.chdir(tmp_path)
    with capture_output():
        res = ipython.run_cell("%barca get b fails.py", store_history=False)
    message = res.error_in_exec.message
    assert message.endswith("; 1 downstream step skipped"), message
