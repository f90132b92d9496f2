"""HLO modules shaped as XLA:GPU compiles them, for the cost-model differential tests.

Each module is HLO text that jaxlib's XLA parses (with layouts, as compiled modules
carry them). Together they cover every opcode family XLA's cost analysis has a rule
for: elementwise ops of every element type, fusions of each kind (loop, input, output,
custom; multi-output, in-place dynamic-update-slice roots, large constants, slices and
broadcasts inside), data movement, dots and convolutions (strides, padding, dilations,
feature groups), cuBLASLt / cuBLAS / cuDNN custom calls, reductions, control flow and
collectives. `random_fusion_modules` adds seeded random fusions for the utilisation
rule.
"""

from __future__ import annotations

import random

import numpy as np

from xprof_widgets.io import schema

ELEMENTWISE_UNARY_F = [
    "abs",
    "cbrt",
    "ceil",
    "cosine",
    "erf",
    "exponential",
    "exponential-minus-one",
    "floor",
    "log",
    "log-plus-one",
    "logistic",
    "negate",
    "round-nearest-afz",
    "round-nearest-even",
    "rsqrt",
    "sign",
    "sine",
    "sqrt",
    "tan",
    "tanh",
]
ELEMENTWISE_BINARY_F = ["add", "atan2", "divide", "maximum", "minimum", "multiply", "power", "remainder", "subtract"]
ELEMENTWISE_UNARY_I = ["abs", "negate", "not", "sign", "popcnt", "count-leading-zeros"]
ELEMENTWISE_BINARY_I = (
    "add divide maximum minimum multiply remainder subtract and or xor shift-left "
    "shift-right-arithmetic shift-right-logical power"
).split()


def _elementwise_module(dt):
    is_float = dt[0] in "fbc"
    unary = ELEMENTWISE_UNARY_F if is_float else ELEMENTWISE_UNARY_I
    binary = ELEMENTWISE_BINARY_F if is_float else ELEMENTWISE_BINARY_I
    if dt.startswith("c"):
        unary = ["exponential", "log", "sqrt", "rsqrt", "tanh", "sine", "cosine", "negate"]
        binary = ["add", "multiply", "divide", "subtract", "power"]
    lines = []
    for op in unary:
        lines.append(f"  %u_{op.replace('-', '_')} = {dt}[1000]{{0}} {op}(%x)")
    for op in binary:
        lines.append(f"  %b_{op.replace('-', '_')} = {dt}[1000]{{0}} {op}(%x, %y)")
    if not dt.startswith("c"):
        lines.append("  %cmp = pred[1000]{0} compare(%x, %y), direction=LT")
        lines.append(f"  %sel = {dt}[1000]{{0}} select(%cmp, %x, %y)")
        lines.append(f"  %clp = {dt}[1000]{{0}} clamp(%x, %y, %x)")
    if is_float and not dt.startswith("c"):
        lines.append("  %fin = pred[1000]{0} is-finite(%x)")
        lines.append(f"  %rp = {dt}[1000]{{0}} reduce-precision(%x), exponent_bits=5, mantissa_bits=7")
    lines.append("  %cv = f32[1000]{0} convert(%x)" if dt != "f32" else "  %cv = s32[1000]{0} convert(%x)")
    lines.append(f"  %cp = {dt}[1000]{{0}} copy(%x)")
    body = "\n".join(lines)
    return f"""HloModule elementwise_{dt}

ENTRY %main (x: {dt}[1000], y: {dt}[1000]) -> {dt}[1000] {{
  %x = {dt}[1000]{{0}} parameter(0)
  %y = {dt}[1000]{{0}} parameter(1)
{body}
  ROOT %r = {dt}[1000]{{0}} add(%x, %y)
}}
"""


