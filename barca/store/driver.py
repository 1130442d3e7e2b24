"""The SQLite driver every store module uses: sqlite3's C half (``_sqlite3``) alone.

``import sqlite3`` runs its Python half (``sqlite3.dbapi2``) too, which imports ``datetime`` to
register the default date and time adapters (deprecated since Python 3.12): ~6 M instructions
of a cached command's start, for adapters barca never uses (it binds strings, numbers and
bytes). ``connect``, ``Connection`` and the errors are the C module's either way, the very
same objects ``sqlite3`` exports."""
from __future__ import annotations

__all__ = ["sqlite3"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3 as sqlite3
else:
    try:
        import _sqlite3 as sqlite3
    except ImportError:  # another Python
        import sqlite3
