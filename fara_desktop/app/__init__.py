"""The application without a window: what the window, ``serve`` and the CLI share (``core.AppCore``)."""
