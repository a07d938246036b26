"""Make the README's picture of ``traceforge report``: the report of the bundled sample,
its top in headless Chromium (Playwright; a system ``chromium`` where Playwright has none).

    python3 scripts/report_screenshot.py [-o docs/report.png]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traceforge.report import write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--height", type=int, default=1000, help="pixels of the page's top shown")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "report.html"
        os.chdir(ROOT)  # the page names the trace as given: a relative path
        write_report(["samples/train_step.json.gz"], str(page_path))
        with sync_playwright() as p:
            try:
                browser = p.chromium.launch()
            except Exception:
                browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1040, "height": args.height})
            page.goto(page_path.as_uri(), wait_until="load")
            page.wait_for_function("window.Bokeh && Bokeh.documents.length > 0 && Object.keys(Bokeh.index).length")
            page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            page.screenshot(path=args.output)
            browser.close()
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
