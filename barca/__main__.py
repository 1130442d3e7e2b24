"""``python -m barca``: the CLI."""
from barca.faces.cli import command

command()
