"""Everything under .barca/: the metadata database (the only SQL on it), artifacts, tables
(frames), sinks, the remote store and its manifests, the cache limit, run records."""