FUSIONS = """HloModule fusions

%fused_convert (p0: bf16[8,256,128], p1: bf16[8,256,128]) -> bf16[8,256,128] {
  %p0 = bf16[8,256,128]{2,1,0} parameter(0)
  %c0 = f32[8,256,128]{2,1,0} convert(%p0)
  %p1 = bf16[8,256,128]{2,1,0} parameter(1)
  %c1 = f32[8,256,128]{2,1,0} convert(%p1)
  %m = f32[8,256,128]{2,1,0} multiply(%c0, %c1)
  ROOT %r = bf16[8,256,128]{2,1,0} convert(%m)
}

%fused_sin (p0: bf16[4096]) -> bf16[4096] {
  %p0 = bf16[4096]{0} parameter(0)
  %c0 = f32[4096]{0} convert(%p0)
  %s = f32[4096]{0} sine(%c0)
  ROOT %r = bf16[4096]{0} convert(%s)
}

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%fused_reduce (p0: bf16[64,1024]) -> f32[64] {
  %p0 = bf16[64,1024]{1,0} parameter(0)
  %c = f32[64,1024]{1,0} convert(%p0)
  %z = f32[] constant(0)
  ROOT %r = f32[64]{0} reduce(%c, %z), dimensions={1}, to_apply=%add_f32
}

%fused_bcast (p0: f32[1024], p1: f32[64,1024]) -> f32[64,1024] {
  %p0 = f32[1024]{0} parameter(0)
  %e = f32[1024]{0} exponential(%p0)
  %b = f32[64,1024]{1,0} broadcast(%e), dimensions={1}
  %p1 = f32[64,1024]{1,0} parameter(1)
  ROOT %a = f32[64,1024]{1,0} add(%b, %p1)
}

%fused_slice (p0: f32[1024]) -> f32[16] {
  %p0 = f32[1024]{0} parameter(0)
  %s = f32[16]{0} slice(%p0), slice={[0:16]}
  ROOT %e = f32[16]{0} exponential(%s)
}

%fused_multi (p0: f32[512], p1: f32[512]) -> (f32[512], f32[512]) {
  %p0 = f32[512]{0} parameter(0)
  %p1 = f32[512]{0} parameter(1)
  %a = f32[512]{0} add(%p0, %p1)
  %l = f32[512]{0} log(%a)
  %t = f32[512]{0} tanh(%a)
  ROOT %r = (f32[512]{0}, f32[512]{0}) tuple(%l, %t)
}

%fused_dus (p0: f32[1024,64], p1: f32[1,64], p2: s32[]) -> f32[1024,64] {
  %p0 = f32[1024,64]{1,0} parameter(0)
  %p1 = f32[1,64]{1,0} parameter(1)
  %n = f32[1,64]{1,0} negate(%p1)
  %p2 = s32[] parameter(2)
  %z = s32[] constant(0)
  ROOT %d = f32[1024,64]{1,0} dynamic-update-slice(%p0, %n, %p2, %z)
}

%fused_const (p0: f32[16]) -> f32[16] {
  %p0 = f32[16]{0} parameter(0)
  %k = f32[16]{0} constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
  ROOT %m = f32[16]{0} multiply(%p0, %k)
}

%fused_small_const (p0: f32[4]) -> f32[4] {
  %p0 = f32[4]{0} parameter(0)
  %k = f32[4]{0} constant({1, 2, 3, 4})
  ROOT %m = f32[4]{0} multiply(%p0, %k)
}

%fused_dot (p0: f32[128,256], p1: f32[256,64], p2: f32[64]) -> f32[128,64] {
  %p0 = f32[128,256]{1,0} parameter(0)
  %p1 = f32[256,64]{1,0} parameter(1)
  %d = f32[128,64]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %p2 = f32[64]{0} parameter(2)
  %b = f32[128,64]{1,0} broadcast(%p2), dimensions={1}
  ROOT %a = f32[128,64]{1,0} add(%d, %b)
}

%fused_gather (p0: f32[1000,64], p1: s32[32,1]) -> f32[32,64] {
  %p0 = f32[1000,64]{1,0} parameter(0)
  %p1 = s32[32,1]{1,0} parameter(1)
  ROOT %g = f32[32,64]{1,0} gather(%p0, %p1), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
}

%fused_transpose (p0: f32[64,128]) -> f32[128,64] {
  %p0 = f32[64,128]{1,0} parameter(0)
  %t = f32[128,64]{1,0} transpose(%p0), dimensions={1,0}
  ROOT %n = f32[128,64]{1,0} negate(%t)
}

%fused_bitcast (p0: f32[64,128]) -> f32[8192] {
  %p0 = f32[64,128]{1,0} parameter(0)
  %e = f32[64,128]{1,0} exponential(%p0)
  %b = f32[8192]{0} bitcast(%e)
  ROOT %s = f32[8192]{0} sqrt(%b)
}

%fused_concat (p0: f32[64,33], p1: f32[64,17]) -> f32[64,50] {
  %p0 = f32[64,33]{1,0} parameter(0)
  %p1 = f32[64,17]{1,0} parameter(1)
  ROOT %c = f32[64,50]{1,0} concatenate(%p0, %p1), dimensions={1}
}

%fused_twice (p0: f32[256]) -> (f32[], f32[256,4]) {
  %p0 = f32[256]{0} parameter(0)
  %e = f32[256]{0} exponential(%p0)
  %z = f32[] constant(0)
  %r = f32[] reduce(%e, %z), dimensions={0}, to_apply=%add_f32
  %b = f32[256,4]{1,0} broadcast(%e), dimensions={0}
  ROOT %t = (f32[], f32[256,4]{1,0}) tuple(%r, %b)
}

%fused_dyn_slice (p0: f32[4096,32], p1: s32[]) -> f32[8,32] {
  %p0 = f32[4096,32]{1,0} parameter(0)
  %p1 = s32[] parameter(1)
  %z = s32[] constant(0)
  %ds = f32[8,32]{1,0} dynamic-slice(%p0, %p1, %z), dynamic_slice_sizes={8,32}
  ROOT %l = f32[8,32]{1,0} log(%ds)
}

%fused_pad (p0: f32[100]) -> f32[110] {
  %p0 = f32[100]{0} parameter(0)
  %z = f32[] constant(0)
  %p = f32[110]{0} pad(%p0, %z), padding=5_5
  ROOT %n = f32[110]{0} negate(%p)
}

%fused_iota () -> s32[1000] {
  ROOT %i = s32[1000]{0} iota(), iota_dimension=0
}

ENTRY %main (a: bf16[8,256,128], b: bf16[8,256,128], c: bf16[4096], d: bf16[64,1024], e: f32[1024], f: f32[64,1024], g: f32[512], h: f32[1024,64], i: f32[1,64], j: s32[], k: f32[16], l: f32[4], m: f32[128,256], n: f32[256,64], o: f32[64], p: f32[1000,64], q: s32[32,1], r: f32[64,128], s: f32[64,33], t: f32[64,17], u: f32[256], v: f32[4096,32], w: f32[100]) -> f32[1024,64] {
  %a = bf16[8,256,128]{2,1,0} parameter(0)
  %b = bf16[8,256,128]{2,1,0} parameter(1)
  %c = bf16[4096]{0} parameter(2)
  %d = bf16[64,1024]{1,0} parameter(3)
  %e = f32[1024]{0} parameter(4)
  %f = f32[64,1024]{1,0} parameter(5)
  %g = f32[512]{0} parameter(6)
  %h = f32[1024,64]{1,0} parameter(7)
  %i = f32[1,64]{1,0} parameter(8)
  %j = s32[] parameter(9)
  %k = f32[16]{0} parameter(10)
  %l = f32[4]{0} parameter(11)
  %m = f32[128,256]{1,0} parameter(12)
  %n = f32[256,64]{1,0} parameter(13)
  %o = f32[64]{0} parameter(14)
  %p = f32[1000,64]{1,0} parameter(15)
  %q = s32[32,1]{1,0} parameter(16)
  %r = f32[64,128]{1,0} parameter(17)
  %s = f32[64,33]{1,0} parameter(18)
  %t = f32[64,17]{1,0} parameter(19)
  %u = f32[256]{0} parameter(20)
  %v = f32[4096,32]{1,0} parameter(21)
  %w = f32[100]{0} parameter(22)
  %loop_convert_fusion = bf16[8,256,128]{2,1,0} fusion(%a, %b), kind=kLoop, calls=%fused_convert
  %sin_fusion = bf16[4096]{0} fusion(%c), kind=kLoop, calls=%fused_sin
  %input_reduce_fusion = f32[64]{0} fusion(%d), kind=kInput, calls=%fused_reduce
  %bcast_fusion = f32[64,1024]{1,0} fusion(%e, %f), kind=kLoop, calls=%fused_bcast
  %slice_fusion = f32[16]{0} fusion(%e), kind=kLoop, calls=%fused_slice
  %multi_fusion = (f32[512]{0}, f32[512]{0}) fusion(%g, %g), kind=kLoop, calls=%fused_multi
  %const_fusion = f32[16]{0} fusion(%k), kind=kLoop, calls=%fused_const
  %small_const_fusion = f32[4]{0} fusion(%l), kind=kLoop, calls=%fused_small_const
  %dot_fusion = f32[128,64]{1,0} fusion(%m, %n, %o), kind=kOutput, calls=%fused_dot
  %gather_fusion = f32[32,64]{1,0} fusion(%p, %q), kind=kCustom, calls=%fused_gather
  %transpose_fusion = f32[128,64]{1,0} fusion(%r), kind=kLoop, calls=%fused_transpose
  %bitcast_fusion = f32[8192]{0} fusion(%r), kind=kLoop, calls=%fused_bitcast
  %concat_fusion = f32[64,50]{1,0} fusion(%s, %t), kind=kLoop, calls=%fused_concat
  %twice_fusion = (f32[], f32[256,4]{1,0}) fusion(%u), kind=kInput, calls=%fused_twice
  %dyn_slice_fusion = f32[8,32]{1,0} fusion(%v, %j), kind=kLoop, calls=%fused_dyn_slice
  %pad_fusion = f32[110]{0} fusion(%w), kind=kLoop, calls=%fused_pad
  %iota_fusion = s32[1000]{0} fusion(), kind=kLoop, calls=%fused_iota
  ROOT %dus_fusion = f32[1024,64]{1,0} fusion(%h, %i, %j), kind=kLoop, calls=%fused_dus
}
"""

