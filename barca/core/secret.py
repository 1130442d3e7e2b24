"""The shared secret of a team's store (``BARCA_STORE_KEY``, else the file ``[remote] key_file``
names): what signs the store's manifests and keys the digests of ``env=`` values."""
from __future__ import annotations

import os

KEY_ENV = "BARCA_STORE_KEY"


def store_key(key_file: str | None) -> bytes | None:
    """The shared secret, or None: ``BARCA_STORE_KEY``, else the file ``key_file``
    (``Settings.store_key_file``: ``[remote] key_file`` of ``barca.toml``) names. A secret, not
    a setting: read by each process that needs it from its own environment, never copied into
    a ``Settings``, a message, a record or the store."""
    secret = os.environ.get(KEY_ENV, "").strip()
    if not secret:
        path = key_file
        if path:
            from pathlib import Path
            try:
                secret = Path(str(path)).expanduser().read_text(encoding="utf-8").strip()
            except OSError as exc:
                from barca.core.errors import UsageError
                raise UsageError(f"barca.toml [remote] key_file: cannot read {path} "
                                 f"({exc.strerror or exc}).",
                                 "Point key_file at a readable file holding the store's key, "
                                 "or set BARCA_STORE_KEY.") from None
    return secret.encode("utf-8") if secret else None
