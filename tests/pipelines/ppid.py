import os

from barca import asset, partitions


@asset(partitions={"key": partitions([f"k{i:03d}" for i in range(200)])})
def item(key: str) -> dict:
    return {"key": key, "pid": os.getpid(), "ppid": os.getppid()}
