"""Result objects a command returns and their renderings: results, outputs, verdicts (status rows),
the journal (history and logs)."""
