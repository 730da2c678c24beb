# tests/symbols — call-site resolution against programs built here (issue #26).
