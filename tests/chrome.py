"""Chromium through the Playwright client, for the tests that look at a page (tests only)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"   # Debian's chromium: .ci/run installs it
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def missing() -> str:
    """Why no browser test can run here, or "" when one can."""
    if not Path(CHROMIUM).is_file():
        return f"{CHROMIUM} is not installed (apt-get install chromium; .ci/run installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright client is not installed (pip install -e '.[test]')"
    return ""


def launch(pw: Any) -> Any:
    """A headless Chromium from a ``sync_playwright()`` context."""
    return pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