DATA_MOVEMENT = """HloModule data_movement

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[64,128], i: s32[], idx: s32[32,1], upd: f32[32,128], y: f32[64,128]) -> (f32[64,128], f32[16,128]) {
  %x = f32[64,128]{1,0} parameter(0)
  %i = s32[] parameter(1)
  %idx = s32[32,1]{1,0} parameter(2)
  %upd = f32[32,128]{1,0} parameter(3)
  %y = f32[64,128]{1,0} parameter(4)
  %z = s32[] constant(0)
  %sl = f32[16,128]{1,0} slice(%x), slice={[0:32:2], [0:128]}
  %ds = f32[8,128]{1,0} dynamic-slice(%x, %i, %z), dynamic_slice_sizes={8,128}
  %small = f32[8,128]{1,0} slice(%y), slice={[0:8], [0:128]}
  %dus = f32[64,128]{1,0} dynamic-update-slice(%x, %small, %i, %z)
  %ga = f32[32,128]{1,0} gather(%x, %idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,128}
  %sc = f32[64,128]{1,0} scatter(%x, %idx, %upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add_f32
  %zf = f32[] constant(0)
  %pd = f32[70,130]{1,0} pad(%x, %zf), padding=3_3x1_1
  %tr = f32[128,64]{1,0} transpose(%x), dimensions={1,0}
  %trb = f32[128,64]{0,1} transpose(%x), dimensions={1,0}
  %rs = f32[8192]{0} reshape(%x)
  %bc = f32[4,64,128]{2,1,0} broadcast(%x), dimensions={1,2}
  %io = s32[64,128]{1,0} iota(), iota_dimension=1
  %cc = f32[128,128]{1,0} concatenate(%x, %y), dimensions={0}
  %cc1 = f32[64,256]{1,0} concatenate(%x, %y), dimensions={1}
  %rv = f32[64,128]{1,0} reverse(%x), dimensions={0}
  %cp = f32[64,128]{0,1} copy(%x)
  %bt = f32[128,64]{1,0} bitcast(%x)
  %tu = (f32[64,128]{1,0}, f32[64,128]{1,0}) tuple(%x, %y)
  %gte = f32[64,128]{1,0} get-tuple-element(%tu), index=1
  %bcv = s32[64,128]{1,0} bitcast-convert(%x)
  %bcv2 = f16[64,128,2]{2,1,0} bitcast-convert(%x)
  ROOT %out = (f32[64,128]{1,0}, f32[16,128]{1,0}) tuple(%dus, %sl)
}
"""

