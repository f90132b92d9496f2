"""Coverage-guided fuzzing of the profile reader with atheris (libFuzzer for Python).

The mutation campaign (tests/fuzz.py, run in CI by tests/test_fuzz.py) damages real
profiles at random; this target lets libFuzzer steer the bytes toward new branches of
the reader (`read_xspace`: the wire walker, the event scanner, the stats decoders) and
of the analyses every tool runs first. Each input must end in a result or a
ProfileError; anything else is a crash libFuzzer saves to a file.

    pip install -e '.[fuzz]'
    python tests/fuzz_atheris.py -atheris_runs=200000 -max_len=200000 -rss_limit_mb=4096 \\
        -timeout=60 corpus_dir/      # corpus_dir: start from real .xplane.pb files (tests/data)

A crash file replays with `python tests/fuzz_atheris.py crash-<hash>`, and through every
tool with `python -m tests.fuzz --replay crash-<hash>` (rename it to end in .xplane.pb).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from xprof_widgets.errors import ProfileError
    from xprof_widgets.io.xspace import read_xspace
    from xprof_widgets.run import Run

_FOLDER = Path(tempfile.mkdtemp(prefix="xprof-atheris-"))
warnings.simplefilter("ignore")  # hosts and modules left out are said in warnings: noise here


def test_one_input(data: bytes) -> None:
    try:
        space = read_xspace("fuzz.xplane.pb", data=data)
    except ProfileError:
        return
    for plane in space.planes:  # what every tool reads next: names, stats, metadata
        _ = plane.event_metadata, plane.stats
        for line in plane.lines:
            try:
                line.names()
                line.stats()
            except ProfileError:
                pass
    path = _FOLDER / "run" / "host.xplane.pb"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    try:
        run = Run("run", [path])
        run.tool_status()
        run.trace()
        run.op_profile()
    except ProfileError:
        pass


def main():
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
