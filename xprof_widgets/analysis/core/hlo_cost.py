"""FLOPs and bytes of every HLO instruction: the one cost model of the op profile,
HLO stats, the overview's top ops and the roofline.

XProf does not measure FLOPs or bytes on GPUs: it runs XLA's cost analysis over the
module's HloProto (`XProfGpuCostAnalysis`, xprof/utils/xprof_gpu_cost_analysis.cc,
over `xla::gpu::GpuHloCostAnalysis` and `xla::HloCostAnalysis`,
xla/service/gpu/model/gpu_hlo_cost_analysis.cc, xla/service/hlo_cost_analysis.cc)
and multiplies by the number of kernels. This module computes the same numbers, to
the bit, so our GPU op statistics equal XProf's:

- every per-instruction value is a float32 (XLA's `Properties` store floats), rounded
  where XLA rounds and read back truncated to int64;
- elementwise ops cost the clock cycles per element of XLA's "sm_86" op profile
  (`_gpu_elementwise_cycles.csv`, 3 for ops it does not list; XProf gives no device
  description, so every GPU, NVIDIA or AMD, is costed as sm_86);
- fusions weight each fused instruction by how often it is computed (utilisation
  propagated from the root), read each parameter once at most, and write their outputs
  (a dynamic-update-slice root writes only its update);
- cuBLASLt GEMMs (`__cublas$lt$matmul...`) and cuDNN/MIOpen convolutions
  (`__cudnn$conv...`) are costed from their shapes and dimension numbers; any other
  custom call, the legacy `__cublas$gemm` (hipBLAS GEMMs on ROCm) included, costs 0 as
  in XProf 2.24.2;
- an instruction XLA cannot cost (a GEMM whose backend config does not parse) makes
  the whole module cost 0, as XProf does.

`mode="cpu"` is the same analysis with XLA's base rules (one FLOP per element of an
elementwise op, transcendentals not counted as FLOPs): what XLA:CPU's cost analysis
gives, used for our op profile of JAX on CPU (XProf has none).

The analysis walks instructions, not events: a module of 10,000 instructions costs
tens of milliseconds, once per module.
"""

from __future__ import annotations

import csv
import json
import math
from functools import cached_property, lru_cache
from importlib import resources

import numpy as np
import pandas as pd

from ...io.hlo import ELEMENTWISE_OPCODES, HloModule, post_order_from

F32 = np.float32
_ZERO = F32(0)

FLOPS = "flops"
TRANSCENDENTALS = "transcendentals"
BYTES = "bytes accessed"
UTILIZATION = "utilization"
DEVICE_FLOPS_ADJUSTMENT = "device_flops_adjustment"

# HBM is XLA memory space 0; XProf reports reads and writes of it per op.
_HBM_SPACE = 0
# Constants with more elements than this are read from memory inside GPU fusions.
_GPU_IMMEDIATE_CONSTANT_MAX_ELEMENTS = 8
_CPU_IMMEDIATE_CONSTANT_MAX_ELEMENTS = 1
_DEFAULT_CYCLES_PER_ELEMENT = 3

_CUBLAS_LT_TARGETS = frozenset(
    {
        "__cublas$lt$matmul",
        "__cublas$lt$matmul$f8",
        "__cublas$lt$matmul$mx",
        "__cublas$lt$groupedMatmul",
    }
)
_DNN_CONVOLUTION_TARGETS = frozenset(
    {
        "__cudnn$convForward",
        "__cudnn$convForwardGraph",
        "__cudnn$convBackwardInput",
        "__cudnn$convBackwardFilter",
        "__cudnn$convBiasActivationForward",
    }
)
_TRANSCENDENTAL_OPCODES = frozenset(
    {
        "acos",
        "acosh",
        "asin",
        "asinh",
        "atan2",
        "atanh",
        "cbrt",
        "cosine",
        "cosh",
        "erf",
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "logistic",
        "power",
        "rsqrt",
        "sine",
        "sinh",
        "sqrt",
        "tan",
        "tanh",
    }
)
# Opcodes XLA's visitor sends to HandleElementwiseOp (unary, binary, select, compare,
# clamp, convert, reduce-precision): the elementwise opcodes but `copy`, which has its
# own handler (HandleCopy: bytes only).
_ELEMENTWISE_HANDLED = ELEMENTWISE_OPCODES - {"copy"}
# Opcodes whose handler keeps the default costs (bytes of operands and outputs, no FLOPs).
_DEFAULT_COST = frozenset(
    {
        "iota",
        "reshape",
        "dynamic-reshape",
        "reverse",
        "pad",
        "broadcast",
        "copy",
        "copy-start",
        "copy-done",
        "send",
        "send-done",
        "recv",
        "recv-done",
        "opt-barrier",
        "get-dimension-size",
        "set-dimension-size",
        "partition-id",
        "replica-id",
        "topk",
        "batch-norm-training",
        "batch-norm-inference",
        "batch-norm-grad",
        "rng-get-and-update-state",
        "all-gather-done",
        "all-reduce-done",
        "collective-permute-done",
        "collective-broadcast",
        "ragged-all-to-all",
        "async-update",
        "async-done",
        "all-to-all",
    }
)


class CostError(Exception):
    """XLA's cost analysis fails on this module (XProf then costs all its ops 0)."""


@lru_cache(maxsize=1)
def gpu_elementwise_cycles() -> dict:
    """{(opcode, element type): clock cycles per element} of XLA's default GPU op
    profile ("sm_86" in xla/service/gpu/model/hlo_op_profiles_data.h)."""
    path = resources.files(__package__).joinpath("_gpu_elementwise_cycles.csv")
    with path.open() as f:
        return {(r["opcode"], r["element_type"]): int(r["clock_cycles"]) for r in csv.DictReader(f)}


