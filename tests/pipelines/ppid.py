import os
import time

from barca import asset, partitions


@asset(partitions={"key": partitions([f"k{i:03d}" for i in range(200)])})
def item(key: str) -> dict:
    time.sleep(0.005)  # long enough for the progress display to be updated a few times
    return {"key": key, "pid": os.getpid(), "ppid": os.getppid()}
