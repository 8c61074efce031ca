"""The Qt user interface. Only this package (and the benchmark's ``bench/qt_probe.py``) imports Qt."""
