"""The lab's suites: the collection resolves by FQCN from the checkout, as in tests/."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "collections"))
