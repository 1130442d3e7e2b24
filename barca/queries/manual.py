"""What barca says about itself: ``barca docs`` (the manual's topics, shipped as Markdown inside
the package) and ``barca version``. Result objects like ``barca.present.results``'s."""
from __future__ import annotations

from typing import Any

from barca.core.errors import UsageError, did_you_mean
from barca.core.record import Record


class ManualPage(Record):
    """One page of the manual (the index when ``topic`` is empty; every topic with
    ``every``), as Markdown."""
    __slots__ = ("topic", "text", "every")
    _defaults = {"every": False}
    topic: str
    text: str
    every: bool

    def to_json(self) -> dict[str, Any]:
        """As barca 0.30.2's ``docs --json``: the index is ``{"topics": [{name, summary}]}``
        (``--all``: each with its ``content``), a topic ``{name, summary, content}`` (its
        summary: its page's title)."""
        if not self.topic:
            return {"topics": [dict({"name": n, "summary": summary(n)},
                                    **({"content": _text(n)} if self.every else {}))
                               for n in topics() if n != "index"]}
        return {"name": self.topic, "summary": summary(self.topic), "content": self.text}

    def json_text(self) -> str:
        from barca.core import jsontext
        return jsontext.dumps(self.to_json(), indent=2, ensure_ascii=False)

    def __str__(self) -> str:
        return self.text.removesuffix("\n")

    def _repr_markdown_(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": str(self), "text/markdown": self.text}


class Version(Record):
    """``barca version`` (built by ``faces.commands``, which may import the package itself)."""
    __slots__ = ("version",)
    version: str

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version}

    def __str__(self) -> str:
        return f"barca {self.version}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"text/plain": str(self)}


# other names a reader may try for a topic (barca 0.30's included): the page they mean
ALIASES = {"server": "server-mode", "contract": "agents", "schedule": "scheduling"}


def topics() -> list[str]:
    from importlib import resources  # only for `barca docs`: every command builds --version
    folder = resources.files("barca") / "docs"
    return sorted(p.name[:-3] for p in folder.iterdir() if p.name.endswith(".md"))


def _text(topic: str) -> str:
    from importlib import resources
    return (resources.files("barca") / "docs" / f"{topic}.md").read_text(encoding="utf-8")


def summary(topic: str) -> str:
    """A topic's one line: its page's title."""
    first = next((line for line in _text(topic).splitlines() if line.strip()), topic)
    return first.lstrip("#").strip().strip("`")


def every_page() -> ManualPage:
    """``barca docs --all``: every topic, one after the other, each under a marker line."""
    return ManualPage("", "\n".join(f"<!-- barca docs: {n} -->\n{_text(n).rstrip()}\n"
                                    for n in topics() if n != "index"), True)


def page(topic: str | None) -> ManualPage:
    """``barca docs [topic]``: a topic's page, or the index and the list of topics."""
    from importlib import resources
    names = topics()
    if not topic:
        index = resources.files("barca") / "docs" / "index.md"
        head = index.read_text(encoding="utf-8") if index.is_file() else "barca's manual\n"
        return ManualPage("", head.rstrip() + "\n\nTopics: " + ", ".join(
            n for n in names if n != "index") + "\nRead one with: barca docs <topic>\n")
    topic = ALIASES.get(topic, topic) if topic not in names else topic
    if topic not in names:
        raise UsageError(f"No docs topic '{topic}'.{did_you_mean(topic, names)}",
                         f"Topics: {', '.join(n for n in names if n != 'index')}")
    return ManualPage(topic, _text(topic))
