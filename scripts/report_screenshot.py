"""Make the README's picture of ``traceforge report``: the report of the bundled sample,
its top in headless Chromium (Playwright; a system ``chromium`` where Playwright has none).

    python3 scripts/report_screenshot.py [-o docs/report.png]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from open_page import open_page  # noqa: E402

from traceforge.report import write_report  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "report.png"))
    parser.add_argument("--height", type=int, default=1000, help="pixels of the page's top shown")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "report.html"
        os.chdir(ROOT)  # the page names the trace as given: a relative path
        write_report(["samples/train_step.json.gz"], str(page_path))
        open_page(page_path, Path(args.output), viewport=(1040, args.height), full_page=False)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
