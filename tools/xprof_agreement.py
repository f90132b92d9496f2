"""Count how many of XProf 2.24.2's numbers we reproduce on the corpus references.

usage: python tools/xprof_agreement.py [PROFILES_DIR] [--runs a,b,c]

For every run with a `_reference/RUN/SESSION/` folder it compares, value by value:
op profile (both trees, every node: time, occurrences, children, FLOPs, FLOPS and HBM
utilisation, HBM bytes, and for ops the expression, category and provenance), HLO
stats (every cell but the HTML source column), the overview (run environment, top ops,
precision) and the trace viewer's events per track. It prints agreed / compared per tool
and run. The tests assert these equalities; this tool gives the counts for a note, and
runs on older commits too (values it cannot read count as disagreeing).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def _close(a, b, rel=1e-6, abs_=1e-9):
    if isinstance(b, str) or isinstance(a, str):
        return str(a) == str(b)
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), abs_)


def _nodes(node, path=()):
    path = path + (node["name"],)
    yield path, node
    for c in node.get("children", []):
        yield from _nodes(c, path)


def op_profile_counts(run, ref):
    ok = total = 0
    for key, exclude in (("byProgram", False), ("byProgramExcludeIdle", True)):
        try:
            ours = dict(run.op_profile(exclude_idle=exclude).root.paths())
        except Exception:
            ours = {}
        for path, r in _nodes(ref[key]):
            m = r["metrics"]
            n = ours.get(path)
            checks = [
                ("time", "rawTime"),
                ("occurrences", "occurrences"),
                ("children", "numChildren"),
                ("raw_flops", "rawFlops"),
                ("flops", "flops"),
                ("hbm", "bandwidthUtils"),
                ("bytes", "rawBytesAccessedArray"),
            ]
            xla = r.get("xla", {})
            if xla.get("programId", "0") != "0":
                checks += [("expression", None), ("category", None), ("provenance", None)]
            for label, field in checks:
                total += 1
                if n is None:
                    continue
                theirs = {
                    "children": r.get("numChildren", 0),
                    "hbm": m.get("bandwidthUtils", [0])[0],
                    "bytes": m.get("rawBytesAccessedArray", [0])[0],
                }.get(label, m.get(field, 0) if field else None)
                mine = {
                    "time": n.time_ps,
                    "occurrences": n.occurrences,
                    "children": n.num_children,
                    "raw_flops": n.raw_flops,
                    "flops": n.flops_utilization,
                    "hbm": n.hbm_utilization,
                    "bytes": n.hbm_bytes,
                }.get(label)
                if label in ("expression", "category", "provenance"):
                    mine, theirs = getattr(n, label, None), xla.get(label)
                ok += _close(mine, theirs)
    return ok, total


def hlo_stats_counts(run, ref):
    cols = [c["id"] for c in ref["cols"]]
    rows = [{c: (v or {}).get("v") for c, v in zip(cols, r["c"])} for r in ref["rows"]]
    try:
        ours = run.hlo_stats().to_dict("records")
    except Exception:
        ours = []
    mapping = [
        ("rank", "rank", 1),
        ("program_id", "program_id", None),
        ("category", "category", None),
        ("hlo_op_name", "hlo_op_name", None),
        ("expression", "hlo_op_expression", None),
        ("framework_op", "tf_op_name", None),
        ("occurrences", "occurrences", 1),
        ("total_time_ps", "total_time", 1e-6),
        ("avg_time_ps", "avg_time", 1e-6),
        ("self_time_ps", "total_self_time", 1e-6),
        ("self_time_fraction", "total_self_time_percent", 100),
        ("cumulative_self_time_fraction", "cumulative_total_self_time_percent", 100),
        ("model_flop_rate_gflops", "model_flop_rate", 1),
        ("flop_rate_gflops", "normalized_flop_rate", 1),
        ("memory_bw_gibs", "measured_memory_bw", 1),
        ("hbm_bw_gibs", "hbm_bw", 1),
        ("operational_intensity", "operational_intensity", 1),
        ("bound_by", "bound_by", None),
    ]
    ok = total = 0
    for i, r in enumerate(rows):
        o = ours[i] if i < len(ours) else None
        for mine, theirs, scale in mapping:
            total += 1
            if o is None or mine not in o:
                continue
            v = o[mine]
            if scale is not None:
                try:
                    v = float(v) * scale
                except (TypeError, ValueError):
                    pass
            ok += _close(str(v) if mine == "program_id" else v, r[theirs])
    return ok, total


def overview_counts(run, ref):
    from xprof_widgets.analysis.overview import overview

    try:
        res = overview(run)
    except Exception:
        res = None
    env = ref[2]["p"]
    top = [[c.get("v") if c else None for c in r["c"]] for r in ref[0]["rows"]]
    p = ref[0]["p"]
    ok = total = 0
    checks = []
    if res is not None:
        checks += [
            (res.device_type, env["device_type"]),
            (res.device_core_count, int(env["device_core_count"])),
            (res.host_count, int(env["host_count"])),
        ]
        for i, row in enumerate(top):
            t = res.top_ops.iloc[i] if i < len(res.top_ops) else None
            for col, k in (
                ("self_time_fraction", 0),
                ("cumulative_time_fraction", 1),
                ("category", 2),
                ("operation", 3),
                ("flop_rate_gflops", 4),
            ):
                checks.append((None if t is None else t[col], row[k]))
        if "device_compute_16bit_percent" in p:
            prec = res.precision or {}
            checks.append(
                (
                    f"{prec['16bit_percent']:.1f}%" if "16bit_percent" in prec else None,
                    p["device_compute_16bit_percent"],
                )
            )
            checks.append(
                (
                    f"{prec['32bit_percent']:.1f}%" if "32bit_percent" in prec else None,
                    p["device_compute_32bit_percent"],
                )
            )
        total = len(checks)
    else:
        total = 3 + 5 * len(top) + (2 if "device_compute_16bit_percent" in p else 0)
    ok = sum(_close(a, b) for a, b in checks)
    return ok, total


def trace_counts(run, ref):
    try:
        tr = run.trace()
        ours = {f"{t.section} :: {t.name}": t.events for t in tr.tracks.itertuples()}
    except Exception:
        ours = {}
    counts = ref["event_counts_by_track"]
    return sum(ours.get(k) == v for k, v in counts.items()), len(counts)


TOOLS = {
    "op_profile": ("op_profile.json", op_profile_counts),
    "hlo_stats": ("hlo_stats.json", hlo_stats_counts),
    "overview": ("overview_page.json", overview_counts),
    "trace": ("trace_viewer_summary.json", trace_counts),
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "profiles"))
    parser.add_argument("--runs", default="", help="comma-separated logdir names (default: every reference)")
    args = parser.parse_args(argv)
    import xprof_widgets as xw

    profiles = Path(args.profiles)
    names = [n for n in args.runs.split(",") if n] or sorted(p.name for p in (profiles / "_reference").iterdir())
    grand = [0, 0]
    for name in names:
        for session in sorted((profiles / "_reference" / name).iterdir()):
            run = xw.load_run(profiles / name / "plugins" / "profile" / session.name)
            for tool, (file, count) in TOOLS.items():
                path = session / file
                if not path.is_file():
                    continue
                ok, total = count(run, json.loads(path.read_text()))
                grand[0] += ok
                grand[1] += total
                print(f"{name}/{session.name} {tool}: {ok}/{total}")
    print(f"all: {grand[0]}/{grand[1]} ({100 * grand[0] / max(grand[1], 1):.1f} %)")


if __name__ == "__main__":
    sys.exit(main())