MATH = """HloModule math

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%max_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] maximum(%a, %b)
}

%ge_f32 (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = pred[] compare(%a, %b), direction=GE
}

%argmax (a: f32[], b: s32[], c: f32[], d: s32[]) -> (f32[], s32[]) {
  %a = f32[] parameter(0)
  %b = s32[] parameter(1)
  %c = f32[] parameter(2)
  %d = s32[] parameter(3)
  %g = pred[] compare(%a, %c), direction=GE
  %m = f32[] select(%g, %a, %c)
  %i = s32[] select(%g, %b, %d)
  ROOT %t = (f32[], s32[]) tuple(%m, %i)
}

%lt_f32 (a: f32[], b: f32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = pred[] compare(%a, %b), direction=LT
}

%mul_map (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %m = f32[] multiply(%a, %b)
  ROOT %e = f32[] exponential(%m)
}

ENTRY %main (x: f32[64,128], w: f32[128,32], bx: f32[4,64,128], bw: f32[4,128,16], img: f32[2,32,32,16], k: f32[3,3,16,32], dk: f32[3,3,4,32], cx: c64[8,256], si: s32[64,128], a: f32[4,16,16], b: f32[4,16,8], d: f64[256], h: f16[256], bf: bf16[256]) -> f32[64,32] {
  %x = f32[64,128]{1,0} parameter(0)
  %w = f32[128,32]{1,0} parameter(1)
  %bx = f32[4,64,128]{2,1,0} parameter(2)
  %bw = f32[4,128,16]{2,1,0} parameter(3)
  %img = f32[2,32,32,16]{3,2,1,0} parameter(4)
  %k = f32[3,3,16,32]{3,2,1,0} parameter(5)
  %dk = f32[3,3,4,32]{3,2,1,0} parameter(6)
  %cx = c64[8,256]{1,0} parameter(7)
  %si = s32[64,128]{1,0} parameter(8)
  %a = f32[4,16,16]{2,1,0} parameter(9)
  %b = f32[4,16,8]{2,1,0} parameter(10)
  %d = f64[256]{0} parameter(11)
  %h = f16[256]{0} parameter(12)
  %bf = bf16[256]{0} parameter(13)
  %dot = f32[64,32]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %bdot = f32[4,64,16]{2,1,0} dot(%bx, %bw), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %conv_same = f32[2,32,32,32]{3,2,1,0} convolution(%img, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %conv_valid_stride = f32[2,15,15,32]{3,2,1,0} convolution(%img, %k), window={size=3x3 stride=2x2}, dim_labels=b01f_01io->b01f
  %conv_dilated = f32[2,28,28,32]{3,2,1,0} convolution(%img, %k), window={size=3x3 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  %conv_lhs_dilated = f32[2,65,65,32]{3,2,1,0} convolution(%img, %k), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f
  %conv_grouped = f32[2,30,30,32]{3,2,1,0} convolution(%img, %dk), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=4
  %fft = c64[8,256]{1,0} fft(%cx), fft_type=FFT, fft_length={256}
  %zf = f32[] constant(0)
  %red = f32[64]{0} reduce(%x, %zf), dimensions={1}, to_apply=%add_f32
  %red_all = f32[] reduce(%x, %zf), dimensions={0,1}, to_apply=%add_f32
  %zi = s32[] constant(0)
  %vred = (f32[64]{0}, s32[64]{0}) reduce(%x, %si, %zf, %zi), dimensions={1}, to_apply=%argmax
  %rw = f32[64,63]{1,0} reduce-window(%x, %zf), window={size=1x2 stride=1x2}, to_apply=%max_f32
  %rw_cum = f32[64,128]{1,0} reduce-window(%x, %zf), window={size=1x255 pad=0_0x127_127}, to_apply=%add_f32
  %srt = f32[64,128]{1,0} sort(%x), dimensions={1}, to_apply=%lt_f32
  %mp = f32[64,128]{1,0} map(%x, %x), dimensions={0,1}, to_apply=%mul_map
  %sas = f32[64,128]{1,0} select-and-scatter(%x, %rw, %zf), window={size=1x2 stride=1x2}, select=%ge_f32, scatter=%add_f32
  %ts = f32[4,16,8]{2,1,0} triangular-solve(%a, %b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  %ch = f32[4,16,16]{2,1,0} cholesky(%a), lower=true
  %st = u64[2]{0} constant({1, 2})
  %rbg = (u64[2]{0}, u32[64,128]{1,0}) rng-bit-generator(%st), algorithm=rng_default
  %d_add = f64[256]{0} add(%d, %d)
  %h_exp = f16[256]{0} exponential(%h)
  %bf_exp = bf16[256]{0} exponential(%bf)
  ROOT %r = f32[64,32]{1,0} negate(%dot)
}
"""

CONTROL = """HloModule control

%body (p: (s32[], f32[256])) -> (s32[], f32[256]) {
  %p = (s32[], f32[256]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %one = s32[] constant(1)
  %i1 = s32[] add(%i, %one)
  %v = f32[256]{0} get-tuple-element(%p), index=1
  %e = f32[256]{0} exponential(%v)
  ROOT %t = (s32[], f32[256]{0}) tuple(%i1, %e)
}

%cond (p: (s32[], f32[256])) -> pred[] {
  %p = (s32[], f32[256]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%callee (a: f32[256]) -> f32[256] {
  %a = f32[256]{0} parameter(0)
  ROOT %l = f32[256]{0} log(%a)
}

%true_branch (a: f32[256]) -> f32[256] {
  %a = f32[256]{0} parameter(0)
  ROOT %s = f32[256]{0} sine(%a)
}

%false_branch (a: f32[256]) -> f32[256] {
  %a = f32[256]{0} parameter(0)
  %c = f32[256]{0} cosine(%a)
  ROOT %t = f32[256]{0} tanh(%c)
}

ENTRY %main (x: f32[256], pr: pred[]) -> f32[256] {
  %x = f32[256]{0} parameter(0)
  %pr = pred[] parameter(1)
  %z = s32[] constant(0)
  %init = (s32[], f32[256]{0}) tuple(%z, %x)
  %wh = (s32[], f32[256]{0}) while(%init), condition=%cond, body=%body
  %res = f32[256]{0} get-tuple-element(%wh), index=1
  %cl = f32[256]{0} call(%res), to_apply=%callee
  ROOT %cd = f32[256]{0} conditional(%pr, %cl, %cl), true_computation=%true_branch, false_computation=%false_branch
}
"""

COLLECTIVES = """HloModule collectives, replica_count=1

%add_f32 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[1024], y: f32[256]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  %y = f32[256]{0} parameter(1)
  %ar = f32[1024]{0} all-reduce(%x), replica_groups={}, to_apply=%add_f32
  %ar4 = f32[1024]{0} all-reduce(%x), channel_id=1, replica_groups={{0,1,2,3}}, to_apply=%add_f32
  %ag = f32[1024]{0} all-gather(%y), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  %rsc = f32[256]{0} reduce-scatter(%x), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%add_f32
  %a2a = f32[1024]{0} all-to-all(%x), replica_groups={{0,1}}, dimensions={0}
  %cpm = f32[1024]{0} collective-permute(%x), source_target_pairs={{0,1},{1,0}}
  %ars = f32[1024]{0} all-reduce-start(%x), replica_groups={}, to_apply=%add_f32
  %ard = f32[1024]{0} all-reduce-done(%ars)
  ROOT %r = f32[1024]{0} add(%ard, %ar)
}
"""

CUSTOM_CALLS = """HloModule custom_calls

ENTRY %main (a: bf16[512,256], b: bf16[256,1024], c: s8[256,256], d: s8[256,256], img: f32[2,16,16,8], k: f32[3,3,8,16], x: f32[64]) -> bf16[512,1024] {
  %a = bf16[512,256]{1,0} parameter(0)
  %b = bf16[256,1024]{1,0} parameter(1)
  %c = s8[256,256]{1,0} parameter(2)
  %d = s8[256,256]{1,0} parameter(3)
  %img = f32[2,16,16,8]{3,2,1,0} parameter(4)
  %k = f32[3,3,8,16]{3,2,1,0} parameter(5)
  %x = f32[64]{0} parameter(6)
  %lt = (bf16[512,1024]{1,0}, s8[4194304]{0}) custom-call(%a, %b), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"precision_config":{"operand_precision":["DEFAULT","DEFAULT"],"algorithm":"ALG_UNSET"},"epilogue":"DEFAULT","grad_x":false,"grad_y":false,"damax_output":false}}
  %lt_out = bf16[512,1024]{1,0} get-tuple-element(%lt), index=0
  %legacy = (bf16[512,1024]{1,0}, s8[4194304]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"epilogue":"DEFAULT"}}
  %int8 = (s32[256,256]{1,0}, s8[65536]{0}) custom-call(%c, %d), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"alpha_real":1,"beta":0,"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]},"alpha_imag":0,"epilogue":"DEFAULT"}}
  %conv = (f32[2,16,16,16]{3,2,1,0}, u8[0]{0}) custom-call(%img, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, custom_call_target="__cudnn$convForward", backend_config={"cudnn_conv_backend_config":{"conv_result_scale":1,"activation_mode":"kNone","side_input_scale":0,"leakyrelu_alpha":0}}
  %unknown = f32[64]{0} custom-call(%x), custom_call_target="my_kernel"
  %arr = bf16[512,1024]{1,0} custom-call(%a, %b), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"]}}}
  ROOT %r = bf16[512,1024]{1,0} add(%lt_out, %arr)
}
"""

# A module whose GEMM config does not parse: XLA's analysis fails, XProf costs every op 0.
BAD_CONFIG = """HloModule bad_config

ENTRY %main (a: f32[64,64], b: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64]{1,0} parameter(0)
  %b = f32[64,64]{1,0} parameter(1)
  %g = (f32[64,64]{1,0}, s8[1024]{0}) custom-call(%a, %b), custom_call_target="__cublas$lt$matmul", backend_config={"gemm_backend_config": [}
  %o = f32[64,64]{1,0} get-tuple-element(%g), index=0
  ROOT %e = f32[64,64]{1,0} exponential(%o)
}
"""


def modules():
    """{name: HLO text} of the fixed corpus."""
    out = {
        f"elementwise_{dt}": _elementwise_module(dt)
        for dt in ("f32", "f16", "bf16", "f64", "s32", "s8", "u8", "s64", "u32", "c64")
    }
    out.update(
        {
            "fusions": FUSIONS,
            "data_movement": DATA_MOVEMENT,
            "math": MATH,
            "control": CONTROL,
            "collectives": COLLECTIVES,
            "custom_calls": CUSTOM_CALLS,
        }
    )
    return out


_RANDOM_UNARY = ["exponential", "log", "negate", "tanh", "sine", "sqrt", "abs", "convert_bf16"]
_RANDOM_BINARY = ["add", "multiply", "divide", "maximum", "subtract", "power"]


