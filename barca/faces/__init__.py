"""What a person or program touches: the command grammar (commands), the CLI, the Jupyter magics,
progress and widget."""
