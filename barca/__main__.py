"""``python -m barca``: the CLI."""
from barca.cli import main

main()