def random_fusion_module(seed, n_ops=12):
    """A loop or input fusion of random elementwise ops, broadcasts, slices, reduces and
    multi-output roots over f32 (seeded, reproducible), called from an entry computation."""
    rng = random.Random(seed)
    n = rng.choice([64, 100, 1000, 4097])
    lines = [
        f"  %p0 = f32[{n}]{{0}} parameter(0)",
        f"  %p1 = f32[{n}]{{0}} parameter(1)",
        "  %zero = f32[] constant(0)",
    ]
    vectors = ["%p0", "%p1"]
    scalars = []
    for i in range(n_ops):
        kind = rng.random()
        name = f"%v{i}"
        if kind < 0.35:
            op = rng.choice(_RANDOM_UNARY)
            src = rng.choice(vectors)
            if op == "convert_bf16":
                lines.append(f"  {name}_h = bf16[{n}]{{0}} convert({src})")
                lines.append(f"  {name} = f32[{n}]{{0}} convert({name}_h)")
            else:
                lines.append(f"  {name} = f32[{n}]{{0}} {op}({src})")
            vectors.append(name)
        elif kind < 0.7:
            op = rng.choice(_RANDOM_BINARY)
            a, b = rng.choice(vectors), rng.choice(vectors)
            lines.append(f"  {name} = f32[{n}]{{0}} {op}({a}, {b})")
            vectors.append(name)
        elif kind < 0.8:
            src = rng.choice(vectors)
            k = rng.randint(1, n)
            lines.append(f"  {name}_s = f32[{k}]{{0}} slice({src}), slice={{[0:{k}]}}")
            lines.append(f"  {name}_r = f32[] reduce({name}_s, %zero), dimensions={{0}}, to_apply=%add")
            scalars.append(f"{name}_r")
        elif kind < 0.9:
            src = rng.choice(vectors)
            lines.append(f"  {name} = f32[] reduce({src}, %zero), dimensions={{0}}, to_apply=%add")
            scalars.append(name)
        elif scalars:
            s = rng.choice(scalars)
            lines.append(f"  {name}_b = f32[{n}]{{0}} broadcast({s}), dimensions={{}}")
            lines.append(f"  {name} = f32[{n}]{{0}} multiply({name}_b, {rng.choice(vectors)})")
            vectors.append(name)
    outs = (
        [vectors[-1]]
        + ([scalars[-1]] if scalars and rng.random() < 0.5 else [])
        + ([vectors[len(vectors) // 2]] if rng.random() < 0.3 and len(vectors) > 3 else [])
    )
    outs = list(dict.fromkeys(outs))
    shapes = [f"f32[{n}]{{0}}" if o in vectors else "f32[]" for o in outs]
    if len(outs) == 1:
        root_shape = shapes[0]
        lines.append(
            f"  ROOT %root = {root_shape} copy({outs[0]})"
            if outs[0] in ("%p0", "%p1")
            else f"  ROOT %root = {root_shape} negate({outs[0]})"
        )
    else:
        root_shape = "(" + ", ".join(shapes) + ")"
        lines.append(f"  ROOT %root = {root_shape} tuple({', '.join(outs)})")
    kind = "kInput" if scalars else "kLoop"
    return f"""HloModule random_{seed}

%add (a: f32[], b: f32[]) -> f32[] {{
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}}

%fused (p0: f32[{n}], p1: f32[{n}]) -> {root_shape.replace("{0}", "")} {{
{chr(10).join(lines)}
}}

ENTRY %main (x: f32[{n}], y: f32[{n}]) -> {root_shape.replace("{0}", "")} {{
  %x = f32[{n}]{{0}} parameter(0)
  %y = f32[{n}]{{0}} parameter(1)
  ROOT %fusion = {root_shape} fusion(%x, %y), kind={kind}, calls=%fused
}}
"""


def layered_hlo_proto(n=10_000, fusions=200, seed=0):
    """A serialized HloProto of `n` instructions: a layered random DAG of adds and multiplies
    over 16 parameters, `fusions` of them fusions with a 4-instruction fused computation."""
    rng = np.random.default_rng(seed)
    proto = schema.message_class("xla.HloProto")()
    mod = proto.hlo_module
    mod.name = "big"
    next_id = [1]

    def instr(comp, name, opcode, operands=(), **fields):
        i = comp.instructions.add(name=name, opcode=opcode, id=next_id[0])
        next_id[0] += 1
        i.shape.element_type = 11  # F32
        i.shape.dimensions.extend([128, 128])
        i.operand_ids.extend(operands)
        for k, v in fields.items():
            if k == "called":
                i.called_computation_ids.extend(v)
            else:
                setattr(i, k, v)
        return i

    fused_ids = []
    for f in range(fusions):
        comp = mod.computations.add(name=f"fused_computation.{f}", id=10_000_000 + f)
        a = instr(comp, f"param_0.{f}", "parameter", parameter_number=0)
        b = instr(comp, f"param_1.{f}", "parameter", parameter_number=1)
        m = instr(comp, f"multiply.f{f}", "multiply", [a.id, b.id])
        r = instr(comp, f"exponential.f{f}", "exponential", [m.id])
        comp.root_id = r.id
        fused_ids.append(comp.id)
    entry = mod.computations.add(name="main", id=1)
    ids = [instr(entry, f"p{k}", "parameter", parameter_number=k).id for k in range(16)]
    is_fusion = set(rng.choice(np.arange(16, n - 1), size=fusions, replace=False).tolist())
    f = 0
    for k in range(16, n - 1):
        window = ids[max(0, len(ids) - 64) :]
        a, b = rng.choice(window, size=2)
        if k in is_fusion:
            ids.append(
                instr(entry, f"fusion.{f}", "fusion", [int(a), int(b)], fusion_kind="kLoop", called=[fused_ids[f]]).id
            )
            f += 1
        else:
            ids.append(
                instr(
                    entry, f"{'add' if k % 2 else 'multiply'}.{k}", "add" if k % 2 else "multiply", [int(a), int(b)]
                ).id
            )
    root = instr(entry, "tuple.root", "tuple", ids[-8:])
    entry.root_id = root.id
    mod.entry_computation_id = 1
    return proto.SerializeToString()
