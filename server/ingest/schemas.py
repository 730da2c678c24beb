"""The HTTP ingest's answer (its request, a JSON batch of frames, is the collector's:
collector/ingest/json_frames.py)."""

from __future__ import annotations

from pydantic import BaseModel


class IngestResult(BaseModel):
    """Answer to a stored batch (sent only after COMMIT)."""

    stored: int
