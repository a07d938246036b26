#!/usr/bin/env python3
"""Write the synthetic sample trace (``tests/support/make_sample.py`` makes it; the tests use it too).

    python scripts/make_sample.py -o samples/train_step.json.gz [--steps N] [--seed S] [--old-kineto]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.make_sample import main  # noqa: E402 (after the checkout is on the path)

if __name__ == "__main__":
    main()
