"""The remote store (``BARCA_REMOTE_URI``): a copy of every artifact, laid out as locally
(``<uri>/artifacts/<node dir>/<run hash>.<ext>``), through fsspec (``file://``, ``s3://``,
``gs://``, ``abfs://`` with their fsspec packages). It is this machine's backup and
read-through cache: a cached result whose local file is missing is fetched, not recomputed."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from barca.errors import InfrastructureError, UsageError

ENV = "BARCA_REMOTE_URI"
PREFIX = ".barca/"


def configured() -> str | None:
    """The store this command uses: ``BARCA_REMOTE_URI``, else ``[remote] uri`` of
    ``barca.toml``; none with ``BARCA_REMOTE=off``."""
    from barca.settings import remote_off, value
    if remote_off():
        return None
    uri = str(value("remote_uri") or "").strip()
    return uri or None


class Remote:
    def __init__(self, uri: str) -> None:
        try:
            import fsspec
        except ImportError:
            raise UsageError(f"{ENV} is set but fsspec is not installed",
                             "pip install 'barca-pipelines[remote]' (and s3fs, gcsfs or adlfs "
                             "for cloud stores), or unset " + ENV) from None
        self.uri = uri
        try:
            self.fs, self.base = fsspec.core.url_to_fs(uri)
        except (ImportError, ValueError) as exc:
            raise UsageError(f"{ENV}={uri!r} cannot be used: {exc}",
                             "Use file:///path, s3://bucket/prefix, gs://... or abfs://..., "
                             "with that store's fsspec package installed.") from None
        self.base = self.base.rstrip("/")
        self.fetched: list[int] = []      # sizes of the artifacts fetched by this command
        self.fetch_seconds = 0.0
        self._listed: dict[tuple[str, str], set[str]] = {}

    def _remote(self, rel: str) -> str:
        return f"{self.base}/{rel[len(PREFIX):] if rel.startswith(PREFIX) else rel}"

    def check(self) -> None:
        """Reachable before any step runs, or exit 3."""
        try:  # a marker written and read back: the store is there and writable
            self.fs.makedirs(self.base, exist_ok=True)
            marker = f"{self.base}/.barca-store"
            self.fs.pipe_file(marker, b"barca artifact store\n")
            self.fs.cat_file(marker)
        except Exception as exc:
            raise InfrastructureError(f"the remote store {self.uri} cannot be reached: "
                                      f"{type(exc).__name__}: {exc}",
                                      f"Check {ENV}, the network and the credentials; or unset "
                                      f"{ENV} to run with the local store only.") from None

    def upload(self, root: Path, rel: str) -> None:
        target = self._remote(rel)
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        self.fs.put_file(str(root / rel), target)

    def fetch(self, root: Path, rel: str) -> int | None:
        """Download one artifact to its local place (atomically); its size, or None."""
        import time

        from barca.artifacts import write_atomic
        start = time.perf_counter()
        try:
            data: Any = self.fs.cat_file(self._remote(rel))
        except Exception:
            return None
        finally:
            self.fetch_seconds += time.perf_counter() - start
        write_atomic(root / rel, bytes(data))
        self.fetched.append(len(data))
        return len(data)

    def listing(self, node_dir: str, store: str = ".barca") -> set[str]:
        """Every artifact the store holds for a node (all its keys), as local relative paths:
        one listing per node, not one request per key."""
        if (store, node_dir) not in self._listed:
            prefix = self._remote(f"{store}/artifacts/")
            try:
                found = self.fs.find(prefix, prefix=node_dir)
            except TypeError:  # a filesystem without prefix listing
                found = [p for p in self.fs.find(prefix) if p[len(prefix):].startswith(node_dir)]
            except Exception:
                found = []
            base = self.base.lstrip("/") if not self.base.startswith("/") else self.base
            self._listed[(store, node_dir)] = {
                PREFIX + p[len(base):].lstrip("/") if p.startswith(base) else p for p in found}
        return self._listed[(store, node_dir)]


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover
