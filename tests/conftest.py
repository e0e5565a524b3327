"""Shared pytest set-up: the collection resolves by FQCN from the checkout."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "collections"))
