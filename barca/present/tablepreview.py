"""What ``--pretty`` shows of a stored table (parquet, csv) under its path: its shape and first
rows, read only when shown."""
from __future__ import annotations

from pathlib import Path

PREVIEW_ROWS = 5


def table_preview(path: Path, fmt: str) -> str:
    """What ``--pretty`` shows of a stored table: its shape (rows, columns and their types)
    and its first rows, indented under its path. Reads the first rows only (and, for a CSV,
    counts its lines); "" when the file cannot be read."""
    from barca.core.render import text_table
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq
            f = pq.ParquetFile(path)
            total = f.metadata.num_rows
            schema = f.schema_arrow
            columns = [f"{n} {t}" for n, t in zip(schema.names, schema.types, strict=True)]
            batch = next(f.iter_batches(batch_size=PREVIEW_ROWS), None)
            names = list(schema.names)
            rows = [] if batch is None else [
                [r[n] for n in names] for r in batch.slice(0, PREVIEW_ROWS).to_pylist()]
        else:
            import csv
            with path.open(newline="", encoding="utf-8") as fh:
                reader = csv.reader(fh)
                names = next(reader, [])
                rows = [r for _, r in zip(range(PREVIEW_ROWS), reader, strict=False)]
                total = len(rows) + sum(1 for _ in reader)
            columns = list(names)
    except (OSError, ValueError, ImportError, StopIteration):
        return ""
    cells = [["NULL" if v is None else str(v) for v in r] for r in rows]
    lines = [f"{total} rows x {len(names)} columns: {', '.join(columns)}"]
    if names:
        lines += text_table(names, cells).splitlines()
    if total > len(rows):
        lines.append(f"(the first {len(rows)} of {total} rows)")
    return "\n".join("  " + line for line in lines)
