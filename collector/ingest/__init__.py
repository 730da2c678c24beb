"""Ingest: the TCP server for hook frames (validation, acknowledgement after commit)."""
