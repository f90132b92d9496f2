"""HLO instructions as text, the way XProf shows them ("HLO op text", the op details card).

XProf prints an instruction with XLA's `HloInstruction::ToString` (no metadata, no
backend config, operand shapes shown, large constants elided; `UncachedExpression` in
xprof/utils/hlo_module_utils.h). This is our printer of the same text from the
HloProto: `%name = shape opcode(shape %operand, ...), attributes`, with layouts
(`{1,0:T(8,128)S(1)}`), and the attributes XLA prints for each kind of instruction
(dimensions, slices, windows, convolution labels, dot and gather/scatter dimension
numbers, collective groups, custom-call targets, called computations).
"""

from __future__ import annotations

import math
import struct

import numpy as np

_PRECISION = {0: "default", 1: "high", 2: "highest"}
_ALGORITHMS = {
    1: "dot_any_f8_any_f8_f32",
    2: "dot_any_f8_any_f8_f32_fast_accum",
    3: "dot_f16_f16_f16",
    4: "dot_f16_f16_f32",
    5: "dot_bf16_bf16_bf16",
    6: "dot_bf16_bf16_f32",
    7: "dot_bf16_bf16_f32_x3",
    8: "dot_bf16_bf16_f32_x6",
    9: "dot_tf32_tf32_f32",
    10: "dot_tf32_tf32_f32_x3",
    11: "dot_f32_f32_f32",
    12: "dot_f64_f64_f64",
    13: "dot_bf16_bf16_f32_x9",
}
_FFT_TYPES = {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"}
_API_VERSIONS = {
    2: "API_VERSION_STATUS_RETURNING",
    3: "API_VERSION_STATUS_RETURNING_UNIFIED",
    4: "API_VERSION_TYPED_FFI",
}
_DISTRIBUTIONS = {1: "rng_uniform", 2: "rng_normal"}
# Literals with more elements than this print as {...} (print_large_constants off).
_LARGE_CONSTANT_ELEMENTS = 10


def shape_text(shape, layout=True) -> str:
    """`f32[64,128]{1,0}`, `(f32[4]{0}, s32[])`: XLA's ShapeUtil::HumanStringWithLayout."""
    if shape.is_tuple:
        return "(" + _join_indexed(shape_text(s, layout) for s in shape.tuple_shapes) + ")"
    kind = shape.element_type.lower()
    if not shape.is_array:
        return {"token": "token[]", "opaque_type": "opaque[]"}.get(kind, kind)
    dims = ",".join(str(d) for d in shape.dimensions)
    text = f"{kind}[{dims}]"
    if layout and shape.has_layout:
        lay = layout_text(shape)
        if not (not shape.dimensions and lay == "{}"):
            text += lay
    return text


def _join_indexed(items) -> str:
    """XLA's list of tuple elements or operands: ", " between, `/*index=5*/` every fifth."""
    return ", ".join(f"/*index={i}*/{x}" if i and i % 5 == 0 else x for i, x in enumerate(items))


def layout_text(shape) -> str:
    """`{3,2,1,0:T(8,128)E(4)S(5)}` (LayoutUtil::HumanString)."""
    parts = []
    tiles = shape.tiles
    if tiles:
        parts.append(
            "T" + "".join("(" + ",".join("*" if d == -9223372036854775808 else str(d) for d in t) + ")" for t in tiles)
        )
    if shape.element_size_in_bits:
        parts.append(f"E({shape.element_size_in_bits})")
    if shape.memory_space:
        parts.append(f"S({shape.memory_space})")
    head = ",".join(str(d) for d in shape.minor_to_major)
    return "{" + head + (":" + "".join(parts) if parts else "") + "}"


def _float_text(value, kind) -> str:
    if math.isnan(value):
        return "-nan" if math.copysign(1.0, value) < 0 else "nan"
    if math.isinf(value):
        return "-inf" if value < 0 else "inf"
    digits = {"f16": (3, 5), "bf16": (2, 4), "f32": (6, 9), "f64": (15, 17)}.get(kind, (6, 9))
    cast = {"f16": np.float16, "f32": np.float32, "f64": float}.get(kind)
    for d in digits:
        text = f"{value:.{d}g}"
        back = float(text)
        if cast is None:
            same = _bf16(back) == _bf16(value)
        else:
            same = cast(back) == cast(value)
        if same:
            return text
    return f"{value:.{digits[1]}g}"


def _bf16(v):
    bits = struct.unpack("<I", struct.pack("<f", v))[0]
    return bits >> 16


def _literal_values(literal, kind):
    """The values of an array literal in row-major order, as text."""
    if kind == "pred":
        return ["true" if v else "false" for v in literal.preds]
    if kind in ("f32",):
        return [_float_text(v, kind) for v in literal.f32s]
    if kind == "f64":
        return [_float_text(v, kind) for v in literal.f64s]
    if kind == "f16":
        return [_float_text(float(v), kind) for v in np.frombuffer(literal.f16s, dtype="<f2")]
    if kind == "bf16":
        raw = np.frombuffer(literal.bf16s, dtype="<u2").astype(np.uint32) << 16
        return [_float_text(float(v), kind) for v in raw.view(np.float32)]
    ints = {"s32": literal.s32s, "s64": literal.s64s, "u32": literal.u32s, "u64": literal.u64s}.get(kind)
    if ints is not None:
        return [str(int(v)) for v in ints]
    if kind == "s8":
        return [str(int(v)) for v in np.frombuffer(literal.s8s, dtype=np.int8)]
    if kind == "u8":
        return [str(int(v)) for v in np.frombuffer(literal.u8s, dtype=np.uint8)]
    if kind == "s16":
        return [str(int(v)) for v in np.frombuffer(literal.s16s, dtype="<i2")]
    if kind == "u16":
        return [str(int(v)) for v in np.frombuffer(literal.u16s, dtype="<u2")]
    return None


def _nested(values, dims):
    if len(dims) <= 1:
        return "{" + ", ".join(values) + "}"
    step = len(values) // dims[0] if dims[0] else 0
    return "{ " + ", ".join(_nested(values[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])) + " }"


def _constant_text(instr) -> str:
    shape = instr.shape
    if shape.is_tuple or not shape.is_array:
        return "{...}"
    if not shape.dimensions:
        values = _literal_values(instr.proto.literal, shape.element_type.lower())
        return values[0] if values else "{...}"
    if shape.elements > _LARGE_CONSTANT_ELEMENTS:
        return "{...}"
    values = _literal_values(instr.proto.literal, shape.element_type.lower())
    if values is None or len(values) != shape.elements:
        return "{...}"
    return _nested(values, list(shape.dimensions))


def _dims(values) -> str:
    return "{" + ",".join(str(int(v)) for v in values) + "}"


def _window_text(window) -> str:
    dims = list(window.dimensions)
    out = ["size=" + "x".join(str(d.size) for d in dims)]
    if any(d.stride != 1 for d in dims):
        out.append("stride=" + "x".join(str(d.stride) for d in dims))
    if any(d.padding_low != 0 or d.padding_high != 0 for d in dims):
        out.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        out.append("lhs_dilate=" + "x".join(str(d.base_dilation) for d in dims))
    if any(d.window_dilation != 1 for d in dims):
        out.append("rhs_dilate=" + "x".join(str(d.window_dilation) for d in dims))
    if any(d.window_reversal for d in dims):
        out.append("rhs_reversal=" + "x".join("1" if d.window_reversal else "0" for d in dims))
    return " ".join(out)


def _dim_labels(d) -> str:
    def labels(batch, feature, spatial, b="b", f="f"):
        n = max([batch, feature] + list(spatial)) + 1
        out = ["?"] * n
        out[batch], out[feature] = b, f
        for i, s in enumerate(spatial):
            out[s] = str(i)
        return "".join(out)

    lhs = labels(d.input_batch_dimension, d.input_feature_dimension, d.input_spatial_dimensions)
    rhs = labels(
        d.kernel_input_feature_dimension, d.kernel_output_feature_dimension, d.kernel_spatial_dimensions, "i", "o"
    )
    out = labels(d.output_batch_dimension, d.output_feature_dimension, d.output_spatial_dimensions)
    return f"{lhs}_{rhs}->{out}"


def _padding_text(config) -> str:
    dims = list(config.dimensions)
    interior = any(d.interior_padding for d in dims)
    return "x".join(
        f"{d.edge_padding_low}_{d.edge_padding_high}" + (f"_{d.interior_padding}" if interior else "") for d in dims
    )


def _precision(p, attrs):
    precisions = list(p.precision_config.operand_precision)
    if any(v != 0 for v in precisions):
        attrs.append("operand_precision={" + ",".join(_PRECISION.get(v, str(v)) for v in precisions) + "}")
    if p.precision_config.algorithm:
        attrs.append("algorithm=" + _ALGORITHMS.get(p.precision_config.algorithm, str(p.precision_config.algorithm)))


def _replica_groups(p) -> str:
    which = p.WhichOneof("optional_collective_device_list")
    if which == "iota_collective_device_list":
        iota = p.iota_collective_device_list
        text = (
            f"[{iota.num_replica_groups},{iota.num_devices_per_group}]<=[{','.join(map(str, iota.iota_reshape_dims))}]"
        )
        perm = list(iota.iota_transpose_perm)
        if perm and perm != list(range(len(perm))):
            text += "T(" + ",".join(map(str, perm)) + ")"
        return text
    groups = p.collective_device_list.replica_groups if which == "collective_device_list" else p.replica_groups
    return "{" + ",".join(_dims(g.replica_ids) for g in groups) + "}"


def _extra_attributes(instr):
    """The attributes XLA's instruction classes print, in XLA's order."""
    p, op, attrs = instr.proto, instr.opcode, []
    if op in ("broadcast", "transpose", "reverse", "concatenate", "reduce", "map") and op != "map":
        attrs.append("dimensions=" + _dims(p.dimensions))
    elif op == "map" and p.dimensions:
        attrs.append("dimensions=" + _dims(p.dimensions))
    elif op == "sort":
        attrs.append("dimensions=" + _dims(p.dimensions))
        if p.is_stable:
            attrs.append("is_stable=true")
    elif op == "iota":
        attrs.append(f"iota_dimension={p.dimensions[0] if p.dimensions else 0}")
    elif op == "compare":
        attrs.append(f"direction={p.comparison_direction}")
        default = _default_comparison_type(instr)
        if p.comparison_type and p.comparison_type != default:
            attrs.append(f"type={p.comparison_type}")
    elif op == "reduce-precision":
        attrs += [f"exponent_bits={p.exponent_bits}", f"mantissa_bits={p.mantissa_bits}"]
    elif op == "slice":
        dims = list(p.slice_dimensions)
        plain = all(d.stride == 1 for d in dims)
        attrs.append(
            "slice={" + ", ".join(f"[{d.start}:{d.limit}" + ("" if plain else f":{d.stride}") + "]" for d in dims) + "}"
        )
    elif op == "dynamic-slice":
        attrs.append("dynamic_slice_sizes=" + _dims(p.dynamic_slice_sizes))
    elif op == "pad":
        attrs.append("padding=" + _padding_text(p.padding_config))
    elif op == "get-tuple-element":
        attrs.append(f"index={p.tuple_index}")
    elif op == "fusion":
        attrs.append(f"kind={p.fusion_kind}")
    elif op in ("convolution", "custom-call"):
        if p.HasField("window"):
            attrs.append("window={" + _window_text(p.window) + "}")
        if p.HasField("convolution_dimension_numbers"):
            attrs.append("dim_labels=" + _dim_labels(p.convolution_dimension_numbers))
        if p.feature_group_count not in (0, 1):
            attrs.append(f"feature_group_count={p.feature_group_count}")
        if p.batch_group_count not in (0, 1):
            attrs.append(f"batch_group_count={p.batch_group_count}")
        _precision(p, attrs)
        if op == "custom-call":
            target = p.custom_call_target.encode("unicode_escape").decode("ascii").replace('"', '\\"')
            attrs.append(f'custom_call_target="{target}"')
            if p.custom_call_api_version not in (0, 1):
                attrs.append(
                    "api_version=" + _API_VERSIONS.get(p.custom_call_api_version, str(p.custom_call_api_version))
                )
    elif op in ("dot", "scaled-dot"):
        d = p.dot_dimension_numbers
        for label, v in (
            ("lhs_batch_dims", d.lhs_batch_dimensions),
            ("lhs_contracting_dims", d.lhs_contracting_dimensions),
            ("rhs_batch_dims", d.rhs_batch_dimensions),
            ("rhs_contracting_dims", d.rhs_contracting_dimensions),
        ):
            if v:
                attrs.append(f"{label}=" + _dims(v))
        _precision(p, attrs)
    elif op in _INDEXED_DIMS:
        attrs.append(_dimension_numbers(p, *_INDEXED_DIMS[op]))
        if op == "gather":
            attrs.append("slice_sizes=" + _dims(p.gather_slice_sizes))
        if p.indices_are_sorted:
            attrs.append("indices_are_sorted=true")
        if op == "scatter" and p.unique_indices:
            attrs.append("unique_indices=true")
    elif op in ("reduce-window", "select-and-scatter"):
        attrs.append("window={" + _window_text(p.window) + "}")
    elif op == "fft":
        attrs += [f"fft_type={_FFT_TYPES.get(p.fft_type, p.fft_type)}", "fft_length=" + _dims(p.fft_length)]
    elif op == "triangular-solve":
        attrs += _triangular_solve(instr)
    elif op == "cholesky":
        attrs += _cholesky(instr)
    elif op == "rng":
        attrs.append("distribution=" + _DISTRIBUTIONS.get(p.distribution, str(p.distribution)))
    elif op == "rng-bit-generator":
        attrs.append(
            "algorithm="
            + {0: "rng_default", 1: "rng_three_fry", 2: "rng_philox"}.get(p.rng_algorithm, str(p.rng_algorithm))
        )
    elif op in ("all-reduce", "all-reduce-start", "reduce-scatter", "all-gather", "all-gather-start", "all-to-all"):
        if p.channel_id > 0:
            attrs.append(f"channel_id={p.channel_id}")
        attrs.append("replica_groups=" + _replica_groups(p))
        if op in ("all-gather", "all-gather-start"):
            attrs.append("dimensions=" + _dims(p.dimensions[:1]))
            if p.use_global_device_ids:
                attrs.append("use_global_device_ids=true")
        elif op == "all-to-all":
            if p.dimensions:
                attrs.append("dimensions=" + _dims(p.dimensions[:1]))
        else:
            if p.use_global_device_ids:
                attrs.append("use_global_device_ids=true")
            if op == "reduce-scatter":
                attrs.append("dimensions=" + _dims(p.dimensions[:1]))
    elif op in ("collective-permute", "collective-permute-start"):
        if p.channel_id > 0:
            attrs.append(f"channel_id={p.channel_id}")
        attrs.append(
            "source_target_pairs={" + ",".join(f"{{{s.source},{s.target}}}" for s in p.source_target_pairs) + "}"
        )
    elif op in ("send", "recv", "send-done", "recv-done") and p.channel_id > 0:
        attrs.append(f"channel_id={p.channel_id}")
    return attrs


# Gather and scatter: the proto field of their dimension numbers, the fields XLA always
# prints, and the batching ones it prints when set.
_INDEXED_DIMS = {
    "gather": (
        "gather_dimension_numbers",
        "offset_dims collapsed_slice_dims start_index_map".split(),
        "operand_batching_dims start_indices_batching_dims".split(),
    ),
    "scatter": (
        "scatter_dimension_numbers",
        "update_window_dims inserted_window_dims scatter_dims_to_operand_dims".split(),
        "input_batching_dims scatter_indices_batching_dims".split(),
    ),
}


def _dimension_numbers(p, field, always, if_set) -> str:
    """Gather / scatter dimension numbers (`field` of instruction `p`): the fields XLA
    always prints, the batching ones when set, then index_vector_dim."""
    d = getattr(p, field)
    parts = [f"{k}={_dims(getattr(d, k))}" for k in always]
    parts += [f"{k}={_dims(getattr(d, k))}" for k in if_set if getattr(d, k)]
    parts.append(f"index_vector_dim={d.index_vector_dim}")
    return ", ".join(parts)


def _triangular_solve(instr):
    raw = _unknown_fields(instr.proto, 59)
    opts = {1: 0, 2: 0, 3: 0, 4: 0}
    _read_varints(raw, opts)
    out = []
    if opts[1]:
        out.append("left_side=true")
    if opts[2]:
        out.append("lower=true")
    if opts[3]:
        out.append("unit_diagonal=true")
    out.append(
        "transpose_a="
        + {0: "TRANSPOSE_INVALID", 1: "NO_TRANSPOSE", 2: "TRANSPOSE", 3: "ADJOINT"}.get(opts[4], str(opts[4]))
    )
    return out


def _cholesky(instr):
    raw = _unknown_fields(instr.proto, 62)
    opts = {1: 0}
    _read_varints(raw, opts)
    return ["lower=true"] if opts[1] else []


def _unknown_fields(proto, number):
    """Bytes of a submessage field our schema does not declare (kept as unknown fields)."""
    from google.protobuf import unknown_fields

    try:
        for f in unknown_fields.UnknownFieldSet(proto):
            if f.field_number == number and f.wire_type == 2:
                return bytes(f.data)
    except Exception:  # an old protobuf without the API: the attribute goes unprinted
        return b""
    return b""


def _read_varints(raw, out):
    pos = 0
    while pos < len(raw):
        key, pos = _varint(raw, pos)
        field, wt = key >> 3, key & 7
        if wt != 0:
            return
        v, pos = _varint(raw, pos)
        if field in out:
            out[field] = v


def _varint(b, pos):
    result = shift = 0
    while pos < len(b):
        c = b[pos]
        pos += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            break
        shift += 7
    return result, pos


def _default_comparison_type(instr):
    kind = instr.operands[0].shape.element_type if instr.operands else ""
    if kind in ("F16", "BF16", "F32", "F64", "C64", "C128") or kind.startswith("F8") or kind.startswith("F4"):
        return "FLOAT"
    if kind.startswith("U") or kind == "PRED":
        return "UNSIGNED"
    return "SIGNED"


_SHARDING_TYPES = {0: "replicated", 1: "maximal", 4: "manual", 5: "unknown", 6: "unreduced"}


def _iota_dims(reshape, perm):
    """XLA's canonical iota tile assignment: size-1 dims dropped, then dims that stay
    next to each other under the transpose merged into one."""
    perm = list(perm) or list(range(len(reshape)))
    keep = [i for i, d in enumerate(reshape) if d != 1]
    if not keep:
        return [1], [0]
    rank = {old: new for new, old in enumerate(keep)}
    dims = [reshape[i] for i in keep]
    perm = [rank[p] for p in perm if p in rank]
    i = 0
    while i < len(perm) - 1:
        if perm[i + 1] == perm[i] + 1:
            a = perm[i]
            dims[a] *= dims[a + 1]
            del dims[a + 1]
            perm = [p if p <= a else p - 1 for j, p in enumerate(perm) if j != i + 1]
        else:
            i += 1
    return dims, perm


def sharding_text(s) -> str:
    """`{replicated}`, `{devices=[2,1,4]<=[8] last_tile_dim_replicate}`: HloSharding::ToString."""
    if s.type == 2:
        return "{" + _join_indexed(sharding_text(t) for t in s.tuple_shardings) + "}"
    if s.type in (0, 4, 5, 6):
        return "{" + _SHARDING_TYPES[s.type] + "}"
    if s.type == 1:
        device = s.tile_assignment_devices[0] if s.tile_assignment_devices else 0
        return f"{{maximal device={device}}}"
    dims = ",".join(map(str, s.tile_assignment_dimensions))
    if s.iota_reshape_dims:
        reshape, perm = _iota_dims(list(s.iota_reshape_dims), list(s.iota_transpose_perm))
        text = f"devices=[{dims}]<=[{','.join(map(str, reshape))}]"
        if len(reshape) > 1:
            text += "T(" + ",".join(map(str, perm)) + ")"
    else:
        text = f"devices=[{dims}]" + ",".join(map(str, s.tile_assignment_devices))
    if s.replicate_on_last_tile_dim:
        text += " last_tile_dim_replicate"
    if s.last_tile_dims:
        text += " last_tile_dims={" + ", ".join(_SHARDING_TYPES.get(t, "error_type.") for t in s.last_tile_dims) + "}"
    return "{" + text + "}"


def _called_attributes(instr):
    op, called = instr.opcode, instr.called
    if not called:
        return []
    names = [f"%{c.name}" for c in called]
    if op == "while":
        return [f"condition={names[1]}", f"body={names[0]}"] if len(names) == 2 else []
    if op == "select-and-scatter":
        return [f"select={names[0]}", f"scatter={names[1]}"] if len(names) == 2 else []
    if op == "conditional":
        if instr.operands and instr.operands[0].shape.element_type == "PRED" and len(names) == 2:
            return [f"true_computation={names[0]}", f"false_computation={names[1]}"]
        return ["branch_computations={" + ", ".join(names) + "}"]
    if op in (
        "call",
        "map",
        "reduce-window",
        "reduce",
        "all-reduce",
        "reduce-scatter",
        "all-reduce-start",
        "scatter",
        "sort",
        "scan",
    ):
        out = [f"to_apply={names[0]}"]
        if op == "call" and instr.proto.is_composite:
            out.append("is_composite=true")
        return out
    if op == "custom-call":
        return ["called_computations={" + ", ".join(names) + "}"]
    if op in ("async-start", "async-update", "async-done"):
        return [f"calls={names[0]}"] if op == "async-start" else []
    return ["calls=" + ", ".join(names)]


def instruction_text(instr) -> str:
    """The HLO text of an io.hlo.HloInstruction as XProf shows it."""
    if instr.opcode == "constant":
        operands = _constant_text(instr)
    elif instr.opcode == "parameter":
        operands = str(instr.proto.parameter_number)
    else:
        operands = _join_indexed(f"{shape_text(o.shape)} %{o.name}" for o in instr.operands)
    text = f"%{instr.name} = {shape_text(instr.shape)} {instr.opcode}({operands})"
    attrs = _extra_attributes(instr) + _called_attributes(instr)
    if instr.proto.HasField("sharding"):
        attrs.append("sharding=" + sharding_text(instr.proto.sharding))
    if instr.proto.HasField("frontend_attributes") and instr.proto.frontend_attributes.map:
        items = sorted(instr.proto.frontend_attributes.map.items())
        attrs.append("frontend_attributes={" + ",".join(f'{k}="{v}"' for k, v in items) + "}")
    if instr.control_predecessors:
        attrs.append("control-predecessors={" + ", ".join(f"%{c.name}" for c in instr.control_predecessors) + "}")
    return text + "".join(", " + a for a in attrs)