def _key(prefix, index):
    return f"{prefix}{{{','.join(map(str, index))}}}"


def _operand_key(i, index=()):
    return _key(f"{BYTES}{i}", index)


def _output_key(index=()):
    return _key(f"{BYTES}out", index)


def _operand_util_key(i, index=()):
    return _key(f"{UTILIZATION}{i}", index)


def _to_int(value) -> int:
    """XLA's saturate_cast<int64_t>(float): NaN 0, truncation toward zero, clamped."""
    v = float(value)
    if math.isnan(v):
        return 0
    if v >= 9.223372036854775807e18:
        return 2**63 - 1
    if v <= -9.223372036854775808e18:
        return -(2**63)
    return int(v)


def _llround(value) -> int:
    """std::llround: halves away from zero."""
    v = float(value)
    return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)


class _Props(dict):
    """XLA's HloCostAnalysis::Properties: float32 values by key, absent keys 0."""

    def __missing__(self, key):
        return _ZERO

    def add(self, key, value):
        self[key] = F32(self[key] + F32(value))

    def for_each(self):
        """Non-zero entries, as Properties::ForEach visits them."""
        return [(k, v) for k, v in self.items() if v != 0]


class _Analysis:
    """One visitor of XLA's cost analysis (nested ones for called computations)."""

    def __init__(self, mode):
        self.mode = mode
        self.gpu = mode == "gpu"
        self.props = {}  # HloInstruction -> _Props
        self.props_sum = _Props()
        self.cur = _Props()
        self._size_cache = {}
        # A called computation's analysis (its instructions' properties and their sum) by
        # computation, shared with the nested visitors: see process_subcomputation.
        self._called = {}

    # --- sizes -----------------------------------------------------------------------------

    def shape_size(self, shape) -> int:
        """GetShapeSize: 0 without a layout, else ByteSizeOf(shape, 8)."""
        if not shape.layout_complete():
            return 0
        return shape.byte_size()

    def prop(self, instr, key):
        p = self.props.get(instr)
        return p[key] if p is not None else _ZERO

    # --- traversal ---------------------------------------------------------------------------

    def accept(self, computation):
        for instr in computation.visit_order():
            self.visit(instr)

    def visit(self, instr):
        self.preprocess(instr)
        handler = _HANDLERS.get(instr.opcode)
        if handler is None:
            if instr.opcode in _ELEMENTWISE_HANDLED:
                handler = _Analysis.handle_elementwise
            elif instr.opcode in _DEFAULT_COST:
                handler = None
            else:
                raise CostError(f"no cost rule for opcode {instr.opcode!r} ({instr.name})")
        if handler is not None:
            handler(self, instr)
        self.postprocess(instr)

    def nested(self):
        sub = _Analysis(self.mode)
        sub._called = self._called
        return sub

    def process_subcomputation(self, computation, again=True):
        """The properties' sum of `computation` analysed on its own (a fresh visitor, as
        XLA's ProcessSubcomputation), its instructions' properties added to this one's.

        A computation called from several places (`again`) is analysed once: the result
        depends on the computation alone, so a module whose calls fan out (each computation
        calling the next one 8 times, 10 deep: a billion visits, a hang, where XLA's walk
        would repeat them all) costs one visit per computation. Copies are handed out, as
        callers change the properties they get. A fusion's body (`again=False`) is analysed
        each time: its fusion rewrites the body's properties."""
        if not again:
            sub = self.nested()
            sub.accept(computation)
            self.props.update(sub.props)
            return sub.props_sum
        found = self._called.get(computation)
        if found is None:
            sub = self.nested()
            sub.accept(computation)
            found = self._called[computation] = ({i: _Props(p) for i, p in sub.props.items()}, _Props(sub.props_sum))
        props, total = found
        self.props.update({i: _Props(p) for i, p in props.items()})
        return _Props(total)

    def preprocess(self, instr):
        cur = _Props()
        total = _ZERO
        for leaf, _ in instr.shape.leaves():
            total = F32(total + F32(self.shape_size(leaf)))
        cur[_output_key()] = total
        for i, op in enumerate(instr.operands):
            size = self._size_cache.get(op)
            if size is None:
                size = self._size_cache[op] = self.shape_size(op.shape)
            total = F32(total + F32(size))
            cur[_operand_key(i)] = F32(size)
            cur[_operand_util_key(i)] = F32(1)
        cur[BYTES] = total
        self.cur = cur

    def postprocess(self, instr):
        if self.gpu and instr.opcode != "custom-call":
            self._device_flops_adjustment(instr, _max_input_bits(instr))
        for k, v in self.cur.for_each():
            self.props_sum.add(k, v)
        if instr in self.props:
            raise CostError(f"{instr.name} analysed twice")
        self.props[instr] = self.cur
        self.cur = _Props()

    def _device_flops_adjustment(self, instr, bits):
        """XProf: 8-bit inputs run at twice, 4-bit at four times the 16-bit FLOP rate."""
        model = self.cur[FLOPS]
        factor = {8: 2, 4: 4}.get(bits, 1) if model else 1
        self.cur[DEVICE_FLOPS_ADJUSTMENT] = F32(model - F32(model / F32(factor)))

    # --- elementwise --------------------------------------------------------------------------

    def elementwise_flops(self, opcode, shape) -> int:
        if self.gpu:
            cycles = gpu_elementwise_cycles().get((opcode, shape.element_type), _DEFAULT_CYCLES_PER_ELEMENT)
            return cycles * shape.elements_recursive
        return shape.elements

    def handle_elementwise(self, instr):
        if self.gpu:
            self.cur[FLOPS] = F32(self.elementwise_flops(instr.opcode, instr.shape))
        elif instr.opcode in _TRANSCENDENTAL_OPCODES:
            self.cur[TRANSCENDENTALS] = F32(instr.shape.elements)
        else:
            self.cur[FLOPS] = F32(instr.shape.elements)

    # --- data movement -----------------------------------------------------------------------

    def _no_bytes(self, instr, operands=()):
        self.cur[BYTES] = _ZERO
        self.cur[_output_key()] = _ZERO
        for i in operands:
            self.cur[_operand_key(i)] = _ZERO

    def handle_parameter(self, instr):
        self._no_bytes(instr)

    def handle_get_tuple_element(self, instr):
        self._no_bytes(instr, (0,))

    def handle_bitcast(self, instr):
        self._no_bytes(instr, (0,))

    def handle_domain(self, instr):
        self._no_bytes(instr, range(len(instr.operands)))

    def handle_transpose(self, instr):
        if _transpose_is_bitcast(instr):
            self.handle_bitcast(instr)

    def handle_tuple(self, instr):
        size = F32(self.shape_size(instr.shape))
        self.cur[BYTES] = size
        self.cur[_output_key()] = size
        for i in range(len(instr.operands)):
            self.cur[_operand_key(i)] = _ZERO

    def handle_slice(self, instr):
        out = self.shape_size(instr.shape)
        self.cur[BYTES] = F32(out * 2)
        self.cur[_output_key()] = F32(out)
        self.cur[_operand_key(0)] = F32(out)
        self.cur[_operand_util_key(0)] = F32(
            instr.shape.elements / instr.operands[0].shape.elements if instr.operands[0].shape.elements else math.inf
        )

    def handle_dynamic_slice(self, instr):
        out = self.shape_size(instr.shape)
        idx = self.shape_size(instr.operands[1].shape)
        self.cur[BYTES] = F32(out * 2 + idx)
        self.cur[_output_key()] = F32(out)
        self.cur[_operand_key(0)] = F32(out)
        self.cur[_operand_key(1)] = F32(idx)
        n_in = instr.operands[0].shape.elements
        self.cur[_operand_util_key(0)] = F32(instr.shape.elements / n_in if n_in else math.inf)

    def handle_dynamic_update_slice(self, instr):
        update = self.shape_size(instr.operands[1].shape)
        idx = self.shape_size(instr.operands[2].shape)
        n_update = instr.operands[1].shape.elements
        n_out = instr.shape.elements
        self.cur[BYTES] = F32(update * 2 + idx)
        self.cur[_output_key()] = F32(update)
        self.cur[_operand_key(0)] = _ZERO
        self.cur[_operand_key(1)] = F32(update)
        self.cur[_operand_key(2)] = F32(idx)
        self.cur[_operand_util_key(0)] = F32((n_out - n_update) / n_out if n_out else math.nan)

    def handle_gather(self, instr):
        out = self.shape_size(instr.shape)
        idx = self.shape_size(instr.operands[1].shape)
        self.cur[BYTES] = F32(out * 2 + idx)
        self.cur[_operand_key(0)] = F32(out)
        self.cur[_operand_key(1)] = F32(idx)
        n_in = instr.operands[0].shape.elements
        self.cur[_operand_util_key(0)] = F32(instr.shape.elements / n_in if n_in else math.inf)
        self.cur[_output_key()] = F32(out)

    def handle_scatter(self, instr):
        n = (len(instr.operands) - 1) // 2
        updates = instr.operands[n + 1 :]
        total = 0
        for i in range(n):
            size = self.shape_size(updates[i].shape)
            self.cur[_operand_key(i)] = F32(size)
            self.cur[_operand_key(n + 1 + i)] = F32(size)
            total += size
        idx = self.shape_size(instr.operands[n].shape)
        self.cur[_operand_key(n)] = F32(idx)
        self.cur[BYTES] = F32(total * 3 + idx)
        self.cur[_output_key()] = F32(total)
        self._scale_subcomputation(instr.called[0], updates[0].shape.elements)

    def handle_infeed(self, instr):
        size = 0
        for leaf, index in instr.shape.leaves():
            s = self.shape_size(leaf)
            size += s
            self.cur[_output_key(index)] = F32(s)
        self.cur[_output_key()] = F32(size)
        self.cur[BYTES] = F32(size)

    def handle_outfeed(self, instr):
        self.cur[BYTES] = _ZERO
        for i, op in enumerate(instr.operands):
            size = 0
            for leaf, index in op.shape.leaves():
                s = self.shape_size(leaf)
                size += s
                self.cur[_operand_key(i, index)] = F32(s)
            self.cur[_operand_key(i)] = F32(size)
            self.cur.add(BYTES, F32(size))

    # --- arithmetic ---------------------------------------------------------------------------

    def handle_concatenate(self, instr):
        if not self.gpu:
            return
        dim = instr.proto.dimensions[0] if instr.proto.dimensions else 0
        per_element = 6
        if dim > 0 and instr.operands[0].shape.dimensions[dim] & 31:
            per_element = 400
        self.cur[FLOPS] = F32(per_element * instr.shape.elements_recursive)

    def handle_dot(self, instr):
        self.cur[FLOPS] = F32(dot_flops(instr.operands[0].shape, instr.shape, instr.proto.dot_dimension_numbers))

    def handle_ragged_dot(self, instr):
        raise CostError("ragged-dot is not costed")

    def handle_convolution(self, instr):
        self.cur[FLOPS] = F32(convolution_flops(instr, instr.shape))

    def handle_fft(self, instr):
        shape = instr.operands[0].shape
        if shape.is_tuple:
            shape = shape.tuple_shapes[0]
        factors = 1
        for d in instr.proto.fft_length:
            factors *= max(int(d), 1).bit_length() - 1
        self.cur[FLOPS] = F32(2 * 4 * factors * shape.elements)

    def handle_triangular_solve(self, instr):
        a, b = instr.operands[0].shape, instr.operands[1].shape
        total = F32(self.shape_size(instr.shape))
        self.cur[_output_key()] = F32(self.shape_size(instr.shape))
        total = F32(total + F32(F32(self.shape_size(a)) / F32(2)))
        self.cur[_operand_key(0)] = F32(F32(self.shape_size(a)) / F32(2))
        total = F32(total + F32(self.shape_size(b)))
        self.cur[_operand_key(0)] = F32(self.shape_size(b))
        self.cur[BYTES] = total
        self.cur[FLOPS] = F32(2 * a.dimensions[-1] * b.elements)

    def handle_cholesky(self, instr):
        a = instr.operands[0].shape
        half = F32(F32(self.shape_size(a)) / F32(2))
        self.cur[BYTES] = F32(half + half)
        self.cur[_output_key()] = half
        self.cur[_operand_key(0)] = half
        self.cur[FLOPS] = F32((a.dimensions[-1] * a.elements) // 3)

    def handle_sort(self, instr):
        n = instr.operands[0].shape.elements
        self.cur[FLOPS] = F32(n * ((n - 1).bit_length() if n > 0 else 0))

    def handle_rng(self, instr):
        self.cur[TRANSCENDENTALS] = F32(instr.shape.elements)

    def handle_rng_bit_generator(self, instr):
        self.cur[TRANSCENDENTALS] = F32(instr.shape.elements_recursive)

    def _copyable(self, key):
        if key.startswith(BYTES) or key.startswith(UTILIZATION):
            return False
        return not (self.gpu and key.startswith("reserved0"))

    def _scale_subcomputation(self, computation, count):
        sub = self.process_subcomputation(computation)
        for k, v in sub.for_each():
            if self._copyable(k):
                self.cur[k] = F32(v * F32(count))

    def handle_map(self, instr):
        self._scale_subcomputation(instr.called[0], instr.shape.elements)

    def handle_reduce(self, instr):
        out0 = instr.shape if not instr.shape.is_tuple else instr.shape.tuple_shapes[0]
        count = instr.operands[0].shape.elements - out0.elements
        self._scale_subcomputation(instr.called[0], count)
        if not self.gpu:
            return
        out_bytes = sum(self.shape_size(leaf) for leaf, _ in instr.shape.leaves())
        self.cur[_output_key()] = F32(out_bytes)
        total = out_bytes
        n_inputs = len(instr.operands) // 2
        for i in range(n_inputs):
            total = int(F32(F32(total) + self.cur[_operand_key(i)]))
        for i in range(n_inputs, len(instr.operands)):
            b = out0.elements * self.shape_size(instr.operands[i].shape)
            self.cur[_operand_key(i)] = F32(b)
            self.cur[_operand_util_key(i)] = F32(out0.elements)
            total += b
        self.cur[BYTES] = F32(total)

    def handle_scan(self, instr):
        self._scale_subcomputation(instr.called[0], instr.operands[1].shape.elements)

    def handle_reduce_window(self, instr):
        dims = instr.proto.window.dimensions
        window = 1
        for d in dims:
            window *= d.size
        out = instr.shape if not instr.shape.is_tuple else instr.shape.tuple_shapes[0]
        count = (window - 1) * out.elements
        reducing = [d for d in dims if d.size != 1]
        padded = [d for d in dims if d.padding_low != 0 or d.padding_high != 0]
        if len(reducing) == 1 and len(padded) == 1 and not instr.shape.is_tuple:
            for i, d in enumerate(dims):
                if (
                    d.size != 1
                    and d.padding_low != 0
                    and d.padding_high != 0
                    and d.padding_low == d.padding_high
                    and d.size == 2 * d.padding_low + 1
                ):
                    if d.padding_low == instr.shape.dimensions[i] - 1:
                        size = instr.shape.dimensions[i]
                        count = out.elements // size + (size - 1)
                    break
        self._scale_subcomputation(instr.called[0], count)

    def handle_select_and_scatter(self, instr):
        select = self.process_subcomputation(instr.called[0])
        scatter = self.process_subcomputation(instr.called[1])
        n = instr.operands[1].shape.elements
        window = 1
        for d in instr.proto.window.dimensions:
            window *= d.size
        for k, v in select.for_each():
            if self._copyable(k):
                self.cur.add(k, F32(v * F32(n * (window - 1))))
        for k, v in scatter.for_each():
            if self._copyable(k):
                self.cur.add(k, F32(v * F32(n)))

    # --- control flow -------------------------------------------------------------------------

    def handle_while(self, instr):
        cond, body = _while_parts(instr)
        body_props = self.process_subcomputation(body)
        cond_props = self.process_subcomputation(cond)
        self.cur = _Props()
        for k, v in body_props.for_each():
            self.cur.add(k, v)
        for k, v in cond_props.for_each():
            self.cur.add(k, v)

    def handle_call(self, instr):
        self.cur = _Props(self.process_subcomputation(instr.called[0]))

    def handle_conditional(self, instr):
        branches = instr.called
        self.cur = _Props(self.process_subcomputation(branches[0]))
        for comp in branches[1:]:
            for k, v in self.process_subcomputation(comp).for_each():
                self.cur[k] = max(self.cur[k], v)

    def handle_async_start(self, instr):
        if not self.gpu:
            self.cur = _Props(self.process_subcomputation(instr.called[0]))
            return
        wrapped = instr.called[0].root if instr.called else None
        if wrapped is None:
            return
        for i in _post_order_single(wrapped):
            self.visit(i)
        if wrapped.opcode == "reduce-scatter":
            self.handle_reduce_scatter(wrapped)
        elif wrapped.opcode == "all-to-all":
            pass  # only a "bytes transferred" key, which XProf does not read

    # --- custom calls -------------------------------------------------------------------------

    def handle_custom_call(self, instr):
        target = instr.proto.custom_call_target
        if self.gpu and target in _CUBLAS_LT_TARGETS:
            dims = _gemm_contracting_dims(instr)
            out = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
            lhs = instr.operands[0].shape
            width = 1
            for d in dims:
                width *= lhs.dimensions[d]
            self.cur[FLOPS] = F32(2 * out.elements * width)
            out_size = out.byte_size()
            self.cur[BYTES] = F32(F32(self.cur[BYTES] - self.cur[_output_key()]) + F32(out_size))
            self.cur[_output_key()] = F32(out_size)
            bits = instr.operands[0].shape.element_bits
            self._device_flops_adjustment(instr, bits if instr.operands[0].shape.is_array else 0)
            return
        if self.gpu and target in _DNN_CONVOLUTION_TARGETS:
            out = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
            self.cur[FLOPS] = F32(convolution_flops(instr, out))
            if instr.shape.is_tuple:
                size = F32(out.byte_size())
                self.cur[BYTES] = F32(F32(self.cur[BYTES] - self.cur[_output_key()]) + size)
                self.cur[_output_key()] = size
            return
        self.cur[BYTES] = F32(-1)
        self.cur[_output_key()] = F32(-1)
        for i in range(len(instr.operands)):
            self.cur[_operand_key(i)] = F32(-1)
        self.cur[FLOPS] = F32(-1)

    # --- collectives (GPU rules; XProf reads only FLOPs and bytes) ----------------------------

    def handle_all_reduce(self, instr):
        if not self.gpu:
            flops, out = 0, 0
            for s, _ in instr.shape.subshapes():
                if s.is_array:
                    flops += s.elements
                    out += self.shape_size(s)
            total = out + sum(self.shape_size(o.shape) for o in instr.operands)
            self.cur[FLOPS] = F32(flops)
            self.cur[_output_key()] = F32(out)
            self.cur[BYTES] = F32(total)
            return
        _num_ranks(instr)
        out = sum(self.shape_size(s) for s, _ in instr.shape.subshapes() if s.is_array)
        total = out + sum(self.shape_size(o.shape) for o in instr.operands)
        self.cur[_output_key()] = F32(out)
        self.cur[BYTES] = F32(total)
        self.cur[FLOPS] = F32(self._reducer_flops(instr))

    def _reducer_flops(self, instr):
        root = instr.called[0].root if instr.called else None
        opcode = root.opcode if root is not None else ""
        return self.elementwise_flops(opcode, instr.shape)

    def handle_all_reduce_start(self, instr):
        if not self.gpu:
            return self.handle_all_reduce(instr)
        _num_ranks(instr)
        self.cur[FLOPS] = F32(self._reducer_flops(instr))
        self.cur[BYTES] = F32(_array_leaf_bytes(instr.shape))

    def handle_all_gather(self, instr, skip=None):
        if not self.gpu:
            return
        n = _num_ranks(instr)
        transferred = _array_leaf_bytes(instr.shape, skip)
        rank = transferred // n
        self.cur[BYTES] = F32(rank * (2 * n - 1) + rank * n)

    def handle_all_gather_start(self, instr):
        self.handle_all_gather(instr, skip=0)

    def handle_reduce_scatter(self, instr):
        if not self.gpu:
            return
        n = _num_ranks(instr)
        transferred = sum(_array_leaf_bytes(o.shape) for o in instr.operands)
        rank = transferred // n
        self.cur[BYTES] = F32(rank * n + rank * (2 * n - 1))
        self.cur[FLOPS] = F32(self._reducer_flops(instr))

    def handle_collective_permute(self, instr):
        if self.gpu and instr.operands and instr.operands[0].shape.is_tuple:
            raise CostError("collective-permute of a tuple")

    # --- fusion -------------------------------------------------------------------------------

    def handle_fusion(self, instr):
        body = instr.fused_computation
        if instr.fusion_kind == "kCustom":
            for i in body.instructions:
                if i.opcode == "gather":
                    return self._handle_inner(i, self.handle_gather)
                if i.opcode == "scatter":
                    return self._handle_inner(i, self.handle_scatter)
        self.cur = _Props(self.process_subcomputation(body, again=False))
        self.cur[BYTES] = _ZERO
        self._fusion_output_bytes(instr)
        if self.gpu:
            self._gpu_fusion_utilizations(instr)
        else:
            for i in body.instructions:
                self.props.setdefault(i, _Props())[UTILIZATION] = F32(1)
        limit = _GPU_IMMEDIATE_CONSTANT_MAX_ELEMENTS if self.gpu else _CPU_IMMEDIATE_CONSTANT_MAX_ELEMENTS
        for i in body.instructions:
            if i.opcode == "constant" and i.shape.elements > limit:
                util = min(self.prop(i, UTILIZATION), F32(1))
                self.cur.add(BYTES, F32(F32(self.shape_size(i.shape)) * F32(util)))
        self._fusion_operand_bytes(instr)

    def _handle_inner(self, inner, handler):
        """A custom fusion holding a gather or scatter costs as that instruction, with the
        inner instruction's operands and shapes over the fusion's default costs."""
        handler(inner)

    def _fusion_output_bytes(self, fusion):
        body = fusion.fused_computation
        for subshape, index in fusion.shape.subshapes():
            if not subshape.is_array:
                continue
            root = body.root
            if len(index) == 1 and root.opcode == "tuple":
                root = root.operands[index[0]]
            if root.opcode == "dynamic-update-slice":
                size = self.shape_size(root.operands[1].shape)
                self.cur.add(BYTES, F32(size))
                self.cur[_output_key(index)] = F32(size)
                self.props.setdefault(root, _Props())[_operand_util_key(0)] = _ZERO
                continue
            size = self.shape_size(subshape)
            self.cur.add(BYTES, F32(size))
            self.cur[_output_key(index)] = F32(size)
        if fusion.shape.is_tuple:
            self.cur[_output_key()] = _ZERO
            self._propagate_output(fusion.shape, ())

    def _propagate_output(self, shape, index):
        key = _output_key(index)
        value = self.cur[key]
        if value != 0 or not shape.is_tuple:
            return value
        for i, sub in enumerate(shape.tuple_shapes):
            value = F32(value + self._propagate_output(sub, index + (i,)))
        self.cur[key] = value
        return value

    def _gpu_fusion_utilizations(self, fusion):
        """GpuHloCostAnalysis::FusionCalculateUtilizations: how many times each fused
        instruction is computed, from the root back; fusion FLOPs are the weighted sum."""
        body = fusion.fused_computation
        order = body.post_order()[::-1]
        roots, root_util = {}, {}
        for i in order:
            self.props.setdefault(i, _Props())[UTILIZATION] = _ZERO
            roots[i] = []
            root_util[i] = _ZERO
        root = body.root
        root_util[root] = F32(1)
        roots[root] = [root]
        flops = _ZERO
        for instr in order:
            props = self.props[instr]
            util = _ZERO
            for r in roots[instr]:
                util = F32(util + root_util[r])
            props[UTILIZATION] = util
            flops = F32(flops + F32(util * props[FLOPS]))
            shares = (
                instr.is_elementwise()
                or instr.opcode in ("tuple", "get-tuple-element")
                or (instr.opcode == "bitcast" and instr.operands[0].shape.equal_ignoring_element_type(instr.shape))
            )
            for idx, operand in enumerate(instr.operands):
                if shares:
                    targets = roots[operand]
                    for r in roots[instr]:
                        if r not in targets:
                            targets.append(r)
                else:
                    if operand not in roots[operand]:
                        roots[operand].append(operand)
                    u = F32(util * props[_operand_util_key(idx)])
                    n = operand.shape.elements_recursive
                    u = _ZERO if n == 0 else F32(F32(np.ceil(F32(u * F32(n)))) / F32(n))
                    root_util[operand] = F32(root_util[operand] + u)
        self.cur[FLOPS] = flops

    def _fusion_operand_bytes(self, fusion):
        body = fusion.fused_computation
        params = body.parameters()
        for i, param in enumerate(params):
            if not param.shape.is_tuple:
                size = self._parameter_read_bytes(param)
            else:
                size = 0
                for _, index in param.shape.leaves():
                    node = param
                    for k in index:
                        for user in node.users:
                            if user.opcode == "get-tuple-element" and user.proto.tuple_index == k:
                                node = user
                                break
                    s = self._parameter_read_bytes(node)
                    size += s
                    self.cur[_operand_key(i, index)] = F32(s)
            self.cur.add(BYTES, F32(size))
            self.cur[_operand_key(i)] = F32(size)
            self.cur[_operand_util_key(i)] = self.prop(param, UTILIZATION)

    def _parameter_read_bytes(self, instr):
        if self.gpu:
            util = min(self.prop(instr, UTILIZATION), F32(1))
            return _llround(F32(F32(self.shape_size(instr.shape)) * util))
        return _cpu_parameter_read_bytes(self, instr)

    # --- reading the results ------------------------------------------------------------------

    def costs(self, instr):
        """(model FLOPs, device FLOPs, bytes accessed, HBM read, HBM write) as XProf
        reads them (int64, -1 as 0, breakdown only when bytes > 0)."""
        p = self.props.get(instr)
        if p is None:
            return 0, 0, 0, 0, 0
        flops = _to_int(p[FLOPS])
        model = _valid(flops)
        device = _valid(flops - _to_int(p[DEVICE_FLOPS_ADJUSTMENT]))
        nbytes = _valid(_to_int(p[BYTES]))
        read = written = 0
        if nbytes > 0:
            for i, op in enumerate(instr.operands):
                for leaf, index in op.shape.leaves():
                    if leaf.has_layout and leaf.memory_space == _HBM_SPACE:
                        read += _to_int(p[_operand_key(i, index)])
            for leaf, index in instr.shape.leaves():
                if leaf.has_layout and leaf.memory_space == _HBM_SPACE:
                    written += _to_int(p[_output_key(index)])
            read, written = max(_valid(read), 0), max(_valid(written), 0)
        return model, device, nbytes, read, written


def _valid(cost):
    """XProf's ValidHloCost: -1 (unknown) is 0."""
    return 0 if cost == -1 else cost


def _cpu_parameter_read_bytes(analysis, instr):
    """XLA's base FusionParameterReadBytes: a slice reads what it slices."""
    size, seen = 0, False
    for user in instr.users:
        if user.opcode in ("slice",):
            size += analysis.shape_size(user.shape)
        elif user.opcode == "dynamic-slice":
            if instr is user.operands[0]:
                size += analysis.shape_size(user.shape)
            elif not seen:
                seen = True
                size += analysis.shape_size(instr.shape)
        elif user.opcode == "dynamic-update-slice":
            if instr is not user.operands[0] and not seen:
                seen = True
                size += analysis.shape_size(instr.shape)
        elif user.opcode in ("broadcast", "reshape"):
            size += analysis.shape_size(instr.shape)
        elif not seen:
            seen = True
            size += analysis.shape_size(instr.shape)
    return size


def _post_order_single(root):
    order = []
    post_order_from(root, {}, order)
    return order


def _max_input_bits(instr):
    bits = [op.shape.element_bits for op in instr.operands if op.shape.is_array]
    return max(bits) if bits else 0


def _array_leaf_bytes(shape, skip=None):
    total = 0
    for leaf, index in shape.leaves():
        if index and index[0] == skip:
            continue
        if leaf.is_array:
            total += leaf.byte_size()
    return total


def _transpose_is_bitcast(instr):
    src, dst = instr.operands[0].shape, instr.shape
    if src.element_type != dst.element_type or not (src.has_layout and dst.has_layout):
        return False
    perm = list(instr.proto.dimensions)
    try:
        composed = [perm[i] for i in dst.minor_to_major]
    except IndexError:
        return False
    return composed == list(src.minor_to_major)


def _while_parts(instr):
    """(condition, body) of a while: the proto lists the body's and the condition's
    ids in `called_computation_ids` as XLA writes them (body first)."""
    called = instr.called
    if len(called) != 2:
        raise CostError(f"while {instr.name} without body and condition")
    return called[1], called[0]


def _num_ranks(instr):
    """Ranks of a collective as XLA's GPU cost analysis counts them, with one replica
    and one partition (XProf builds the module without its execution options)."""
    p = instr.proto
    groups = [list(g.replica_ids) for g in p.replica_groups]
    which = p.WhichOneof("optional_collective_device_list")
    if which == "collective_device_list":
        groups = [list(g.replica_ids) for g in p.collective_device_list.replica_groups]
    elif which == "iota_collective_device_list":
        iota = p.iota_collective_device_list
        groups = [[0] * iota.num_devices_per_group for _ in range(iota.num_replica_groups)]
    flattened = p.channel_id > 0 and p.use_global_device_ids
    if flattened and not groups:
        raise CostError(f"{instr.name}: flattened-id collective without replica groups")
    counts = [len(g) for g in groups] or [1]
    return max([1] + counts)


def _gemm_contracting_dims(instr):
    """lhs contracting dimensions from a GEMM's backend config (JSON of
    GpuBackendConfig); a config that does not parse fails the module, as in XLA."""
    text = instr.proto.backend_config
    if not text:
        return []
    try:
        config = json.loads(bytes(text).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CostError(f"backend config of {instr.name} does not parse ({exc})") from None
    if not isinstance(config, dict):
        raise CostError(f"backend config of {instr.name} is not an object")
    gemm = config.get("gemm_backend_config", config.get("gemmBackendConfig")) or {}
    dims = (gemm.get("dot_dimension_numbers", gemm.get("dotDimensionNumbers")) or {}) if isinstance(gemm, dict) else {}
    values = (
        dims.get("lhs_contracting_dimensions", dims.get("lhsContractingDimensions", []))
        if isinstance(dims, dict)
        else []
    )
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError) as exc:
        raise CostError(f"backend config of {instr.name}: bad contracting dimensions ({exc})") from None


def dot_flops(lhs_shape, out_shape, dnums) -> int:
    """2 x output elements x contracted size (XLA's GetDotFlops)."""
    width = 1
    for d in dnums.lhs_contracting_dimensions:
        width *= lhs_shape.dimensions[d]
    return 2 * out_shape.elements * width


def convolution_flops(instr, result_shape) -> int:
    """2 x multiply-adds of a convolution, counting only window positions that land on
    the (dilated, padded) input (XLA's HloCostAnalysis::GetConvolutionFlops)."""
    lhs, rhs = instr.operands[0].shape, instr.operands[1].shape
    d = instr.proto.convolution_dimension_numbers
    dims = list(instr.proto.window.dimensions)
    in_feature = lhs.dimensions[d.input_feature_dimension]
    out_feature = result_shape.dimensions[d.output_feature_dimension]
    batch = lhs.dimensions[d.input_batch_dimension]
    if not dims:
        spatial = [(1, 1, 1, None)]
    else:
        spatial = [
            (
                rhs.dimensions[d.kernel_spatial_dimensions[s]],
                result_shape.dimensions[d.output_spatial_dimensions[s]],
                lhs.dimensions[d.input_spatial_dimensions[s]],
                dims[s],
            )
            for s in range(len(dims))
        ]
    product = 1
    for kernel, out, inp, w in spatial:
        stride = w.stride if w is not None else 1
        pad_lo = w.padding_low if w is not None else 0
        pad_hi = w.padding_high if w is not None else 0
        wdil = w.window_dilation if w is not None else 1
        bdil = w.base_dilation if w is not None else 1
        if (
            inp == out
            and kernel == out
            and inp == bdil
            and wdil == 1
            and max(1, inp - 1) == stride
            and pad_lo == 0
            and pad_hi == 0
        ):
            product *= inp
            continue
        if (
            inp == 1
            and kernel == out
            and wdil == 1
            and bdil == 1
            and stride == 1
            and pad_hi == out - 1
            and pad_lo == out - 1
        ):
            product *= out
            continue
        count = 0
        for k in range(kernel):
            if stride == 1 and bdil == 1:
                base = pad_lo - k * wdil
                count += max(min(inp + base, out) - max(base, 0), 0)
                continue
            o = np.arange(out, dtype=np.int64)
            u = o * stride - pad_lo + k * wdil
            if bdil > 1:
                lhs_index = np.trunc(u / bdil).astype(np.int64)
                ok = u == lhs_index * bdil
            else:
                lhs_index = u
                ok = np.ones(out, dtype=bool)
            ok &= (lhs_index >= 0) & (lhs_index < inp)
            count += int(ok.sum())
        product *= count
    fgc = instr.proto.feature_group_count or 1
    bgc = instr.proto.batch_group_count or 1
    return 2 * (in_feature // fgc) * out_feature * (batch // bgc) * product


_HANDLERS = {
    "parameter": _Analysis.handle_parameter,
    "constant": _Analysis.handle_parameter,
    "get-tuple-element": _Analysis.handle_get_tuple_element,
    "bitcast": _Analysis.handle_bitcast,
    "domain": _Analysis.handle_domain,
    "after-all": _Analysis.handle_domain,
    "add-dependency": _Analysis.handle_domain,
    "transpose": _Analysis.handle_transpose,
    "tuple": _Analysis.handle_tuple,
    "slice": _Analysis.handle_slice,
    "dynamic-slice": _Analysis.handle_dynamic_slice,
    "dynamic-update-slice": _Analysis.handle_dynamic_update_slice,
    "gather": _Analysis.handle_gather,
    "scatter": _Analysis.handle_scatter,
    "infeed": _Analysis.handle_infeed,
    "outfeed": _Analysis.handle_outfeed,
    "concatenate": _Analysis.handle_concatenate,
    "dot": _Analysis.handle_dot,
    "scaled-dot": _Analysis.handle_dot,
    "ragged-dot": _Analysis.handle_ragged_dot,
    "convolution": _Analysis.handle_convolution,
    "fft": _Analysis.handle_fft,
    "triangular-solve": _Analysis.handle_triangular_solve,
    "cholesky": _Analysis.handle_cholesky,
    "sort": _Analysis.handle_sort,
    "rng": _Analysis.handle_rng,
    "rng-bit-generator": _Analysis.handle_rng_bit_generator,
    "map": _Analysis.handle_map,
    "reduce": _Analysis.handle_reduce,
    "scan": _Analysis.handle_scan,
    "reduce-window": _Analysis.handle_reduce_window,
    "select-and-scatter": _Analysis.handle_select_and_scatter,
    "while": _Analysis.handle_while,
    "call": _Analysis.handle_call,
    "conditional": _Analysis.handle_conditional,
    "async-start": _Analysis.handle_async_start,
    "custom-call": _Analysis.handle_custom_call,
    "all-reduce": _Analysis.handle_all_reduce,
    "all-reduce-start": _Analysis.handle_all_reduce_start,
    "all-gather": _Analysis.handle_all_gather,
    "all-gather-start": _Analysis.handle_all_gather_start,
    "reduce-scatter": _Analysis.handle_reduce_scatter,
    "collective-permute": _Analysis.handle_collective_permute,
    "collective-permute-start": _Analysis.handle_collective_permute,
    "fusion": _Analysis.handle_fusion,
}

COST_COLUMNS = [
    "name",
    "computation",
    "opcode",
    "flops",
    "model_flops",
    "bytes_accessed",
    "hbm_read_bytes",
    "hbm_write_bytes",
]


class ModuleCosts:
    """Costs of every instruction of one module, as XProf reads them for one execution.

    `table`: DataFrame indexed by instruction name (the first instruction of a name,
    as XProf looks ops up) with computation, opcode, flops (device FLOPs: 8-bit inputs
    halved, 4-bit quartered, as XProf normalises), model_flops, bytes_accessed,
    hbm_read_bytes, hbm_write_bytes. `error` says why the module could not be costed
    (then every cost is 0, as in XProf).
    """

    def __init__(self, rows, error=""):
        # (name, computation, opcode, flops, model_flops, bytes_accessed, hbm_read_bytes,
        # hbm_write_bytes) per instruction, the first of each name. The DataFrame is made
        # when asked for: the ops' lookups (`of`) need only these, and a DataFrame per
        # module costs 0.7 ms, which a run of 16 modules notices.
        self._rows = rows
        self.error = error
        self._by_name = None  # name -> the `of` tuple, made at the first lookup

    @cached_property
    def table(self):
        """DataFrame of the costs, indexed by instruction name (see the class)."""
        return pd.DataFrame(self._rows, columns=COST_COLUMNS).set_index("name")

    def of(self, name):
        """(flops, model_flops, bytes_accessed, hbm_read_bytes, hbm_write_bytes) of one op."""
        if self._by_name is None:
            self._by_name = {row[0]: tuple(int(v) for v in row[3:]) for row in self._rows}
        return self._by_name.get(name, (0, 0, 0, 0, 0))


def module_costs(module: HloModule, mode="gpu") -> ModuleCosts:
    """XLA's cost analysis of `module` (an io.hlo.HloModule), per instruction.

    mode "gpu" is XProf's GPU cost analysis (every number equal to XProf 2.24.2's);
    "cpu" XLA's base rules (for XLA:CPU thunks, where XProf has no op profile).
    """
    if mode not in ("gpu", "cpu"):
        raise ValueError(f"mode must be 'gpu' or 'cpu', not {mode!r}")
    analysis = _Analysis(mode)
    error = ""
    try:
        if module.entry is not None:
            analysis.accept(module.entry)
    except (CostError, IndexError, KeyError, AttributeError, ZeroDivisionError, TypeError, ValueError) as exc:
        error = f"XLA's cost analysis fails on module {module.name}: {exc}"
        analysis = _Analysis(mode)
    rows = []
    seen = set()
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.name in seen:
                continue
            seen.add(instr.name)
            model, device, nbytes, read, written = analysis.costs(instr)
            rows.append((instr.name, comp.name, instr.opcode, device, model, nbytes, read, written))
    return ModuleCosts(rows, error)


def instruction_costs(module: HloModule, mode="gpu") -> dict:
    """{instruction: (model FLOPs, device FLOPs, bytes, HBM read, HBM write)} for callers
    that hold instructions (the graph viewer)."""
    costs = module_costs(module, mode)
    return {name: costs.of(name) for name in costs.table.index}
