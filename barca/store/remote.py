"""The remote store (``BARCA_REMOTE_URI``): a copy of every artifact, laid out as locally
(``<uri>/artifacts/<node dir>/<run hash>.<ext>``), through fsspec (``file://``, ``s3://``,
``gs://``, ``abfs://`` with their fsspec packages). It is this machine's backup and
read-through cache: a cached result whose local file is missing is fetched, not recomputed."""
from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from barca.core.errors import InfrastructureError, UsageError
from barca.store import manifest

ENV = "BARCA_REMOTE_URI"
PREFIX = ".barca/"
_TOO_LONG = "is longer than recorded"
MANIFEST_MAX = 1 << 16  # bytes: a manifest is far smaller; a larger one is not read
_REPAIRS = 6           # rounds of repair when machines keep replacing a result at once
_SETTLE_SECONDS = 2.0  # how long bytes without a manifest may be another machine's upload


def open_store(settings: Any, on_note: Callable[[str], None] | None = None) -> Remote | None:
    """The store a command with these ``Settings`` uses (``remote_uri``: ``BARCA_REMOTE_URI``,
    else ``[remote] uri``; none with ``BARCA_REMOTE=off``), or None."""
    uri = settings.remote_uri
    return Remote(uri, on_note, settings.store_key_file) if uri else None


