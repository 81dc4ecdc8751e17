"""Sub-commands of the `gangkeeper` CLI, one module each (see `cli.py`)."""
