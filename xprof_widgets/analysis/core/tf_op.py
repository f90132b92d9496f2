"""Framework op names as XProf parses them (`name:type` of TensorFlow and JAX ops).

XProf reads the framework op an HLO op or a kernel came from from strings such as
`model/dense/MatMul:MatMul` (TensorFlow), `jit(f)/dot_general:` (JAX, the type taken
from the last path component), `Iterator::Batch::Map` (tf.data) or `MemcpyHToD`
(tsl `ParseTfOpFullname`, `TfOpEventName`, `ParseTfNameScopes` in
xla/tsl/profiler/utils/tf_op_utils.cc; `TfOpFullname` in xla_op_utils.h). The
overview's top operations, the op statistics and the trace viewer's Framework Ops /
Name Scope lines all read them here.
"""

from __future__ import annotations

import functools
import re

TF_OP_NAME = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_./>-]*")
TF_OP_TYPE = re.compile(r"[A-Z_][a-zA-Z0-9_]*")
JAX_OP_TYPE = re.compile(r"[a-z_][a-z0-9_]*(\[.*\])?", re.S)
_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*")
_MEMCPY = ("memcpyhtod", "memcpydtoh", "memcpydtod", "memcpyhtoh")
_MEMCPY_TYPES = ("MemcpyHToD", "MemcpyDToH", "MemcpyDToD", "MemcpyHToH")


@functools.lru_cache(maxsize=1 << 17)
def parse_tf_op(fullname):
    """XProf's ParseTfOpFullname: (category, name, type) of a `tf_op` string.

    Category is "tensorflow", "jax", "tf.data", "memcpy" or "unknown" (then the name
    is the whole string and the type "").

    Cached: the hosts of a run, and the tools of one host, name the same ops (a pod's
    worker parses each name once for all the hosts it reads).
    """
    parts = fullname.split(":", 1)
    if len(parts) != 2:
        low = fullname.lower()
        for prefix, op_type in zip(_MEMCPY, _MEMCPY_TYPES):
            if low.startswith(prefix):
                return "memcpy", fullname, op_type
        return "unknown", fullname, ""
    name, op_type = parts
    if name == "Iterator":
        return "tf.data", fullname, "Dataset"
    if TF_OP_NAME.fullmatch(name) and TF_OP_TYPE.fullmatch(op_type):
        return "tensorflow", name, op_type
    derived = op_type or derive_op_type(name)
    if JAX_OP_TYPE.fullmatch(derived):
        return "jax", name, derived.split("[", 1)[0]
    if not op_type:
        return "tensorflow", name, derived
    return "unknown", fullname, ""


def derive_op_type(name):
    """The op name without its scopes and numeric suffix (`model/layer/MatMul_1` -> `MatMul`)."""
    op = name.split("/")[-1]
    suffix = op.split("_")[-1]
    if _INTEGER.fullmatch(suffix) and abs(int(suffix)) < 2**63 and "_" in op:
        return op[: len(op) - len(suffix) - 1]
    return op


def tf_op_event_name(fullname):
    """XProf's TfOpEventName: the name a framework op event shows (its type for TF and JAX ops)."""
    category, name, op_type = parse_tf_op(fullname)
    if category == "unknown":
        return name.rstrip()
    if category == "tf.data":
        return "Iterator::" + name.split("::")[-1]
    return op_type


def name_scopes(name):
    """The name scopes of an op path (XProf's ParseTfNameScopes): all parts but the last."""
    return name.split("/")[:-1]


def has_gradients(ops) -> bool:
    """XProf's ModelTracker guess from (op name, op type) pairs (framework ops, or HLO
    instructions' metadata): True when a TensorFlow op sits in a `gradient_tape` or
    `gradients*` name scope or a JAX op (or an op without a type) in a `transpose(...)`
    one: a gradient, so the program trains."""
    for name, kind in set(ops):
        if TF_OP_TYPE.fullmatch(kind) and TF_OP_NAME.fullmatch(name):
            for scope in name_scopes(name):
                if scope.startswith("gradient") and (scope[8:] == "_tape" or scope[8:].startswith("s")):
                    return True
        elif (kind == "" or (name and JAX_OP_TYPE.fullmatch(kind) and kind in name.split("/")[-1])) and any(
            part.startswith("transpose(") for part in name.split("/")
        ):
            return True
    return False


def tf_op_fullname(op_type: str, op_name: str) -> str:
    """XProf's TfOpFullname from an HLO instruction's metadata: `op_name:op_type`, ""
    when both are empty (XLA_Args / XLA_Retvals name their own type)."""
    if not op_type:
        if not op_name:
            return ""
        if op_name in ("XLA_Args", "XLA_Retvals"):
            op_type = op_name
    return f"{op_name}:{op_type}"


def hlo_op_name(value):
    """The HLO op an `hlo_op` stat names: its last `::` part (a GPU kernel's stat may name
    the op's computations before it)."""
    return value.rsplit("::", 1)[-1]


def stat_ids(values):
    """A stat column of small ids (GPU program ids, graph ids...) as float64: NaN where a
    value is not a whole number in [0, 2**63) (missing, text, a double such as inf: a
    damaged file). Not for TPU program ids, which are 64-bit hashes."""
    import numpy as np
    import pandas as pd

    values = np.asarray(values)
    if values.dtype.kind in "iuf":  # numbers already (no text among them): no per-value parse
        ids = values.astype(np.float64)
    else:
        ids = pd.to_numeric(pd.Series(values.astype(object)), errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(ids) & (ids >= 0) & (ids < 2**63) & (ids == np.floor(ids))
    return np.where(ok, ids, np.nan)