class Remote:
    def __init__(self, uri: str, on_note: Callable[[str], None] | None = None,
                 key_file: str | None = None) -> None:
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
        except OSError as exc:  # a filesystem that connects when made (ftp, sftp, smb)
            raise InfrastructureError(f"the remote store {uri} cannot be reached: "
                                      f"{type(exc).__name__}: {exc}",
                                      f"Check {ENV}, the network and the credentials; or unset "
                                      f"{ENV} to run with the local store only.") from None
        self.base = self.base.rstrip("/")
        self.fetched: list[int] = []      # sizes of the artifacts fetched by this command
        self.fetch_seconds = 0.0
        self._listed: dict[tuple[str, str], set[str]] = {}
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple)
                                else (self.fs.protocol,))
        self.secret = manifest.store_key(key_file)
        self.on_note = on_note            # told each remark as it is made (the runner's warnings)
        self.notes: list[str] = []
        self.warned_pickles = False
        self.warned_unsigned = False
        self._rejected: set[str] = set()
        self.settle_seconds = _SETTLE_SECONDS

    def _path(self, rel: str) -> str:
        """A local relative path (``.barca/artifacts/...``) as a path in the store."""
        return rel.removeprefix(PREFIX)

    def _full(self, path: str) -> str:
        return f"{self.base}/{path}"

    def check(self) -> None:
        """Reachable before any step runs, or exit 3."""
        try:  # a marker written and read back: the store is there and writable
            self.fs.makedirs(self.base, exist_ok=True)
            marker = f"{self.base}/.barca-store"
            # written by rename, never through whatever is there: a symlink planted in a
            # shared folder store must not make every command write a file it points at
            self._write(marker, b"barca artifact store\n")
            self.fs.cat_file(marker)
        except Exception as exc:
            raise InfrastructureError(f"the remote store {self.uri} cannot be reached: "
                                      f"{type(exc).__name__}: {exc}",
                                      f"Check {ENV}, the network and the credentials; or unset "
                                      f"{ENV} to run with the local store only.") from None

    # ------------------------------------------------------------------ writing
    def upload(self, root: Path, rel: str, node: str, key: str, data: bytes | None = None) -> None:
        """Copy one result to the store, at its local relative path, then its manifest beside
        it, which makes it visible. The bytes are created only where nothing is (so a machine
        racing on the same run hash with other bytes never replaces the winner's), the manifest
        likewise: the first complete pair wins and the loser writes nothing more. What is not
        a good pair (bytes without a manifest: an upload cut short; a manifest its bytes do not
        match, or not signed with the key) is replaced by this result, and checked again until
        the store holds one manifest its bytes match. Without ``data`` the result's file is
        hashed and copied in blocks: a table larger than memory uploads too."""
        from barca.store.artifacts import EXT, file_sha256
        source: bytes | Path
        if data is None:
            source = root / rel
            size, digest = source.stat().st_size, file_sha256(source)
        else:
            source, size, digest = data, len(data), hashlib.sha256(data).hexdigest()
        path = self._path(rel)
        fmt = next((f for f, e in EXT.items() if path.endswith("." + e)), "pickle")
        raw = manifest.make(path, node, key, fmt, size, digest, self.secret)
        mpath = path + manifest.SUFFIX
        for attempt in range(_REPAIRS):
            current = self._cat(mpath)
            body = self._checked(current, path)
            if body is not None:
                held = self._holds(path, body)
                if held == "old" and body["sha256"] == digest:
                    # a store of the earlier layout holding this very result: copied to its
                    # name now too, so the store mirrors .barca/ (the old copy stays readable)
                    self._create(path, source)
                if held:  # a good pair: this result, or another machine's that won
                    return
            if attempt == 0:
                if self._create(path, source) or self._same(path, digest, size):
                    # these bytes are at the result's name: their manifest makes them visible
                    if current is None:
                        if self._create(mpath, raw):
                            return
                    else:  # a manifest that does not describe them: replaced
                        self._write(self._full(mpath), raw)
                    continue  # checked again: another machine may have written meanwhile
                if current is None and self._settles(path, mpath):
                    return  # another machine's bytes, whose manifest came: it won
            else:  # two machines repairing at once: one of them goes first
                import random
                import time
                time.sleep(random.uniform(0.0, 0.02 * attempt))
            self._write(self._full(path), source)
            self._write(self._full(mpath), raw)
        body = self._checked(self._cat(mpath), path)
        if body is None or not self._holds(path, body):
            raise OSError(f"the store's copy of {rel} kept changing while it was written")

    def _checked(self, raw: bytes | None, path: str) -> dict[str, Any] | None:
        try:
            return manifest.read(raw, path, self.secret) if raw is not None else None
        except manifest.Rejected:
            return None

    def _holds(self, path: str, body: dict[str, Any]) -> str | None:
        """Whether the store has the bytes this manifest names: at the result's own name
        (``"path"``), under the earlier layout's digest name (``"old"``), or not (None)."""
        if self._digest(path, body["size"]) == (body["sha256"], body["size"]):
            return "path"
        old = manifest.blob_path(path, body["sha256"])
        return "old" if self._digest(old, body["size"]) == (body["sha256"], body["size"]) \
            else None

    def _same(self, path: str, digest: str, size: int) -> bool:
        return self._digest(path, size) == (digest, size)

    def _digest(self, source: str, limit: int) -> tuple[str, int] | None:
        """(SHA-256, size) of a file of the store, read in blocks and never past ``limit``
        plus one byte; None when absent, unreadable or not a regular file."""
        f = self._open(source)
        if f is None or isinstance(f, str):
            return None
        h, length = hashlib.sha256(), 0
        try:
            with f:
                while chunk := f.read(min(1 << 20, limit + 1 - length)):
                    h.update(chunk)
                    length += len(chunk)
                    if length > limit:
                        break
        except Exception:
            return None
        return h.hexdigest(), length

    def _settles(self, path: str, mpath: str) -> bool:
        """Other bytes at the result's name and no manifest: another machine between its
        bytes and its manifest, or an upload cut short. True when a manifest its bytes match
        appears within a short wait (that machine won); False: the upload was cut short."""
        import time
        end = time.monotonic() + self.settle_seconds
        while time.monotonic() < end:
            time.sleep(0.02 if self.local else 0.2)
            raw = self._cat(mpath)
            if raw is not None:
                body = self._checked(raw, path)
                return body is not None and self._holds(path, body) is not None
        return False

    def _write(self, target: str, source: bytes | Path) -> None:
        """Readers see all of it or nothing: a rename here, a single PUT (or a multipart upload,
        which appears when complete) on object stores. ``source``: the bytes, or a file."""
        if self.local:
            from barca.store.artifacts import write_atomic
            write_atomic(Path(target), source)
            return
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        if isinstance(source, bytes):
            self.fs.pipe_file(target, source)
        else:
            self.fs.put_file(str(source), target)

    def _create(self, path: str, source: bytes | Path) -> bool:
        """Write ``path`` (of the store) only if nothing is there (False if something is),
        atomically: a hard link of a complete temp file here, a conditional PUT
        (If-None-Match) on S3. ``source``: the bytes, or a file copied in blocks."""
        target = self._full(path)
        if self.local:
            import shutil
            import tempfile

            from barca.store.artifacts import file_mode
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=Path(target).parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    if isinstance(source, bytes):
                        f.write(source)
                    else:
                        with open(source, "rb") as src:
                            shutil.copyfileobj(src, f, 1 << 20)
                os.chmod(tmp, file_mode())  # other machines of the team read it
                os.link(tmp, target)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        self.fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        try:
            if isinstance(source, bytes):
                self.fs.pipe_file(target, source, mode="create")
            else:
                self.fs.put_file(str(source), target, mode="create")
            return True
        except FileExistsError:
            return False
        except (TypeError, NotImplementedError, ValueError):
            pass  # a store without conditional writes: check, then write (a narrow race)
        if self.fs.exists(target):
            return False
        self._write(target, source)
        return True

    # ------------------------------------------------------------------ reading
    def fetch(self, root: Path, rel: str, sha256: str | None = None) -> int | None:
        """Download one result to its local place; its size, or None when the store has no
        good copy of it. With ``sha256`` (this machine's own record of the result) the bytes
        are checked against it; otherwise against the store's manifest, which with a key must
        be signed with it. The bytes stream into a temp file beside the result and are renamed
        into place only once checked: nothing unchecked is read (or unpickled), and a result
        larger than memory fetches too."""
        import time
        start = time.perf_counter()
        try:
            size = self._download(root / rel, rel, sha256)
        finally:
            self.fetch_seconds += time.perf_counter() - start
        if size is not None:
            self.fetched.append(size)
        return size

    def _download(self, dest: Path, rel: str, sha256: str | None) -> int | None:
        path = self._path(rel)
        body: dict[str, Any] | None = None
        if sha256:  # this machine's own record: the store's manifest is not needed
            size, why = self._size_of(path, sha256), "did not match the SHA-256 recorded here"
        else:
            body = self._manifest(rel, path)
            if body is None:
                return None
            sha256, size, why = body["sha256"], body["size"], "did not match its manifest"
        from barca.store.artifacts import commit, discard
        bad: str | None = None
        # the result's own name; then the name a store of the earlier layout gave its bytes
        # (their digest), so a store written before this layout still serves what it holds
        for source in (path, manifest.blob_path(path, sha256)):
            got = self._stream(source, dest, size)
            if got is None:
                continue  # not in the store under this name
            if isinstance(got, str):  # not a regular file, or longer than it should be
                bad = bad or (why if got == _TOO_LONG else got)
                continue
            tmp, digest, length = got
            if digest != sha256 or (size is not None and length != size):
                discard(tmp)  # other bytes (another machine's, or damaged): never a value
                bad = bad or why
                continue
            if body is not None and self.secret is None:
                self._unsigned(body["format"])
            commit(tmp, dest)
            return length
        if bad is not None or body is not None:  # or a manifest naming bytes not there
            self._reject(rel, bad or why)
        return None

    def _size_of(self, path: str, sha256: str) -> int | None:
        """The size the store's manifest gives bytes with this digest (the bound of their
        read), when it has one that names them; the store's word is not needed otherwise."""
        raw = self._cat(path + manifest.SUFFIX)
        try:
            body = manifest.read(raw, path, self.secret) if raw is not None else None
        except manifest.Rejected:
            return None
        return body["size"] if body is not None and body["sha256"] == sha256 else None

    def _unsigned(self, fmt: str) -> None:
        """A result taken on the store's word alone (its manifest, with no key to check who
        wrote it): said once per command, and once more, louder, for a pickle."""
        if not self.warned_unsigned:
            self.warned_unsigned = True
            self._note("results taken from the shared store are not signed: anyone "
                       f"who can write to it decides what they hold; set {manifest.KEY_ENV} (the "
                       "same long random string on every machine that shares the store) to "
                       "accept only signed results (barca docs remote)")
        if fmt == "pickle" and not self.warned_pickles:
            self.warned_pickles = True
            self._note("a pickle from the shared store is trusted as code: set "
                       f"{manifest.KEY_ENV} on every machine that shares it to accept only "
                       "signed results (barca docs remote)")

    def _stream(self, source: str, dest: Path,
                size: int | None) -> tuple[str, str, int] | str | None:
        """``source`` copied into a temp file beside ``dest`` in chunks: (temp path, SHA-256,
        size); None when the store cannot give it; why, when it must not be read. A store
        writer decides what is there, so the read is bounded: a regular file only (a FIFO
        would block every reader, a link to ``/dev/zero`` never ends) and never more than
        ``size`` (the manifest's) plus one byte -- a huge object cannot fill the disk."""
        import tempfile

        from barca.store.artifacts import discard
        f = self._open(source)
        if f is None or isinstance(f, str):
            return f
        if size is None and self.local:
            size = os.fstat(f.fileno()).st_size  # the file's own size when it was opened
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-")
        h, length = hashlib.sha256(), 0
        try:
            with f, os.fdopen(fd, "wb") as out:
                while chunk := f.read(1 << 20 if size is None else min(1 << 20, size + 1 - length)):
                    h.update(chunk)
                    out.write(chunk)
                    length += len(chunk)
                    if size is not None and length > size:
                        discard(tmp)
                        return _TOO_LONG
        except Exception:  # the store failed mid-way: as good as absent
            discard(tmp)
            return None
        return tmp, h.hexdigest(), length

    def _open(self, source: str) -> Any:
        """An open binary file of the store, None when absent, or why it must not be read.
        In a folder store: opened without following a symlink and without blocking on a FIFO,
        then checked to be a regular file -- checked on what was opened, not on a name that
        could be swapped between a check and the open."""
        full = self._full(source)
        if not self.local:
            try:  # asked of the store itself, not of a listing cached earlier in the command:
                self.fs.invalidate_cache(full)  # another machine may have written since
                return self.fs.open(full, "rb")
            except Exception:  # absent, or unreadable: not in the store
                return None
        import stat
        try:
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        except OSError:  # ELOOP: a symlink in a blob's place
            return "is not a regular file (a symlink?)"
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return "is not a regular file"
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def vouches(self, rel: str) -> bool:
        """The store holds this result under a manifest that checks (signed, with a key), as
        ``fetch`` would accept it -- what a prediction shows as cached; its bytes, checked
        only when fetched, are not read."""
        return self._manifest(rel, self._path(rel)) is not None

    def _manifest(self, rel: str, path: str) -> dict[str, Any] | None:
        """The store's manifest of a result, checked (and signed, with a key); None when
        there is none or it does not verify (said once)."""
        raw = self._cat(path + manifest.SUFFIX)
        if raw is None:
            return None
        try:
            return manifest.read(raw, path, self.secret)
        except manifest.Rejected as exc:
            self._reject(rel, f"is not signed with {manifest.KEY_ENV}" if exc.unsigned
                         else "did not match its manifest")
            return None

    def _cat(self, path: str, limit: int = MANIFEST_MAX) -> bytes | None:
        """A small file of the store, whole; None when absent, unreadable, not a regular file
        or longer than ``limit`` (a manifest is a few hundred bytes)."""
        f = self._open(path)
        if f is None or isinstance(f, str):
            return None
        try:
            with f:
                data = bytes(f.read(limit + 1))
        except Exception:
            return None
        return data if len(data) <= limit else None

    def _reject(self, rel: str, why: str) -> None:
        if rel in self._rejected:
            return
        self._rejected.add(rel)
        self._note(f"the store's copy of {rel} {why}; computing it again")

    def _note(self, text: str) -> None:
        self.notes.append(text)
        if self.on_note is not None:
            self.on_note(text)

    def listing(self, node_dir: str, store: str = ".barca") -> set[str]:
        """The results the store holds for one node directory (one key), as local relative
        paths: those with a manifest. One listing per directory, not one request per file."""
        if (store, node_dir) not in self._listed:
            folder = self._full(self._path(f"{store}/artifacts/{node_dir}"))
            try:
                names = (os.listdir(folder) if self.local
                         else [p.rsplit("/", 1)[-1] for p in self.fs.ls(folder, detail=False)])
            except Exception:
                names = []
            self._listed[(store, node_dir)] = {
                f"{store}/artifacts/{node_dir}/{n[:-len(manifest.SUFFIX)]}"
                for n in names if n.endswith(manifest.SUFFIX)}
        return self._listed[(store, node_dir)]


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover
