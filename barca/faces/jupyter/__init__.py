"""The notebook face: the ``%barca`` magics, live progress, the status widget."""
