import os
import time

from barca import asset, collect, partitions

KEYS = [f"k{i}" for i in range(8)]


@asset(partitions={"key": partitions(KEYS)})
def item(key: str) -> dict:
    time.sleep(0.15)
    return {"key": key, "pid": os.getpid()}


@asset(inputs={"items": collect(item)})
def pids(items: list[dict]) -> list:
    return sorted({i["pid"] for i in items})
