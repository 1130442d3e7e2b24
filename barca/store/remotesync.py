"""The remote store around a run: reachable before any step (or exit 3), what earlier commands
could not copy to it copied now, and after the run a note of what was fetched and a warning for
what could not be uploaded."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barca.core import events as ev


def prepare(remote: Any, store: Any, reads_env: bool = False,
            warn: Callable[[str], None] | None = None) -> None:
    """Before any step: the store is reachable (or exit 3), and what an earlier command could
    not copy to it (or ran without it) is copied now. ``reads_env``: a node declares ``env=``,
    whose values are keyed with this project's own salt when the store has no key -- said."""
    if remote is None:
        return
    remote.check()
    if reads_env and remote.secret is None and warn is not None:
        from barca.core.secret import KEY_ENV
        warn(f"without {KEY_ENV}, results that depend on env= values are this project's own: "
             "they are not shared through the store (barca docs remote)")
    pending = store.pending_uploads()
    if not pending:
        return
    from concurrent.futures import ThreadPoolExecutor
    root = store.root

    def one(item: tuple[int, str, str, str]) -> int | None:
        row_id, path, node, key = item
        if not (root / path).is_file():
            return None
        try:
            remote.upload(root, path, node, key)
            return row_id
        except Exception:
            return None

    with ThreadPoolExecutor(8) as pool:
        done = [i for i in pool.map(one, pending) if i is not None]
    store.mark_uploaded(done)


def notes(remote: Any, upload_errors: list[str], on_event: ev.EventCallback) -> list[str]:
    """After the run: what was fetched (a note), what could not be uploaded (a warning)."""
    if remote is None:
        return []
    if remote.fetched:
        from barca.store.remote import human_bytes
        got = remote.fetched
        on_event(ev.Note(
            f"fetched {len(got)} cached artifact{'s' if len(got) != 1 else ''} "
            f"({human_bytes(sum(got))}) in {remote.fetch_seconds:.1f}s", "info"))
    if not upload_errors:
        return []
    n = len(upload_errors)
    text = (f"{n} artifact{'s' if n != 1 else ''} could not be copied to the remote store "
            f"(the next command retries): {upload_errors[0]}")
    on_event(ev.Note(text, "warning"))
    return [text]
