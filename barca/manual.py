"""``barca docs``: the manual's topics, shipped as Markdown inside the package."""
from __future__ import annotations

from importlib import resources

from barca.errors import UsageError, did_you_mean


def topics() -> list[str]:
    folder = resources.files("barca") / "docs"
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".md"))


def topic_text(topic: str | None) -> str:
    names = topics()
    if not topic:
        index = resources.files("barca") / "docs" / "index.md"
        head = index.read_text(encoding="utf-8") if index.is_file() else "barca's manual\n"
        return head.rstrip() + "\n\nTopics: " + ", ".join(n for n in names if n != "index") + \
            "\nRead one with: barca docs <topic>\n"
    if topic not in names:
        raise UsageError(f"No docs topic '{topic}'.{did_you_mean(topic, names)}",
                         f"Topics: {', '.join(n for n in names if n != 'index')}")
    return (resources.files("barca") / "docs" / f"{topic}.md").read_text(encoding="utf-8")
