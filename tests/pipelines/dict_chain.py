import json
from pathlib import Path

from barca import asset, partitions_from, sensor


@sensor()
def versions() -> dict:
    return json.loads(Path("versions.json").read_text())


@asset(partitions={"key": partitions_from(versions)})
def fetched(key: str, versions: str) -> dict:
    return {"key": key, "version": versions}


@asset(partitions={"key": partitions_from(fetched)})
def parsed(key: str, fetched: dict) -> dict:
    return {"key": key, "ok": bool(fetched["version"]), "seen": fetched["version"]}
