"""``python -m barca``: the CLI."""
from barca.faces.cli import main

main()
