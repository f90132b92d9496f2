"""Differential fuzzing in CI (tests/fuzz_diff.py): real profiles rewritten in layouts
protobuf allows and writers never produce, some damaged, read by the compiled loops, the
numpy code and protobuf's parser: the same events and stats, or ProfileErrors, every time.
`XPROF_FUZZ_DIFF_COUNT` / `XPROF_FUZZ_DIFF_SEED` run more or other seeds;
`python -m tests.fuzz_diff --count 500` does the same outside pytest. Each mutant where the file
opens is also opened through a damaged or linked column cache entry (`fuzz_diff._cache_round`)."""

import os

import pytest

from .fuzz_diff import check, structured_mutant

COUNT = int(os.environ.get("XPROF_FUZZ_DIFF_COUNT", "30"))
SEED = int(os.environ.get("XPROF_FUZZ_DIFF_SEED", "1"))


@pytest.mark.parametrize("seed", range(SEED, SEED + COUNT))
def test_readers_agree_with_protobuf(tmp_path, seed):
    name, data = structured_mutant(seed)
    path = tmp_path / f"{name}.xplane.pb"
    path.write_bytes(data)
    findings = check(path)
    assert not findings, "\n".join(findings[:20])
