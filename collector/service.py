"""The collector as one startable service: frame writer + TCP ingest server."""

from __future__ import annotations

import asyncio
import threading

from collector.ingest.server import IngestServer
from collector.store.writer import FrameWriter
from stacklens.settings import Settings


class CollectorService:
    """Runs a FrameWriter and an IngestServer on the current event loop."""

    def __init__(self, database_url: str, settings: Settings):
        self.writer = FrameWriter(database_url)
        self.ingest = IngestServer(
            self.writer,
            settings.collector_host,
            settings.collector_port,
            token=settings.ingest_token,
            max_body=settings.max_frame_bytes,
        )

    @property
    def port(self) -> int:
        """The TCP port frames are received on."""
        return self.ingest.port

    async def start(self) -> None:
        """Start writing and listening."""
        await self.writer.start()
        await self.ingest.start()

    async def stop(self) -> None:
        """Stop listening, then stop the writer."""
        await self.ingest.stop()
        await self.writer.stop()


class BackgroundCollector:
    """A CollectorService on its own event-loop thread (tests, benchmarks, embedding)."""

    def __init__(self, url: str, token: str = "", max_body: int = 1 << 20):
        self.settings = Settings(
            collector="127.0.0.1:0", ingest_token=token, max_frame_bytes=max_body
        )
        self.service = CollectorService(url, self.settings)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> BackgroundCollector:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.service.start(), self.loop).result(10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.service.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the collector listens on."""
        return "127.0.0.1", self.service.port

    @property
    def endpoint(self) -> str:
        """host:port, as STACKLENS_COLLECTOR expects it."""
        host, port = self.address
        return f"{host}:{port}"

    def call(self, fn):
        """Run `fn()` on the collector's loop (to read its stats consistently)."""

        async def wrapped():
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapped(), self.loop).result(10)
