"""XProf's GPU device op database and its TF-op database: the kernels of each op, by file.

`gpu_device_ops` is one file's database in XProf's order (`op_stats.gpu_kernel_runs`), with
each op's framework op (the key of XProf's TF-op database, `CreateTfMetricsDbFromDeviceOpMetricsDb`)
and eager mark; `merge_gpu_device_ops` adds files as XProf's combiner does; `gpu_tf_ops` regroups
by framework op. The overview's op placement and eager share and the framework op stats'
eager column read them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .columns import Groups
from .op_stats import gpu_kernel_runs
from .planes import TPU_PLANE_PREFIX
from .tf_op import parse_tf_op
from .xla_ops import program_modules

GPU_OP_COLUMNS = ["order", "program_id", "name", "framework_op", "occurrences", "time_ps", "is_eager"]
#: The columns of `merge_gpu_device_ops`' result, in its order.
_MERGED_COLUMNS = ["program_id", "name", "order", "framework_op", "occurrences", "time_ps", "is_eager"]


# One device op (program id, name) from its kernel runs, or from several files' rows.
def _device_ops(runs, g=None):
    """Per (program_id, name) in order of first appearance: the first order and framework
    op, occurrences and time summed, eager if any. `g`: the rows' grouping by (program_id,
    name), where the caller has it."""
    g = Groups(runs["program_id"], runs["name"]) if g is None else g
    return g.frame(
        {"program_id": runs["program_id"], "name": runs["name"]},
        order=g.first(runs["order"]),
        framework_op=g.first(runs["framework_op"]),
        occurrences=g.sum(runs["occurrences"]),
        time_ps=g.sum(runs["time_ps"]),
        is_eager=g.any(runs["is_eager"]),
    )


def gpu_device_ops(run, space) -> pd.DataFrame:
    """XProf's GPU device op database of one file (`op_stats.gpu_kernel_runs`), with
    what the eager share and op placement need: one row per device op, in XProf's
    database order. Columns: order, program_id (0 for TF ops), name, framework_op
    (the key of XProf's TF-op database: the TF op name; for an XLA op the parsed
    `op_name` metadata of its instruction, or its own name without one), occurrences
    (kernels), time_ps (self time = time on GPUs), is_eager (any entry eager). Empty
    without GPU planes, or with TPU planes (XProf's TPU ops carry no eager mark).
    """
    if any(p.name.startswith(TPU_PLANE_PREFIX) for p in space.planes):
        return pd.DataFrame(columns=GPU_OP_COLUMNS)
    runs, _ = gpu_kernel_runs(run, space)
    if runs.empty:
        return pd.DataFrame(columns=GPU_OP_COLUMNS)
    modules = program_modules(run)
    tf_names = {v: parse_tf_op(v)[1] for v in set(runs.loc[~runs["xla"], "tf_op"])}
    xla = runs["xla"].to_numpy(bool)
    tf = np.flatnonzero(~xla)  # TF ops: few on XLA programs
    names = runs["name"].to_numpy(dtype=object).copy()  # (the runs are kept with the file)
    tf_op = runs["tf_op"].to_numpy()
    names[tf] = [f"{tf_names[t]}/{e}" for t, e in zip(tf_op[tf], runs["event_name"].to_numpy()[tf])]
    program_id = runs["program_id"].to_numpy()
    g = Groups(program_id, names)
    # A device op's framework op is its first entry's: per XLA op its instruction's
    # (asked once per op), per TF op its TF op's name.
    first_rows = g.order[g.starts]
    framework = np.empty(g.n, dtype=object)
    for k, row in enumerate(first_rows):
        if xla[row]:
            op_name = modules.instruction(int(program_id[row]), names[row]).metadata.op_name
            framework[k] = parse_tf_op(op_name)[1] if op_name else names[row]
        else:
            framework[k] = tf_names[tf_op[row]]
    columns = {k: runs[k] for k in ("order", "occurrences", "time_ps", "is_eager")}
    columns.update(program_id=program_id, name=names, framework_op=framework[g.codes])
    return _device_ops(columns, g)[GPU_OP_COLUMNS]


def merge_gpu_device_ops(frames, merged=None):
    """GPU device op databases (`gpu_device_ops`, in file order) as one, after `merged` (a
    result of this, kept in its order), as XProf's combiner adds files in order, each in
    its own database order: per (program_id, name), the first order and framework op,
    occurrences and time summed, eager if any."""
    frames = [f.sort_values("order", kind="stable") for f in frames if f is not None and not f.empty]
    frames = [merged, *frames] if merged is not None and not merged.empty else frames
    if not frames:
        return pd.DataFrame(columns=GPU_OP_COLUMNS)
    if len(frames) == 1 and merged is None:  # (one file's ops are distinct already)
        return frames[0].reset_index(drop=True)[_MERGED_COLUMNS]
    ops = pd.concat(frames, ignore_index=True)
    return _device_ops(ops)


def gpu_tf_ops(device_ops):
    """XProf's TF-op database of (merged) GPU device ops: per framework op (the index), the
    most occurrences of its device ops, their time, the eager mark of the last."""
    if device_ops is None or device_ops.empty:
        return pd.DataFrame(columns=["occurrences", "time_ps", "is_eager"])
    g = Groups(device_ops["framework_op"])
    return g.frame(
        {"framework_op": device_ops["framework_op"]},
        occurrences=g.max(device_ops["occurrences"]),
        time_ps=g.sum(device_ops["time_ps"]),
        is_eager=g.last(device_ops["is_eager"]),
    ).set_index("framework_op")


def gpu_tf_op_db(run, spaces):
    """XProf's TF-op database of the GPU ops of all files (`CreateTfMetricsDbFromDeviceOpMetricsDb`):
    device ops combined over files in database order, then per framework op: occurrences
    (the most of its device ops), time_ps, and the eager mark of its last device op."""
    return gpu_tf_ops(merge_gpu_device_ops([gpu_device_ops(run, s) for s in spaces]))
