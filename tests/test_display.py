"""How result objects show themselves in a notebook: the mime bundle, the HTML table, colours."""
from __future__ import annotations

import re

import pytest

from barca.core.render import COLOURS, short_names
from barca.present.journal import History, RunRow
from barca.present.listview import Listing, ListRow
from barca.present.results import (
    Plan,
    PlanRow,
    RunResult,
    StatusReport,
    StatusRow,
    StepSummary,
)


def _status() -> StatusReport:
    return StatusReport((
        StatusRow("pipeline.py:prices", "asset", "cached", "", "materialized", "-", "dict", (),
                  ()),
        StatusRow("pipeline.py:report", "asset", "stale", "", "a rather long reason " * 6, "-",
                  "-", ("pipeline.py:prices",), ("pipeline.py:prices",)),
    ))


def _plan() -> Plan:
    return Plan("barca get report", "report", (
        PlanRow("pipeline.py:prices", "asset", "cached", "", "3 keys cached", None, 0, 3, 0),
        PlanRow("pipeline.py:report", "asset", "will run", "", "changed", None, 1, 0, 0),
        PlanRow("other.py:report", "asset", "cached", "", "-", None, 0, 1, 0),
    ))


@pytest.mark.parametrize("obj", [_status(), _plan(), Listing((ListRow(
    "pipeline.py:prices", "asset", "always", ()),)), History((RunRow(
        "2c0ee86aed55", "get", "report", "success", 1.7e9, 1.7e9 + 1, 1, 7, 0, 2, None),))])
def test_bundle_is_text_and_html_unless_json_is_asked_for(obj) -> None:
    assert sorted(obj._repr_mimebundle_()) == ["text/html", "text/plain"]
    asked = obj._repr_mimebundle_(include={"application/json"})
    assert asked == {"application/json": obj.to_json()}
    both = obj._repr_mimebundle_(include={"application/json", "text/plain"})
    assert sorted(both) == ["application/json", "text/plain"]
    assert sorted(obj._repr_mimebundle_(exclude={"text/html"})) == ["text/plain"]


def test_every_cell_is_left_aligned_inline() -> None:
    html = _status()._repr_html_()
    cells = re.findall(r"<t[dh]\b[^>]*>", html)
    assert cells and all('text-align:left' in c for c in cells), cells
    why = re.findall(r'<td class="barca-why" title="([^"]*)"', html)
    # the notebook says the code in words (issue #30): "materialized" is "up to date"
    assert why[0] == "up to date" and why[1].startswith("a rather long reason")


def test_short_names_where_unambiguous() -> None:
    assert short_names(["a.py:x", "a.py:y[k=1]", "b.py:y", "a.py:y[k=2]"]) == {
        "a.py:x": "x", "a.py:y[k=1]": "a.py:y[k=1]", "b.py:y": "b.py:y",
        "a.py:y[k=2]": "a.py:y[k=2]"}
    html = _plan()._repr_html_()
    assert ">prices</td>" in html                      # unambiguous: the name
    assert ">pipeline.py:report</td>" in html and ">other.py:report</td>" in html
    assert "pipeline.py:prices" in str(_plan())       # the text is the CLI's, unchanged
    run = RunResult("barca get report", "r1", "success", 0.1, 1, 2, 1, (
        StepSummary("pipeline.py:prices", "asset", "cached", "", "-", None),), ())
    assert ">prices</td>" in run._repr_html_()
    listing = Listing((ListRow("pipeline.py:prices", "asset", "always", ()),
                       ListRow("pipeline.py:report", "asset", "always", ("pipeline.py:prices",))))
    assert ">report</td>" in listing._repr_html_() and ">prices</td>" in listing._repr_html_()
    assert "pipeline.py:report" in str(listing)


def _luminance(hex_colour: str) -> float:
    h = hex_colour.lstrip("#")
    c = [int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


@pytest.mark.parametrize("state", sorted(COLOURS))
def test_white_on_every_state_colour_reaches_wcag_aa(state: str) -> None:
    """Badges and DAG boxes are white text on the state's colour, in light and dark themes."""
    ratio = 1.05 / (_luminance(COLOURS[state]) + 0.05)
    assert ratio >= 4.5, (state, COLOURS[state], round(ratio, 2))


def test_doctor_in_a_notebook_has_badges_and_a_fix_column() -> None:
    """Issue #30: doctor's CHECK is a badge like every state, and FIX is never a blank column."""
    from barca.queries.doctor import Check, Checkup
    up = Checkup((Check("barca.toml", True, "valid"),
                  Check("metadata.db", False, "fails PRAGMA quick_check", "Move it aside")))
    html = up._repr_html_()
    badges = re.findall(r'class="barca-badge" data-state="(\w+)" style="background:([^;]+);',
                        html)
    assert badges == [("ok", COLOURS["cached"]), ("PROBLEM", COLOURS["failed"])], badges
    fixes = re.findall(r'<td class="barca-cell" title="([^"]*)"[^>]*>[^<]*</td></tr>', html)
    assert fixes == ["-", "Move it aside"], fixes
    assert str(up).splitlines()[1].startswith("ok ")   # the CLI's text is unchanged
