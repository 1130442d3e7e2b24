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
        # (a youngest generation of 20,000 objects, not 700: a walk of a 200,000-key node
        # makes lists of 200,000 keys, each walked whole by every young collection while it is
        # young -- 7 of them, ~17 ms of a one-key tick; cycles are still collected)
        if gc.get_threshold()[0] < 20_000:
            gc.set_threshold(20_000, *gc.get_threshold()[1:])
        gc.enable()
