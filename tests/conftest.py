"""Where the shared corpus of real profiles is: `../shared` beside the checkout."""

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("XPROF_SHARED", Path(__file__).resolve().parents[2] / "shared"))
PROFILES = SHARED / "profiles"
REFERENCE = PROFILES / "_reference"


def profile_files():
    """Every real profile file in the shared corpus."""
    return sorted(PROFILES.glob("*/plugins/profile/*/*.xplane.pb"))


def add_stat(stats, metadata_id, value):
    """Append an XStat to a repeated `stats` field of a hand-made XSpace: a str as str_value,
    anything else as int64_value."""
    stat = stats.add(metadata_id=metadata_id)
    if isinstance(value, str):
        stat.str_value = value
    else:
        stat.int64_value = value
    return stat


def pytest_collection_modifyitems(config, items):
    if not PROFILES.is_dir():
        skip = pytest.mark.skip(reason=f"shared profiles not found at {PROFILES} (set XPROF_SHARED)")
        for item in items:
            if "sample" not in item.name:
                item.add_marker(skip)
