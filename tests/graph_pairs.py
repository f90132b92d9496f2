"""How far the ops we attribute to kernels of CUDA graphs agree with XProf on the same program
recorded with graphs off: the measure of issue 30, shared by its tests and
`tools/graph_attribution_check.py`.

XProf's HLO stats of the graphs-off recording are the truth (every kernel names its op
there). Its HLO ops (rows naming an instruction of their program: TF-op rows such as
StreamExecutor's DelayKernel are left out), by self time, longest first, up to 90 % of their
summed self time, are the ops that matter; ours are the HLO stats of the graphs-on recording,
kernels attributed. Rows are matched by program name (without its id: two recordings of one
program may number it differently) and op name.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from xprof_widgets.analysis.core.xla_ops import program_modules

#: The issue's bounds: ops found for this share of the time that matters ...
FOUND_AT_LEAST = 0.95
#: ... and self time within this ratio of XProf's for this share of it.
WITHIN, WITHIN_AT_LEAST = 0.35, 0.85


@dataclass
class Agreement:
    """`ops`: one row per op that matters (program, op, xprof_self_us, ours_self_us,
    xprof_occurrences, ours_occurrences, found, within); `found` and `within`: shares of
    their XProf self time (0-1)."""

    ops: pd.DataFrame
    found: float
    within: float

    @property
    def passes(self) -> bool:
        return self.found >= FOUND_AT_LEAST and self.within >= WITHIN_AT_LEAST


def _base(program: str) -> str:
    return program[: program.rindex("(")] if program.endswith(")") and "(" in program else program


def xprof_hlo_rows(hlo_stats_json, graphs_off_run) -> pd.DataFrame:
    """XProf's HLO stats JSON of the graphs-off run as (program, op, self_us, occurrences),
    HLO ops only."""
    ids = [c["id"] for c in hlo_stats_json["cols"]]
    rows = [dict(zip(ids, [c.get("v") for c in r["c"]])) for r in hlo_stats_json["rows"]]
    modules = program_modules(graphs_off_run)
    out = []
    for r in rows:
        try:
            pid = int(r["program_id"])
        except (TypeError, ValueError):
            continue
        if modules.instruction(pid, r["hlo_op_name"]) is None:
            continue  # a TF op's row, not an HLO op
        out.append((_base(modules.names[pid]), r["hlo_op_name"], float(r["total_self_time"]), int(r["occurrences"])))
    return pd.DataFrame(out, columns=["program", "op", "xprof_self_us", "xprof_occurrences"])


def agreement(ours_hlo_stats: pd.DataFrame, xprof_rows: pd.DataFrame, share=0.9) -> Agreement:
    """Our HLO stats (`Run.hlo_stats()` of the graphs-on run) against `xprof_hlo_rows`."""
    theirs = xprof_rows.sort_values("xprof_self_us", ascending=False, kind="stable").reset_index(drop=True)
    total = theirs["xprof_self_us"].sum()
    before = theirs["xprof_self_us"].cumsum() - theirs["xprof_self_us"]
    theirs = theirs[before < share * total]
    ours = pd.DataFrame(
        {
            "program": [_base(p) for p in ours_hlo_stats["program"]],
            "op": ours_hlo_stats["hlo_op_name"].to_numpy(),
            "ours_self_us": ours_hlo_stats["self_time_ps"].to_numpy(float) / 1e6,
            "ours_occurrences": ours_hlo_stats["occurrences"].to_numpy(),
        }
    )
    ops = theirs.merge(ours, on=["program", "op"], how="left")
    ops["found"] = ops["ours_self_us"].notna()
    ratio = ops["ours_self_us"] / ops["xprof_self_us"]
    ops["within"] = ops["found"] & ((ratio - 1).abs() <= WITHIN)
    weight, matter = ops["xprof_self_us"], ops["xprof_self_us"].sum()
    return Agreement(ops, float(weight[ops["found"]].sum() / matter), float(weight[ops["within"]].sum() / matter))
