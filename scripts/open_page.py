"""Open a ``traceforge report`` page in headless Chromium (Playwright; a system ``chromium``
where Playwright has none) and say what a reader would see: the requests it made, console
errors, its figures, how many were drawn, and the time from load to the first frame after
the plots are drawn (the fastest of ``--repeat`` opens, as bench.py takes fastest runs).

    python3 scripts/open_page.py report.html [--repeat 3] [--screenshot report.png]

The browser test (tests/report/test_browser.py) uses ``open_page`` for what the page does;
how fast it opens is measured here, never asserted by a test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

SYSTEM_CHROMIUM = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")  # Debian's first (CI)

# Figures, their data sources without rows, and the canvases drawn on (more than one colour;
# each figure has a few canvas layers, of which the plot's own is drawn on)
RENDERED = """() => {
  const doc = Bokeh.documents[0];
  const figures = [...doc.all_models].filter(m => (m.constructor.__qualified__ || m.constructor.name).endsWith('Figure'));
  const sources = [...doc.all_models].filter(m => (m.constructor.__qualified__ || m.constructor.name).endsWith('ColumnDataSource'));
  const canvases = [];
  const walk = root => { root.querySelectorAll('*').forEach(el => {
      if (el.tagName === 'CANVAS') canvases.push(el);
      if (el.shadowRoot) walk(el.shadowRoot); }); };
  walk(document);
  const drawn = canvases.filter(c => c.width > 0 && c.height > 0).map(c => {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const colors = new Set();
      for (let i = 0; i < d.length && colors.size < 4; i += 97 * 4) colors.add(d[i] << 16 | d[i+1] << 8 | d[i+2]);
      return colors.size; });
  return {figures: figures.length, empty_sources: sources.filter(s => s.get_length() === 0).length,
          drawn: drawn.filter(n => n >= 2).length};
}"""


class NoBrowser(RuntimeError):
    """Neither Playwright's own Chromium nor a system one could be launched."""


def launch(p):
    """Playwright's Chromium, else the first system Chromium on PATH."""
    try:
        return p.chromium.launch()
    except Exception as bundled:
        for name in SYSTEM_CHROMIUM:
            if shutil.which(name):
                return p.chromium.launch(executable_path=shutil.which(name), args=["--no-sandbox"])
        raise NoBrowser(f"no Chromium for Playwright: `python3 -m playwright install chromium` failed or was not "
                        f"run ({str(bundled).splitlines()[0]}), and no system chromium is on PATH") from None


def open_page(page_path: Path, screenshot: Path | None = None, repeat: int = 1,
              viewport: tuple[int, int] = (1100, 900), full_page: bool = True) -> dict:
    """Open the page ``repeat`` times; its requests, console errors, render check and fastest open."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            requests, errors = [], []
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                page.goto(page_path.resolve().as_uri(), wait_until="load")
                page.wait_for_function("window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length")
                page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
                times.append(time.perf_counter() - t)
            rendered = page.evaluate(RENDERED)
            if screenshot is not None:
                page.screenshot(path=str(screenshot), full_page=full_page)
        finally:
            browser.close()
    remote = [u for u in requests if not u.startswith(("file:", "data:", "blob:", "about:"))]
    return {"remote": remote, "errors": errors, "seconds": round(min(times), 3),
            "page_mb": round(page_path.stat().st_size / 1e6, 2), **rendered}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("--repeat", type=int, default=3, metavar="N", help="opens; the fastest is reported (default: 3)")
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    try:
        print(json.dumps(open_page(args.page, args.screenshot, args.repeat)))
    except NoBrowser as e:
        print(f"open_page: {e}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
