"""Manifests: what a result in the shared store should be. One small JSON file per result
(``<run hash>.<ext>.manifest`` beside its bytes ``<run hash>.<ext>``): the path, node, key,
run hash, format, size and SHA-256 of the bytes, and, with a shared secret
(``BARCA_STORE_KEY``), an HMAC-SHA256 over all of them. A result is in the store only through
a manifest that verifies."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from barca.core.secret import KEY_ENV, store_key  # noqa: F401 (the store reads its key here)

SUFFIX = ".manifest"
VERSION = 1
_FIELDS = {"v": int, "path": str, "node": str, "key": str, "run_hash": str, "format": str,
           "size": int, "sha256": str}


class Rejected(Exception):
    """A manifest that does not describe the result asked for, or is not signed with the key."""

    def __init__(self, unsigned: bool = False) -> None:
        super().__init__("unsigned" if unsigned else "mismatch")
        self.unsigned = unsigned


def blob_path(path: str, sha256: str) -> str:
    """Where a store of the earlier layout (before results were kept at their local name) put
    the bytes of ``artifacts/<dir>/<run hash>.<ext>`` with this digest: still read, so an
    upgrade loses nothing."""
    stem, ext = path.rsplit(".", 1)
    return f"{stem}.{sha256[:16]}.{ext}"


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def _sign(body: dict[str, Any], secret: bytes) -> str:
    import hmac  # only with a store key: every run that may use a store loads this module
    return hmac.new(secret, _canonical(body), hashlib.sha256).hexdigest()


def make(path: str, node: str, key: str, fmt: str, size: int, sha256: str,
         secret: bytes | None) -> bytes:
    """The manifest of the ``size`` bytes of digest ``sha256`` stored at ``path`` (relative to
    the store's root)."""
    run_hash = path.rsplit("/", 1)[-1].split(".", 1)[0]
    body: dict[str, Any] = {"v": VERSION, "path": path, "node": node, "key": key,
                            "run_hash": run_hash, "format": fmt, "size": size,
                            "sha256": sha256}
    if secret is not None:
        body["signature"] = _sign(body, secret)
    return json.dumps(body, sort_keys=True, indent=1).encode() + b"\n"


def read(raw: bytes, path: str, secret: bytes | None) -> dict[str, Any]:
    """The manifest of the result at ``path``, checked: well formed, naming this path (so a
    manifest copied from another result does not pass for this one) and, with a key, signed
    with it. ``Rejected`` otherwise."""
    from barca.store.artifacts import EXT, node_dir
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise Rejected() from None
    if not isinstance(body, dict):
        raise Rejected()
    signature = body.pop("signature", None)
    if set(body) != set(_FIELDS) or any(type(body[k]) is not t for k, t in _FIELDS.items()):
        raise Rejected()
    folder, name = path.rsplit("/", 1)
    try:
        own_dir = node_dir(body["node"], body["key"])
    except ValueError:  # a key no step could have
        raise Rejected() from None
    if (body["v"] != VERSION or body["path"] != path or body["format"] not in EXT
            or name != f"{body['run_hash']}.{EXT[body['format']]}"
            or folder.rsplit("/", 1)[-1] != own_dir
            or len(body["sha256"]) != 64 or body["sha256"].strip("0123456789abcdef")
            or body["size"] < 0):
        raise Rejected()
    if secret is not None:
        import hmac
        if not (isinstance(signature, str) and hmac.compare_digest(signature,
                                                                   _sign(body, secret))):
            raise Rejected(unsigned=True)
    return body


def matches(body: dict[str, Any], data: bytes) -> bool:
    return len(data) == body["size"] and hashlib.sha256(data).hexdigest() == body["sha256"]
