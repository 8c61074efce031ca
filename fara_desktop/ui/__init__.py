"""The Qt user interface. Only this package (and ``app.py``) imports Qt widgets."""
