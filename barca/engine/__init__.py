"""A command's walk: the context (planner), inputs, states, the decision, selection, the runner,
adoption, integrity, executors and the engine's memos."""
