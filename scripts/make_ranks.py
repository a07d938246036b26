#!/usr/bin/env python3
"""Make N rank traces with known clocks and stragglers (``tests/support/make_ranks.py`` makes them; the tests use it too).

    python scripts/make_ranks.py ../shared/traces/hta/nccl_parser_config/nccl_data.json.gz -o /tmp/r8 --ranks 8
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.make_ranks import main  # noqa: E402 (after the checkout is on the path)

if __name__ == "__main__":
    sys.exit(main())
