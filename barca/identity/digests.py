"""The digests everything in identity is made of (``sha``, ``digest``), and which files are the
project's code (``in_project``): the bottom of the identity package, imported by the cone and the
module index as by the definition hash."""
from __future__ import annotations

from barca.core.sha import sha256

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:  # (nor pathlib: in_project's callers pass their Paths)
    from pathlib import Path


def sha(*parts: str | bytes) -> str:
    """SHA-256 of the parts, each followed by a NUL: the one way barca hashes a list of parts
    (text parts are joined and hashed in one call; bytes parts are fed one by one)."""
    try:
        # a bytes part fails the join (the TypeError): one check, not one per part
        text = "\x00".join(parts)  # type: ignore[arg-type]  # bytes: the TypeError below
        data = (text + "\x00").encode("utf-8", "surrogatepass")
    except TypeError:  # a bytes part
        import hashlib  # fed in parts: see barca.core.sha
        h = hashlib.sha256()
        for p in parts:
            h.update(p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
        return h.hexdigest()
    return sha256(data).hexdigest()


def digest(*parts: str | bytes) -> str:
    """A short digest of one part, stored so a cache miss can say what changed."""
    return sha(*parts)[:16]


INSTALLED = frozenset({"site-packages", "dist-packages"})


def in_project(root: Path, path: Path) -> bool:
    """Whether ``path`` is the project's own code, which the definition hash follows and
    workers run from source: under ``root``, and not in an installed package (a virtualenv
    inside the project is not its code). Both paths resolved."""
    return path.is_relative_to(root) and not INSTALLED.intersection(path.relative_to(root).parts)
