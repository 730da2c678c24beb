# server/reports/painter.py — the PDF report's figures as images, drawn by plotly.js in one
# page of one headless Chromium kept for the server process.
"""Figures as static images for the PDF report.

One headless Chromium (driven by choreographer over its pipe, the browser kaleido drives)
holds one page with plotly.js loaded once; every figure of a report is drawn there by
`Plotly.toImage`, all of a report's figures in one call, and the page stays loaded for
the next report. kaleido 1.x, used before, reloaded its tab (plotly.js's 4.6 MB parsed
again) after every figure: ~0.3 s of Chromium's CPU per figure whatever its size, the
most of a demo job's PDF (bench/RESULTS.md, "Reports, fourth pass"). The page is reloaded
every RELOAD_EVERY reports (plotly.js keeps nothing between figures it purges, but a
page's heap is bounded this way whatever happens), and the browser started again if it
died.

The painter starts in the background (`start`) when the server starts or a PDF is first
asked for, so that a report does not wait for Chromium's start (seconds on a busy node).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import plotly
from plotly.utils import PlotlyJSONEncoder

_log = logging.getLogger(__name__)

#: Reports drawn in one page before it is loaded again.
RELOAD_EVERY = 50
#: Longest the browser may take to start and load the page, and to draw a report (s).
START_TIMEOUT_S = 120.0
PAINT_TIMEOUT_S = 120.0

_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><script src="{plotly}"></script>
<script>
/* Each figure drawn by plotly.js as a data URL, one after the other (one renderer). */
window.paint = async function (specs) {{
  const out = [];
  for (const s of specs) {{
    out.push(await Plotly.toImage({{data: s.data, layout: s.layout, config: {{}}}},
      {{format: s.format, width: s.width, height: s.height, scale: s.scale}}));
  }}
  return out;
}};
</script></head><body></body></html>
"""


class PainterError(RuntimeError):
    """The browser could not draw a report's figures (its reason)."""


class Painter:
    """One Chromium page with plotly.js, for the process: `paint` draws figures in it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: Future[None] | None = None
        self._browser: Any = None
        self._tab: Any = None
        self._dir = tempfile.TemporaryDirectory(prefix="stacklens-painter-")
        self._painted = 0
        self._one: asyncio.Lock | None = None
        self._page = Path(self._dir.name) / "index.html"
        js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
        self._page.write_text(_PAGE.format(plotly=js.as_uri()))

    def start(self) -> Future[None]:
        """Start the browser and load the page, in the background, once (again after a
        failure); the future is done when the page is ready."""
        with self._lock:
            if self._ready is not None and not (
                self._ready.done() and self._ready.exception() is not None
            ):
                return self._ready
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="report-painter",
                                 daemon=True).start()  # fmt: skip
                atexit.register(self.stop)
            self._ready = asyncio.run_coroutine_threadsafe(self._open(), self._loop)
            return self._ready

    async def _open(self) -> None:
        import choreographer

        await self._close()
        self._browser = choreographer.Browser(headless=True)
        await self._browser.open()
        self._tab = await self._browser.create_tab(self._page.as_uri())
        await self._wait_loaded()

    async def _wait_loaded(self) -> None:
        """Until the page's plotly.js and paint function are there."""
        for _ in range(int(START_TIMEOUT_S / 0.05)):
            answer = await self._tab.send_command(
                "Runtime.evaluate",
                params={"expression": "typeof Plotly + typeof window.paint",
                        "returnByValue": True},
            )  # fmt: skip
            if answer.get("result", {}).get("result", {}).get("value") == "objectfunction":
                return
            await asyncio.sleep(0.05)
        raise PainterError("the report page did not load plotly.js")

    async def _close(self) -> None:
        if self._browser is not None:
            browser, self._browser, self._tab = self._browser, None, None
            try:
                await browser.close()
            except Exception as exc:  # a dead browser: nothing left to close
                _log.debug("closing the report painter's browser: %s", exc)

    async def _paint(self, specs: str) -> list[str]:
        if self._one is None:
            self._one = asyncio.Lock()
        async with self._one:  # one report at a time in the page
            return await self._paint_one(specs)

    async def _paint_one(self, specs: str) -> list[str]:
        if self._painted and self._painted % RELOAD_EVERY == 0:
            await self._tab.send_command("Page.reload")
            await asyncio.sleep(0.05)
            await self._wait_loaded()
        self._painted += 1
        answer = await self._tab.send_command(
            "Runtime.evaluate",
            params={"expression": f"window.paint({specs})", "awaitPromise": True,
                    "returnByValue": True},
        )  # fmt: skip
        if "error" in answer:
            raise PainterError(str(answer["error"])[:500])
        result = answer.get("result", {})
        if "exceptionDetails" in result:
            raise PainterError(str(result["exceptionDetails"].get("exception", {}))[:500])
        value: list[str] = result["result"]["value"]
        return value

    def paint(self, figures: list[dict[str, Any]]) -> list[str]:
        """Each figure (`{"figure": plotly figure or dict, "format": "png"|"svg", "width",
        "height", "scale"}`) as a data URL, in order."""
        if not figures:
            return []
        specs = json.dumps(
            [
                {"data": f["figure"].get("data", []), "layout": f["figure"].get("layout", {}),
                 "format": f["format"], "width": f["width"], "height": f["height"],
                 "scale": f["scale"]}
                for f in figures
            ],
            cls=PlotlyJSONEncoder,
        )  # fmt: skip
        for attempt in (1, 2):  # a browser that died is started again, once
            ready = self.start()
            ready.result(START_TIMEOUT_S)
            assert self._loop is not None
            try:
                return asyncio.run_coroutine_threadsafe(self._paint(specs), self._loop).result(
                    PAINT_TIMEOUT_S
                )
            except Exception as exc:
                with self._lock:  # the next start opens a new browser
                    self._ready = None
                if attempt == 2:
                    raise
                _log.warning("report figures: the browser failed (%s); starting it again", exc)
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Close the browser (at the process's exit; a later `paint` starts another)."""
        with self._lock:
            self._ready = None
        if self._loop is not None and self._loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
            except Exception as exc:
                _log.debug("stopping the report painter: %s", exc)


#: The process's painter.
PAINTER = Painter()
