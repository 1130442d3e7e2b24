"""What an executor is handed for one step, and what it hands back: small, picklable records."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# An input spec, per parameter:
#   ("value", v)                      the value itself (a partition key, a dict source's value)
#   ("artifact", relpath, fmt, sha)   one upstream artifact
#   ("collect", [(relpath, fmt, sha), ...])  every key of a partitioned upstream, as a list
#   ("none",)                         an ordering-only parameter (its name starts with "_")
InputSpec = tuple[Any, ...]


@dataclass
class StepTask:
    index: int
    step: str
    node: str
    key: str
    kind: str
    file: str            # absolute path of the pipeline file
    module: str
    function: str
    run_hash: str
    serializer: str | None
    kwargs: dict[str, InputSpec]
    key_source: bool = False      # its output gives another node's partition keys
    timeout: float | None = None
    retries: int = 0
    sinks: list[str] = field(default_factory=list)
    shipped: bytes | None = None  # a notebook function, by value (cloudpickle)
    store_prefix: str = ".barca"  # where artifacts go: ".barca" or ".barca/envs/<env>"


@dataclass
class StepRecord:
    index: int
    status: str                   # "success" | "failed" | "input" (an input could not be read)
    elapsed: float
    run_hash: str | None = None   # set for a sensor, whose hash folds in the value it returned
    path: str | None = None
    format: str | None = None
    size: int | None = None
    sha256: str | None = None
    shape: str | None = None
    value_hash: str | None = None
    error: str | None = None
    traceback: str | None = None
    output: str = ""
    infra: str | None = None                      # barca's own write failed (exit 3)
    bad_input: str | None = None                  # status "input": the artifact that was missing
                                                  # or corrupt (the step did not run)
    uploaded: bool | None = None                  # copied to the remote store (None: no store)
    upload_error: str | None = None
    keys: list[str] | None = None                 # a key source's keys
    key_values: dict[str, str] | None = None      # a dict source: key -> value digest
    key_raw: dict[str, Any] | None = None         # a dict source: key -> value
