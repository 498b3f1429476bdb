"""``python -m tempomem`` runs the command line."""

from .cli import main

main()
