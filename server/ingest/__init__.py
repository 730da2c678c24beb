"""Ingest domain: JSON batches of frames from producers other than the hook library."""
