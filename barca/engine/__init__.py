"""A command's walk: the context (planner), inputs, states, the decision, selection, the runner,
adoption, integrity, executors and the engine's memos."""

# True while the CLI holds the cyclic collector off (faces.cli, for a command that only reads):
# the first step to run lets it go (engine.runner). A caller's own gc setting is never touched.
gc_held = False


def release_gc() -> None:
    """The collector on again if the CLI held it off (a step runs, a server starts)."""
    global gc_held
    if gc_held:
        import gc
        gc_held = False
        gc.enable()
