"""The manual answers the names a reader tries: `serve`, `scheduling` and `server` (the server
topics of issue #32), and barca 0.30's `contract`."""
from __future__ import annotations

import pytest

from barca.core.errors import UsageError
from barca.queries.manual import page, topics


@pytest.mark.parametrize("name,heading", [
    ("serve", "serve"), ("scheduling", "Scheduling"), ("server", "Server mode"),
    ("server-mode", "Server mode"), ("contract", "scripts, CI and AI agents")])
def test_server_topics_and_other_names(name: str, heading: str) -> None:
    text = page(name).text
    assert heading in text.splitlines()[0], text[:200]


def test_an_unknown_topic_is_a_usage_error_naming_the_closest() -> None:
    with pytest.raises(UsageError) as e:
        page("serv")
    assert "serve" in e.value.message
    assert "server" not in topics()  # an alias is not listed as a page of its own
