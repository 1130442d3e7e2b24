"""What an executor is handed for one step, and what it hands back: small, picklable records."""
from __future__ import annotations

import math
from typing import Any

from barca.core.record import Fields

# An input spec, per parameter:
#   ("value", v)                      the value itself (a partition key, a dict source's value)
#   ("artifact", relpath, fmt, sha, reader)   one upstream artifact, read as the parameter's
#                                     annotation asks (reader None: pandas; see model.readers)
#   ("collect", [(relpath, fmt, sha, key), ...], reader)  every key of a partitioned upstream
#   ("none",)                         an ordering-only parameter (its name starts with "_")
InputSpec = tuple[Any, ...]


class StepJob(Fields):
    __slots__ = ("index", "step", "node", "key", "kind", "file", "module", "function", "run_hash",
                 "serializer", "kwargs", "key_source", "timeout", "retries", "sinks", "shipped",
                 "store_prefix", "retry_backoff", "weight", "repair")

    def __init__(self, index: int, step: str, node: str, key: str, kind: str, file: str,
                 module: str, function: str, run_hash: str, serializer: str | None,
                 kwargs: dict[str, InputSpec], key_source: bool = False,
                 timeout: float | None = None, retries: int = 0, sinks: list[str] | None = None,
                 shipped: bytes | None = None, store_prefix: str = ".barca",
                 retry_backoff: float = 0.0, weight: int = 1, repair: bool = False) -> None:
        self.index = index
        self.step = step
        self.node = node
        self.key = key
        self.kind = kind
        self.file = file                  # absolute path of the pipeline file
        self.module = module
        self.function = function
        self.run_hash = run_hash
        self.serializer = serializer
        self.kwargs = kwargs
        self.key_source = key_source      # its output gives another node's partition keys
        self.timeout = timeout
        self.retries = retries
        self.sinks = [] if sinks is None else sinks
        self.shipped = shipped            # a notebook function, by value (cloudpickle)
        self.store_prefix = store_prefix  # where artifacts go: ".barca" or ".barca/envs/<env>"
        self.retry_backoff = retry_backoff  # after failed attempt k: wait retry_backoff * k s
        self.weight = weight              # how much of the capacity it takes while it runs
        self.repair = repair              # its file is corrupt or missing: replace it in place


class StepRecord(Fields):
    __slots__ = ("index", "status", "elapsed", "run_hash", "path", "format", "size", "sha256",
                 "shape", "value_hash", "error", "traceback", "output", "infra", "bad_input",
                 "uploaded", "upload_error", "keys", "key_values", "key_raw", "lines",
                 "warning", "attempts")

    def __init__(self, index: int, status: str, elapsed: float, run_hash: str | None = None,
                 path: str | None = None, format: str | None = None, size: int | None = None,
                 sha256: str | None = None, shape: str | None = None,
                 value_hash: str | None = None, error: str | None = None,
                 traceback: str | None = None, output: str = "", infra: str | None = None,
                 bad_input: str | None = None, uploaded: bool | None = None,
                 upload_error: str | None = None, keys: str | list[str] | None = None,
                 key_values: str | bytes | None = None,
                 key_raw: str | None = None,
                 lines: list[tuple[float, str, str]] | None = None,
                 warning: str | None = None, attempts: int = 1) -> None:
        self.index = index
        self.status = status          # "success" | "failed" | "input" (an input could not be read)
        self.elapsed = elapsed
        self.run_hash = run_hash      # set for a sensor, whose hash folds in the value it returned
        self.path = path
        self.format = format
        self.size = size
        self.sha256 = sha256
        self.shape = shape
        self.value_hash = value_hash
        self.error = error
        self.traceback = traceback
        self.output = output
        self.infra = infra                # barca's own write failed (exit 3)
        self.bad_input = bad_input        # status "input": the artifact that was missing or
                                          # corrupt (the step did not run)
        self.uploaded = uploaded          # copied to the remote store (None: no store)
        self.upload_error = upload_error
        self.keys = keys                  # a key source's output, packed (see pack_output):
        self.key_values = key_values      # its keys, a dict source's value digests
        self.key_raw = key_raw            # and its values
        self.lines = lines                # what the step wrote: (time, stream, line), in order
        self.warning = warning            # e.g. a value parquet could not hold, stored as pickle
        self.attempts = attempts          # how many times the function was called (retries=)


def pack_output(keys: list[str], digests: str | bytes | None, raw: list[Any] | None,
                raw_text: str | None = None
                ) -> tuple[str | list[str], str | bytes | None, str | None]:
    """A key source's output (see barca.engine.states.SourceOutput) as a record carries it: a few
    large objects rather than three per key, which would cost more to pickle and send than
    the step took to compute them -- its keys joined by NUL (a list if one holds a NUL), the
    digests as one hex text, the values as JSON text (dict values are JSON: read as a step
    reads it)."""
    joined = "\x00".join(keys)
    packed: str | list[str] = joined if keys and joined.count("\x00") == len(keys) - 1 else keys
    if digests is None:
        return packed, None, None
    if raw_text is None:  # (given: the values' JSON, made already; see hashing.str_dict_json)
        import json
        raw_text = json.dumps(raw, ensure_ascii=False)
    # the digests as they came: hex text when hashed here (ASCII: pickled as it is), not
    # converted to bytes and back; bytes when the values memo gave them (store.valuememo holds
    # them so): 6 MB less in the pipe at 200,000 keys, made hex once by unpack_output
    return packed, digests, raw_text


def unpack_output(keys: str | list[str], digests: str | bytes | None, raw: str | None
                  ) -> tuple[list[str], str | None, str | None, str | None]:
    """``pack_output`` undone, but for the values, decoded when one is first asked for; and the
    keys joined by NUL, as they came (where a key is, is found in them: engine.keyindex)."""
    return (keys.split("\x00") if isinstance(keys, str) else keys,
            digests.hex() if isinstance(digests, bytes) else digests, raw,
            keys if isinstance(keys, str) else None)


def chunk_size(steps: int, workers: int, weighed: bool) -> int:
    """How many steps the local pool hands a worker at once: one when steps are weighed (what
    a worker holds is then the weight of the step it runs), else a quarter of an even share,
    at most 64 (few round trips, and the last chunks still spread over the workers)."""
    return 1 if weighed else max(1, min(64, math.ceil(steps / (workers * 4))))
