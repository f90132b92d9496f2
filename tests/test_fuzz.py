"""The mutation campaign in CI: a fixed-seed set of damaged real profiles (tests/fuzz.py)
through the reader, every analysis and every widget, each in a worker process capped at
4 GB and 60 s. Every step must end in a result or a ProfileError naming the file: no other
exception, no hang, no blowup. `XPROF_FUZZ_COUNT` / `XPROF_FUZZ_SEED` run a longer or
another campaign; `python -m tests.fuzz --count 2000` does the same outside pytest."""

import os

import pytest

from .conftest import CORPUS
from .fuzz import campaign, mutants, summary

COUNT = int(os.environ.get("XPROF_FUZZ_COUNT", "250"))
SEED = int(os.environ.get("XPROF_FUZZ_SEED", "1"))


@pytest.mark.slow
def test_mutation_campaign(tmp_path):
    paths = []
    for name, data, packed in mutants(SEED, COUNT, CORPUS):
        path = tmp_path / f"{name}.xplane.pb{'.gz' if packed else ''}"
        path.write_bytes(data)
        paths.append(path)
    results = campaign(paths)
    counts, findings = summary(results)
    print(f"\n{COUNT} mutants (seed {SEED}): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    assert counts["tried"] == COUNT
    assert counts["opened, every step a result or a ProfileError"] > COUNT // 3  # most reach the tools
    assert not findings, "\n".join(f"{os.path.basename(p)} {step}: {what}" for p, step, what in findings[:30])
