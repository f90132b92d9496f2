"""Which HLO op each kernel of a CUDA graph ran for: beyond XProf.

JAX on NVIDIA GPUs runs compiled programs as CUDA graphs (XLA "command buffers") by
default. XLA groups runs of consecutive thunks of one computation's thunk sequence into a
command buffer (openxla/xla `xla/backends/gpu/runtime/command_buffer_conversion_pass.cc`;
older XLA made an HLO `call` to a `command_buffer` computation instead,
`xla/service/gpu/transforms/command_buffer_scheduling.cc`), and the profiler annotation in
effect when the graph runs is the buffer's (`command_buffer_<thunk id>`, or the `call`), so
every kernel in the graph has an `hlo_op` stat that names the buffer, not its op. XProf 2.24.2
finds no instruction of that name and counts the kernels as idle time.

The profile still says which op each kernel was, given three facts of XLA:

* **Kernel names.** A kernel XLA emits for a fusion (loop, input, Triton) is named after the
  fusion instruction, sanitised as LLVM function names must be (`llvm_util.cc`
  `SanitizeFunctionName`: every character outside `[A-Za-z0-9_$]` becomes `_`, a leading digit
  gets a `_` before it), a clash getting `__<n>` (`NameUniquer`): `gemm_fusion_dot.11` runs as
  `gemm_fusion_dot_11`.
* **Kernel reuse.** Two fusions with the same fused computation and arguments share one kernel
  (`KernelReuseCache`), named after the one emitted first: in a real JAX run
  `loop_subtract_fusion.2` launches `loop_subtract_fusion_3`. So a name alone can point at the
  wrong op; the fused computations, compared as canonical HLO text, tell which fusions can
  share it.
* **Order.** A command buffer's commands follow its computation's schedule
  (`HloModuleProto.schedule`), and run in that order (the default LHS mode chains each
  command to the one before). Library calls (cuBLAS `nvjet_*`/`*_xmma_gemm_*`, cuDNN,
  NCCL, the driver's memcpy kernels of copies and dynamic slices) launch kernels named by the
  library, one or several per call, in the call's place.

So the kernels of one graph launch, in time order, are aligned with the schedule of a
computation of their module (`while` and `conditional` bodies are computations of their own:
XLA's default command buffers hold no control flow; an asynchronous start stands for the
instruction it wraps, the op its kernels name when graphs are off; a `call` for its body).
The alignment is the one of least cost, where a kernel costs nothing on the instruction it is
named after, a little on an identical fusion (reuse) or, for a library kernel, on an
instruction that launches work (more on one that launched a kernel of its own); a second
kernel on one instruction, an instruction passed over between two kernels, a jump back (a
loop inside the graph) and a kernel left without an op cost more. Leading and trailing
instructions are free (a buffer covers part of its computation). A kernel that ran outside
the graph while it ran (XLA ran its thunk on its own) names its op and holds its place.
Where two alignments of least cost give a kernel different ops, it is not guessed: it stays
unattributed, and so do kernels no instruction fits; each says why
(`GraphAttribution.kernels`, `Run.cuda_graph_kernels()`).

The alignment is computed once per distinct kernel sequence (every launch of a graph has the
same), vectorised over the schedule; events are mapped with numpy. `tests/test_command_buffers.py`
checks each case on made-up buffers and the attributed HLO stats against XProf's on the same
programs recorded with graphs off.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...io.hlo_text import instruction_text
from .cache import derived
from .columns import Groups, by_pair, by_value
from .planes import KERNEL_STATS, gpu_planes, is_derived_line
from .runlike import RunLike
from .tf_op import hlo_op_name, stat_ids

#: How XLA names the kernels of a command buffer (a CUDA graph) in their `hlo_op` stat.
COMMAND_BUFFER_PREFIX = "command_buffer"
DISABLE_COMMAND_BUFFERS = "XLA_FLAGS=--xla_gpu_enable_command_buffer="

# Costs of the alignment (integers, so that ties are exact).
EXACT, REUSE, LIBRARY, LIBRARY_ON_OWNED, SECOND_KERNEL, PASSED_OVER, JUMP_BACK, LEFT_OUT = 0, 1, 1, 3, 1, 2, 8, 6
_INF = 1 << 40
#: Calls followed at most, one inside the other.
MAX_CALL_DEPTH = 16
#: A plan unrolls calls to at most this many instructions per instruction of its module,
#: plus EXPAND_MIN (XLA inlines calls before scheduling: real programs unroll to about their size).
EXPAND_PER_INSTRUCTION, EXPAND_MIN = 4, 100_000
#: Computations a plan renders as canonical text at most (the fused computations of its
#: fusions and what they call); past it, a computation's text is "...".
MAX_TEXTS = 200_000

# Instructions that launch nothing on the device themselves.
_LAUNCH_NOTHING = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "tuple",
        "bitcast",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "domain",
        "async-done",
        "async-update",
    }
)
_DONE = "-done"  # all-reduce-done, copy-done, recv-done...: waits, no work of their own
_NESTED = frozenset({"while", "conditional"})
_NAME_TOKEN = re.compile(r"%([^\s,(){}=\"]+)")
_CONTROL = re.compile(r", control-predecessors=\{[^}]*\}")
_UNIQUER_SUFFIX = re.compile(r"__\d+$")

#: Why a kernel has no op (the `reason` column of `GraphAttribution.kernels`).
NO_MODULE = "the profile holds no HLO module for its program"
NO_FIT = "no instruction of its module fits its place in the graph"
NO_SCHEDULE = "its module has no schedule in the profile, so only kernels named after an instruction are attributed"


def sanitized_name(name: str) -> str:
    """The name XLA gives the kernel of an instruction named `name` (SanitizeFunctionName)."""
    out = re.sub(r"[^A-Za-z0-9_$]", "_", name) or "__unnamed"
    if out[0].isdigit():
        out = "_" + out
    if out in ("_", "$"):
        out += "_"
    return out


def kernel_base_name(kernel: str) -> str:
    """A kernel's name without the `__<n>` XLA's name uniquer adds on a clash."""
    return _UNIQUER_SUFFIX.sub("", kernel)


def is_command_buffer_op(hlo_op) -> bool:
    """Whether an `hlo_op` stat names a command buffer rather than an op."""
    return isinstance(hlo_op, str) and hlo_op.rsplit("::", 1)[-1].startswith(COMMAND_BUFFER_PREFIX)


# --- a module's schedule, as the alignment reads it ------------------------------------------


class _Program:
    """One computation's schedule as the alignment reads it: `instructions` that launch work,
    in order (asynchronous starts and calls expanded), and where each instruction name and
    each fusion shape is (`at_name`, `at_shape`)."""

    def __init__(self, computation, instructions):
        self.computation = computation
        self.instructions = instructions
        self.at_name: dict = {}
        self.at_shape: dict = {}
        for j, instr in enumerate(instructions):
            self.at_name.setdefault(instr.name, []).append(j)
            if instr.opcode == "fusion":
                self.at_shape.setdefault(_shape_key(instr), []).append(j)

    def part(self, lo, hi):
        return _Program(self.computation, self.instructions[lo:hi])


def _shape_key(instr):
    """What two fusions sharing a kernel have in common, cheap to compare: kind, shapes of
    the result and the operands, and how many instructions are fused."""
    fused = instr.fused_computation
    return (
        instr.fusion_kind,
        instr.shape,
        tuple(o.shape for o in instr.operands),
        len(fused.instructions) if fused is not None else -1,
    )


def _launches_work(instr) -> bool:
    return instr.opcode not in _LAUNCH_NOTHING and not instr.opcode.endswith(_DONE)


class LaunchPlan:
    """What the alignment needs of one HLO module (io.hlo.HloModule): its scheduled
    computations as `_Program`s, its instructions by the name of their kernel
    (`by_kernel`), and which fusions can share a kernel (`fingerprint`). Built once per
    module."""

    def __init__(self, module):
        self.module = module
        self._fingerprints: dict = {}
        self._texts: dict = {}  # canonical text digests of called computations, by name
        sequences = module.proto.schedule.sequences
        #: Whether the module says the order its instructions ran in (else only names are read).
        self.scheduled = len(sequences) > 0
        self._by_id = {i.id: i for c in module.computations.values() for i in c.instructions}
        self._expanded: dict = {}  # computation name -> its launching instructions, calls unrolled
        count = len(self._by_id)
        #: Instructions the plan may unroll from calls, in all: a call graph that calls a
        #: computation many times over (each of D computations calling the next K times:
        #: K^(D-1) copies) is cut there, its programs' tails left out (`cut`).
        self._room = EXPAND_PER_INSTRUCTION * count + EXPAND_MIN
        #: Whether some program was cut (its kernels past the cut are not attributed).
        self.cut = False
        self.programs = []
        self.by_kernel: dict[str, list] = {}
        for comp in module.computations.values():
            if comp.is_fusion:
                continue
            order = self._order(comp, sequences)
            for instr in order:
                if _launches_work(instr):
                    self.by_kernel.setdefault(sanitized_name(instr.name), []).append(instr)
            items = self._expand(comp, sequences, depth=0)
            if items:
                self.programs.append(_Program(comp.name, items))

    def _order(self, comp, sequences):
        seq = sequences[comp.id] if comp.id in sequences else None
        if seq is not None and len(seq.instruction_ids):
            return [self._by_id[i] for i in seq.instruction_ids if i in self._by_id]
        return comp.post_order()  # an unscheduled module: XLA's order of emission

    def _expand(self, comp, sequences, depth):
        """The instructions of `comp` that launch work, in order, an asynchronous start or a
        call standing for its computation's (unrolled, each computation's once: memoised).
        What is unrolled counts against the plan's room; past it, lists are cut."""
        done = self._expanded.get(comp.name)
        if done is not None:
            return self._take(done)
        if depth > MAX_CALL_DEPTH:  # a damaged module calling itself, or a chain too deep
            return []
        self._expanded[comp.name] = []  # (a computation calling itself unrolls to nothing there)
        items: list = []
        for instr in self._order(comp, sequences):
            op = instr.opcode
            if not _launches_work(instr) or op in _NESTED:  # (loop bodies are programs of their own)
                continue
            if op == "async-start" or (op == "call" and instr.called):
                for called in instr.called:
                    items.extend(self._expand(called, sequences, depth + 1))
            elif self._room > 0:
                self._room -= 1
                items.append(instr)
            else:
                self.cut = True
                break
        self._expanded[comp.name] = items
        return items

    def _take(self, items):
        """`items` again (a computation called once more), as far as the room allows."""
        if len(items) <= self._room:
            self._room -= len(items)
            return items
        self.cut = True
        room, self._room = max(self._room, 0), 0
        return items[:room]

    def fingerprint(self, instr) -> str:
        """The fused computation of a fusion, with its arguments, as canonical HLO text (names
        replaced by places, computations it calls by their text's digest): equal for fusions
        XLA's kernel reuse cache gives one kernel."""
        key = instr.name
        if key not in self._fingerprints:
            if instr.opcode != "fusion" or instr.fused_computation is None:
                self._fingerprints[key] = ""
            else:
                text = _computation_text(instr.fused_computation, self._texts)
                self._fingerprints[key] = f"{_shape_key(instr)}|{text}"
        return self._fingerprints[key]

    def places_named(self, kernel) -> bool:
        """Whether a kernel is named after an instruction (or names its op itself)."""
        return kernel.startswith(_OWN_OP) or kernel_base_name(kernel) in self.by_kernel

    def places(self, program, kernel):
        """(instructions of `program` a kernel is named after, identical fusions): index
        arrays; None for a library kernel (named after no instruction)."""
        if kernel.startswith(_OWN_OP):  # a kernel that names its op
            return np.asarray(program.at_name.get(kernel[1:], ()), dtype=np.int64), np.zeros(0, np.int64)
        named = self.by_kernel.get(kernel_base_name(kernel))
        if named is None:
            return None
        names = {i.name for i in named}
        own = sorted(j for name in names for j in program.at_name.get(name, ()))
        prints = {self.fingerprint(i): _shape_key(i) for i in named if i.opcode == "fusion"}
        prints.pop("", None)
        reuse = set()
        for fp, shape in prints.items():
            for j in program.at_shape.get(shape, ()):
                instr = program.instructions[j]
                if instr.name not in names and self.fingerprint(instr) == fp:
                    reuse.add(j)
        return np.asarray(own, dtype=np.int64), np.asarray(sorted(reuse), dtype=np.int64)


def _canonical(instr, places, texts, depth=0):
    """An instruction's HLO text with instruction names replaced by their places in
    `places` (others by `_`) and called computations by the digest of their canonical text
    (`_computation_digest`, memoised in `texts`)."""
    text = instruction_text(instr)
    text = text.split(" = ", 1)[1] if " = " in text else text
    calls = {c.name: c for c in instr.called}

    def name(m):
        token = m.group(1)
        if token in calls:
            return "{" + _computation_digest(calls[token], texts, depth + 1) + "}"
        return f"%{places[token]}" if token in places else "%_"

    return _NAME_TOKEN.sub(name, _CONTROL.sub("", text))


def _computation_text(comp, texts, depth=0):
    """A computation's canonical HLO text: each instruction's (`_canonical`) in post order.
    Its size is its own instructions' (a called computation is a digest), so a computation
    called at many places is rendered once."""
    places, lines = {}, []
    for instr in comp.post_order():
        lines.append(_canonical(instr, places, texts, depth))
        places[instr.name] = len(places)
    return ";".join(lines)


def _computation_digest(comp, texts, depth=0):
    """The digest of `_computation_text(comp)`, once per computation ("..." for one that
    calls itself, or below MAX_CALL_DEPTH)."""
    if depth > MAX_CALL_DEPTH:
        return "..."
    if comp.name not in texts:
        texts[comp.name] = "..."  # (while rendering it: a call back to it reads "...")
        if len(texts) <= MAX_TEXTS:
            text = _computation_text(comp, texts, depth)
            texts[comp.name] = hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=12).hexdigest()
    return texts[comp.name]


# --- the alignment ----------------------------------------------------------------------------


def _emission(plan, program, kernels):
    """Cost of each kernel on each instruction of `program`: (table, row of each kernel),
    one table row per distinct kernel name. A library kernel costs more on an instruction a
    kernel of the launch is named after (an XLA fusion that launched its own kernel seldom
    launches a library's too)."""
    m = len(program.instructions)
    names = list(dict.fromkeys(kernels))
    rows = []
    owned = np.zeros(m, dtype=bool)
    library = []
    for kernel in names:
        found = plan.places(program, kernel)
        row = np.full(m, _INF, dtype=np.int64)
        if found is None:
            library.append(len(rows))
        else:
            row[found[1]] = REUSE
            row[found[0]] = EXACT
            owned |= row < _INF
        rows.append(row)
    for k in library:
        rows[k] = np.where(owned, LIBRARY_ON_OWNED, LIBRARY).astype(np.int64)
    of = {name: k for k, name in enumerate(names)}
    return np.stack(rows), np.array([of[k] for k in kernels], dtype=np.int64)


def _finite(values):
    return np.minimum(values, _INF)


def _steps(prev, passed_cum):
    """Least cost of each instruction for the next kernel, from the states `prev` (index 0:
    before the first instruction; j >= 1: the last kernel's op was instruction j-1)."""
    m = len(prev) - 1
    at = prev[1:]
    c = passed_cum  # c[j]: cost of passing over instructions 0..j-1
    # Forward from p < q, passing over p+1..q-1: at[p] - c[p+1] + c[q].
    shifted = np.where(at >= _INF, _INF, at - c[1:])
    best_before = np.minimum.accumulate(np.concatenate([[_INF], shifted[:-1]]))
    forward = np.where(best_before >= _INF, _INF, best_before + c[:-1])
    start = np.full(m, prev[0])  # from before the first instruction: passing over is free
    stay = at + SECOND_KERNEL
    after = np.minimum.accumulate(at[::-1])[::-1]  # best at p >= q
    back = np.concatenate([after[1:], [_INF]]) + JUMP_BACK
    return _finite(np.minimum.reduce([forward, start, stay, back]))


def _steps_back(nxt, passed_cum):
    """The backward twin of `_steps`: least cost of the rest from each state, given `nxt` =
    cost of the next kernel on each instruction plus the rest after it."""
    m = len(nxt)
    c = passed_cum
    out = np.empty(m + 1, dtype=np.int64)
    out[0] = nxt.min() if m else _INF  # from before the first instruction: anywhere, free
    # Forward from p to q > p: nxt[q] + c[q] - c[p+1].
    val = np.where(nxt >= _INF, _INF, nxt + c[:-1])
    best_after = np.minimum.accumulate(val[::-1])[::-1]
    after = np.concatenate([best_after[1:], [_INF]])
    forward = np.where(after >= _INF, _INF, after - c[1:])
    stay = nxt + SECOND_KERNEL
    before = np.minimum.accumulate(nxt)
    back = np.concatenate([[_INF], before[:-1]]) + JUMP_BACK
    out[1:] = np.minimum.reduce([forward, stay, back])
    return _finite(out)


def _align(program, emission):
    """(least cost, per kernel the set of instruction indices it takes on some least-cost
    alignment, -1 standing for "left out"). `emission`: `_emission`'s (table, rows)."""
    table, of = emission
    n, m = len(of), table.shape[1]
    passed_cum = PASSED_OVER * np.arange(m + 1, dtype=np.int64)  # passing over instructions 0..j-1
    # Forward, kept as int32 (costs stay far below 2**31; _INF clipped): on[i][j] kernel i
    # on instruction j; out[i][s] kernel i left out in state s.
    on_rows = np.empty((n, m), dtype=np.int32)
    out_rows = np.empty((n, m + 1), dtype=np.int32)
    prev = np.full(m + 1, _INF, dtype=np.int64)
    prev[0] = 0
    for i in range(n):
        on = _finite(_steps(prev, passed_cum) + table[of[i]])
        out = _finite(prev + LEFT_OUT)
        on_rows[i] = np.minimum(on, _INF32)
        out_rows[i] = np.minimum(out, _INF32)
        prev = np.concatenate([[out[0]], np.minimum(on, out[1:])])
    total = int(prev.min())
    # Backward: rest[s], least cost of the kernels after kernel i from state s.
    rest = np.zeros(m + 1, dtype=np.int64)
    choices: list = [None] * n
    for i in range(n - 1, -1, -1):
        picks = set(np.flatnonzero(on_rows[i] + rest[1:] == total).tolist())
        if (out_rows[i] + rest == total).any():
            picks.add(-1)
        choices[i] = picks
        if i:
            nxt = _finite(table[of[i]] + rest[1:])
            rest = _finite(np.minimum(_steps_back(nxt, passed_cum), rest + LEFT_OUT))
    return total, choices


#: Kernels of one launch aligned at a time: longer launches (whole training steps in one
#: graph) are aligned in pieces of this many kernels.
PIECE = 2048
#: Cells (kernels x instructions) of one alignment at most: the part of a program a piece is
#: aligned with is cut around its named kernels to fit.
MAX_CELLS = 20_000_000
#: Cells aligned per file at most (about ten seconds): a damaged or hostile file's kernels past
#: it stay idle, saying so.
FILE_BUDGET_CELLS = 150_000_000
TOO_LARGE = "not attributed: the file's CUDA graphs are too large to align within the time budget"
#: What aligning a piece costs besides its cells, in cells: its fixed numpy and Python work
#: (~0.07 ms on a 2-core machine, ~1,000 cells at the budget's pace), twice over.
PIECE_CELLS = 2_000
CUT = (
    "not attributed: the module's calls unroll to more instructions than a plan holds "
    "(a call graph calling computations many times over)"
)
_INF32 = np.int32(2**31 - 1)


class _Budget:
    """Cells left to align in one file."""

    def __init__(self, cells=None):
        self.cells = FILE_BUDGET_CELLS if cells is None else cells


def attribute_kernels(plan: LaunchPlan, kernels, budget=None) -> list:
    """The op of each kernel of one graph launch (kernel names in time order) under `plan`:
    a list of (instruction name, "") or (None, why not). `budget` (`_Budget`): cells left
    for the file; spent here."""
    kernels = list(kernels)
    budget = budget or _Budget()
    if not plan.scheduled:
        cells = len(kernels) * (len(plan.programs) + 1)
        if cells > budget.cells:
            return [(None, TOO_LARGE)] * len(kernels)
        budget.cells -= cells
        return [_by_name_only(plan, k) for k in kernels]
    out = []
    for lo in range(0, len(kernels), PIECE):
        out.extend(_attribute_piece(plan, kernels[lo : lo + PIECE], budget))
    if plan.cut:  # the kernels no instruction fits may lie past where the plan was cut
        out = [(None, CUT) if why == NO_FIT else (op, why) for op, why in out]
    return out


def _by_name_only(plan, kernel):
    """A kernel's op in a module without a schedule: the one instruction it is named after,
    if no other fusion could have run its kernel (its place, and so a reused kernel's or a
    library kernel's op, is unknown)."""
    named = plan.by_kernel.get(kernel_base_name(kernel))
    if named is None or len(named) != 1 or kernel.startswith(_OWN_OP):
        return None, NO_SCHEDULE
    if any(len(plan.places(program, kernel)[1]) for program in plan.programs):
        return None, NO_SCHEDULE  # an identical fusion could have run it
    return named[0].name, ""


def _attribute_piece(plan, kernels, budget):
    # What a piece costs whatever its size (finding its programs, numpy's calls), in cells:
    # a file of many short distinct launches spends the budget too.
    fixed = PIECE_CELLS + len(plan.programs) * len(set(kernels))
    if fixed > budget.cells:
        return [(None, TOO_LARGE)] * len(kernels)
    budget.cells -= fixed
    programs = _candidate_programs(plan, kernels) if kernels else []
    if not programs:
        return [(None, NO_FIT)] * len(kernels)
    cells = len(kernels) * sum(len(p.instructions) for p in programs)
    if cells > budget.cells:
        return [(None, TOO_LARGE)] * len(kernels)
    budget.cells -= cells
    best, per_kernel = None, None
    for program in programs:
        total, choices = _align(program, _emission(plan, program, kernels))
        picks = [{program.instructions[j].name if j >= 0 else None for j in c} for c in choices]
        if best is None or total < best:
            best, per_kernel = total, picks
        elif total == best:
            per_kernel = [a | b for a, b in zip(per_kernel, picks)]
    out = []
    for picks in per_kernel:
        if len(picks) == 1 and None not in picks:
            out.append((next(iter(picks)), ""))
        elif picks == {None}:
            out.append((None, NO_FIT))
        else:
            names = sorted(p for p in picks if p is not None)
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            out.append((None, f"fits {shown} equally well" + (" (or none)" if None in picks else "")))
    return out


def _candidate_programs(plan, kernels):
    """The computations a launch can be of, each cut to the part it can lie in: those holding
    an instruction a kernel is named after, or an identical fusion, from len(kernels)
    instructions before the first such one to as many after the last (passing over the rest
    is free at both ends), and to MAX_CELLS around the median instruction kernels are named
    after; every computation for a launch of library kernels only."""
    n = len(kernels)
    named = [k for k in dict.fromkeys(kernels) if plan.places_named(k)]
    out = []
    for program in plan.programs:
        hits, own = [], []
        for kernel in named:
            exact, reuse = plan.places(program, kernel)
            own.extend(exact.tolist())
            hits.extend(exact.tolist())
            hits.extend(reuse.tolist())
        if named and not hits:
            continue
        size = len(program.instructions)
        lo, hi = (max(0, min(hits) - n), min(size, max(hits) + n + 1)) if hits else (0, size)
        width = max(1, MAX_CELLS // max(n, 1))
        if hi - lo > width:
            centre = int(np.median(own or hits or [size // 2]))
            lo = max(lo, min(centre - width // 2, hi - width))
            hi = min(hi, lo + width)
        out.append(program if (lo, hi) == (0, size) else program.part(lo, hi))
    return out


# --- a file's graph kernels, attributed -----------------------------------------------------


@dataclass
class GraphAttribution:
    """The kernels of CUDA graphs in one file and the ops they were attributed.

    `ops`: {(plane index, line index): (event indices, op names)}, op names an object array
    (None where not attributed); `kernels`: DataFrame, one row per program, command buffer,
    kernel and op: program_id, command_buffer, kernel, op (missing where not attributed),
    reason (why not), launches (events) and time_ps.
    """

    ops: dict
    kernels: pd.DataFrame

    @property
    def kernel_count(self) -> int:
        return int(self.kernels["launches"].sum()) if len(self.kernels) else 0

    @property
    def attributed_count(self) -> int:
        k = self.kernels
        return int(k.loc[k["op"].notna(), "launches"].sum()) if len(k) else 0


_KERNEL_COLUMNS = ["program_id", "command_buffer", "kernel", "op", "reason", "launches", "time_ps"]


def graph_attribution(run: RunLike, space) -> GraphAttribution:
    """The file's graph kernels and their ops (computed once per file)."""
    return derived(space, "graph_attribution", lambda: _graph_attribution(run, space))


#: Marks a kernel that names its op itself (launched outside the graph, while it ran).
_OWN_OP = "\x00"


def _line_events(line, modules):
    """A line's events that ran in a command buffer, and those that name their op:
    ((event indices, command buffer, program id, correlation id, graph node id), (event
    indices, op, program id)); None for a line without `hlo_op`."""
    line.stat_table(names=KERNEL_STATS)  # (decoded with the kernel reports' stats: read from those)
    st = line.stat_columns(names=["hlo_op", "program_id", "correlation_id", "cuda_graph_node_id"], metadata=False)
    if "hlo_op" not in st:
        return None
    hlo = np.asarray(st["hlo_op"], dtype=object)
    codes, values = pd.factorize(pd.Series(hlo, dtype=object))
    if not len(values):
        return None
    pid = stat_ids(st["program_id"]) if "program_id" in st else np.full(len(line), np.nan)
    corr = stat_ids(st["correlation_id"]) if "correlation_id" in st else np.full(len(line), np.nan)
    node = stat_ids(st["cuda_graph_node_id"]) if "cuda_graph_node_id" in st else np.full(len(line), np.nan)
    kind = np.zeros(len(values), dtype=np.int8)  # 1: a command buffer; 2: maybe an op
    for k, value in enumerate(values):
        if is_command_buffer_op(value):
            kind[k] = 1
        elif isinstance(value, str):
            kind[k] = 2
    of = np.where(codes >= 0, kind[np.maximum(codes, 0)], 0)
    graph = np.flatnonzero(of == 1)
    own = np.flatnonzero((of == 2) & ~np.isnan(pid))
    names = by_value(hlo[own], hlo_op_name)

    def kind_of(p, name):  # per distinct (program, op)
        instr = modules.instruction(int(p), name)
        # An op that is a `call` of a `command_buffer` computation: XLA before command
        # buffers were formed from thunks.
        older = instr is not None and instr.opcode == "call" and bool(instr.called)
        older = older and instr.called[0].name.startswith(COMMAND_BUFFER_PREFIX)
        return "buffer" if older else ("op" if instr is not None else None)

    what = by_pair(pid[own], names, kind_of)
    graph = np.sort(np.concatenate([graph, own[what == "buffer"]]))
    buffers = by_value(hlo[graph], hlo_op_name)
    ops = own[what == "op"]
    return (graph, buffers, pid[graph], corr[graph], node[graph]), (ops, names[what == "op"], pid[ops])


def _names_command_buffers(space, modules) -> bool:
    """Whether a kernel of the file may have run in a command buffer: a GPU line's `hlo_op`
    names one, or a module has command-buffer computations (XLA before command buffers
    were formed from thunks: a `call` of one). Cheap: distinct strings, no op lookups; a
    profile without CUDA graphs (most, and every AMD one) skips the per-line reading."""
    for pid in modules.names:
        if not modules.may_hold(pid, COMMAND_BUFFER_PREFIX):  # (no module parsed to know)
            continue
        module = modules.module(pid)
        if module is not None and any(c.name.startswith(COMMAND_BUFFER_PREFIX) for c in module.computations.values()):
            return True
    for plane in gpu_planes(space):
        if not plane.has_stat("hlo_op"):
            continue
        for _, line in plane.busy_lines:
            if not is_derived_line(line):
                # (`str_codes`: kept with the line's table, which the op database and the
                # kernel reports read again; `string_codes` would be made anew for each.)
                _, values = line.stat_table(names=KERNEL_STATS).str_codes("hlo_op")
                if any(is_command_buffer_op(v) for v in values.tolist()):
                    return True
    return False


def _graph_events(run, space):
    """The file's graph kernels, one row each (plane, line, event, start, time_ps, kernel,
    command_buffer, program_id, corr, node), or None; and the kernels that name their op,
    per line (plane, starts, program ids, ops): what the alignment reads, and all that
    XProf's accounting needs (counts and times). Read once per file."""
    return derived(space, "graph_events", lambda: _read_graph_events(run, space))


def _read_graph_events(run, space):
    from .xla_ops import program_modules

    modules = program_modules(run)
    if not _names_command_buffers(space, modules):
        return None, []  # (no graph kernel: the kernels naming their own op are not needed)
    frames, own_frames = [], []
    for plane in gpu_planes(space):
        pi = space.index_of(plane)
        for li, line in plane.busy_lines:
            if is_derived_line(line):
                continue
            found = _line_events(line, modules)
            if found is None:
                continue
            (at, buffers, pid, corr, node), (own, names, own_pid) = found
            start = line.start_ps.astype(np.int64)
            if not len(at):
                own_frames.append((pi, start[own], own_pid, names))
                continue
            frames.append(
                pd.DataFrame(
                    {
                        "plane": pi,
                        "line": li,
                        "event": at,
                        "start": start[at],
                        "time_ps": line.event_duration_ps[at].astype(np.int64),
                        "kernel": line.name_strings(at),
                        "command_buffer": buffers,
                        "program_id": np.where(np.isnan(pid), -1, pid).astype(np.int64),
                        "corr": corr,
                        "node": node,
                    }
                )
            )
            own_frames.append((pi, start[own], own_pid, names))
    return (pd.concat(frames, ignore_index=True) if frames else None), own_frames


def _graph_attribution(run, space):
    from .xla_ops import program_modules

    ev, own_frames = _graph_events(run, space)
    if ev is None:
        return GraphAttribution({}, pd.DataFrame(columns=_KERNEL_COLUMNS))
    modules = program_modules(run)
    ev = ev.assign(launch=_launches(ev))
    seq = pd.concat([ev, _own_ops_within(ev, own_frames)], ignore_index=True)
    seq = seq.sort_values(["launch", "start", "line", "event"], kind="stable").reset_index(drop=True)
    # Sorted by launch: each launch's rows are one run, its kernels in order.
    launch = seq["launch"].to_numpy()
    g = Groups(launch)
    seq["place"] = np.arange(len(seq)) - np.repeat(g.starts, g.sizes)
    kernel_names = seq["kernel"].to_numpy(object)
    kernels_of = [tuple(kernel_names[a:b]) for a, b in zip(g.starts.tolist(), (g.starts + g.sizes).tolist())]
    program_of = g.first(seq["program_id"])
    sequences = pd.Series(list(zip(program_of.tolist(), kernels_of)), index=g.first(launch), dtype=object)
    signature, distinct = pd.factorize(sequences)
    plans: dict = {}
    budget = _Budget()
    op_table, reason_table, offsets = [], [], np.zeros(len(distinct) + 1, dtype=np.int64)
    for s, (program_id, kernels) in enumerate(distinct):
        if program_id not in plans:
            module = modules.module(int(program_id)) if program_id >= 0 else None
            plans[program_id] = LaunchPlan(module) if module is not None else None
        plan = plans[program_id]
        result = attribute_kernels(plan, kernels, budget) if plan is not None else [(None, NO_MODULE)] * len(kernels)
        op_table.extend(r[0] for r in result)
        reason_table.extend(r[1] for r in result)
        offsets[s + 1] = offsets[s] + len(kernels)
    flat = offsets[signature[g.codes]] + seq["place"].to_numpy()
    seq["op"] = np.asarray(op_table, dtype=object)[flat]
    seq["reason"] = np.asarray(reason_table, dtype=object)[flat]
    ev = seq[seq["event"] >= 0].astype({"event": np.int64, "line": np.int64, "plane": np.int64, "time_ps": np.int64})
    ops = {}
    for (pi, li), part in ev.groupby(["plane", "line"], sort=False):
        names = by_value(part["op"], lambda o: o if isinstance(o, str) else None)
        ops[(int(pi), int(li))] = (part["event"].to_numpy(np.int64), names)
    keys = ["program_id", "command_buffer", "kernel", "op", "reason"]
    key_columns = {k: ev[k].to_numpy() for k in keys}
    key_columns["op"] = ev["op"].fillna("").to_numpy(object)
    g = Groups(*key_columns.values())
    kernels = g.frame(key_columns, launches=g.size(), time_ps=g.sum(ev["time_ps"].to_numpy(np.int64)))
    kernels["op"] = kernels["op"].where(kernels["op"] != "")
    return GraphAttribution(ops, kernels[_KERNEL_COLUMNS])


_OWN_COLUMNS = ["launch", "start", "kernel", "program_id", "event", "line"]


def _own_ops_within(ev, own_frames):
    """The kernels of the launches' programs that name their op, on the launches' planes,
    starting while a launch ran (XLA ran their thunks outside the graph): rows of the
    launch sequences with kernel `_OWN_OP + op` and event -1."""
    g = Groups(ev["launch"])
    spans = g.frame(
        {"launch": ev["launch"]},
        plane=g.first(ev["plane"]),
        program_id=g.first(ev["program_id"]),
        lo=g.min(ev["start"]),
        hi=g.max(ev["start"].to_numpy() + ev["time_ps"].to_numpy()),
    ).set_index("launch")
    parts = [pd.DataFrame({"plane": p, "start": s, "program_id": pid, "kernel": n}) for p, s, pid, n in own_frames]
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame(columns=_OWN_COLUMNS)
    own = pd.concat(parts, ignore_index=True)
    own["program_id"] = own["program_id"].astype(np.int64)
    out = []
    for (plane, pid), launches in spans.groupby(["plane", "program_id"], sort=False):
        mine = own[(own["plane"] == plane) & (own["program_id"] == pid)]
        if mine.empty:
            continue
        # Each such kernel joins one launch at most, the latest to start before it of those
        # still running (launches of one program on one device seldom overlap): a row per
        # kernel, never one per (launch, kernel) pair.
        launches = launches.sort_values("lo", kind="stable")
        lo, hi = launches["lo"].to_numpy(), launches["hi"].to_numpy()
        starts = mine["start"].to_numpy()
        at = np.searchsorted(lo, starts, side="right") - 1
        longest = np.maximum.accumulate(hi)  # the latest end of the launches started so far
        ok = at >= 0
        ok[ok] = longest[at[ok]] > starts[ok]
        if not ok.any():
            continue
        at, starts_ok = at[ok], starts[ok]
        # Where the latest-starting launch has ended, the one running then started earlier.
        ended = hi[at] <= starts_ok
        if ended.any():
            first_to = np.searchsorted(longest, starts_ok[ended], side="right")  # first launch ending after it
            at[ended] = first_to
        out.append(
            pd.DataFrame(
                {
                    "launch": launches.index.to_numpy()[at],
                    "start": starts_ok,
                    "kernel": _OWN_OP + mine["kernel"].to_numpy(object)[ok],
                    "program_id": pid,
                    "event": -1,
                    "line": -1,
                }
            )
        )
    if not out:
        return pd.DataFrame(columns=_OWN_COLUMNS)
    return pd.concat(out, ignore_index=True)


def _launches(ev):
    """A number per graph launch: the kernels of one plane, program, command buffer and
    correlation id (the launch's); without a correlation id, a run of consecutive events of
    one line and command buffer."""
    corr = ev["corr"].to_numpy(dtype=float)
    has = ~np.isnan(corr)
    key = np.where(has, np.nan_to_num(corr), -1).astype(np.int64)
    if not has.all():
        order = np.lexsort((ev["event"].to_numpy(), ev["line"].to_numpy(), ev["plane"].to_numpy()))
        cols = {c: ev[c].to_numpy()[order] for c in ("plane", "line", "command_buffer", "event")}
        same = (
            (cols["plane"][1:] == cols["plane"][:-1])
            & (cols["line"][1:] == cols["line"][:-1])
            & (cols["command_buffer"][1:] == cols["command_buffer"][:-1])
            & (cols["event"][1:] == cols["event"][:-1] + 1)
        )
        run_of = np.empty(len(ev), dtype=np.int64)
        run_of[order] = np.concatenate([[0], np.cumsum(~same)])
        key = np.where(has, key, -2 - run_of)
    frame = pd.DataFrame({"p": ev["plane"], "g": ev["program_id"], "b": ev["command_buffer"], "k": key})
    launch = frame.groupby(["p", "g", "b", "k"], sort=False).ngroup().to_numpy()
    # A graph node runs once per launch: a node id seen again under one correlation id is
    # another launch (a file tiled in time, or a tracer that reused ids).
    node = ev["node"].to_numpy(dtype=float)
    frame = pd.DataFrame({"launch": launch, "node": np.where(np.isnan(node), -1, node), "start": ev["start"]})
    by_time = frame.sort_values(["launch", "start"], kind="stable")
    again = by_time.groupby(["launch", "node"], sort=False).cumcount().to_numpy()
    frame.loc[by_time.index, "again"] = np.where(by_time["node"].to_numpy() < 0, 0, again)
    return frame.groupby(["launch", "again"], sort=False).ngroup().to_numpy()


def attributed_ops(run: RunLike, space, plane, li, hlo):
    """`hlo` (a line's `hlo_op` values, one per event) with the kernels of CUDA graphs given
    the op they were attributed (`graph_attribution`) when the run attributes them
    (`Run.attribute_cuda_graphs`); `hlo` itself otherwise, or when the line has none."""
    entry = attributed_events(run, space, plane, li)
    if entry is None:
        return hlo
    events, ops = entry
    out = np.array(hlo, dtype=object, copy=True)
    out[events] = ops
    return out


def attributed_codes(run: RunLike, space, plane, li, codes, values):
    """`attributed_ops` of a line's `hlo_op` read as codes (`StatTable.str_codes`: per event
    a position in `values`, -1 none): (codes, values) with each attributed kernel's code
    pointing at its op, appended to the values; the same arrays where none is."""
    entry = attributed_events(run, space, plane, li)
    if entry is None:
        return codes, values
    events, ops = entry
    codes = codes.copy()
    codes[events] = len(values) + np.arange(len(events))
    return codes, np.concatenate([np.asarray(values, dtype=object), np.asarray(ops, dtype=object)])


def attributed_events(run: RunLike, space, plane, li):
    """(events, ops): the kernels of line `li` of `plane` that `attributed_ops` gives an op
    (positions on the line) and those ops (str); None where it gives none."""
    if not run.attribute_cuda_graphs:
        return None
    found = graph_attribution(run, space).ops
    if not found:
        return None
    try:
        entry = found.get((space.index_of(plane), li))
    except ValueError:  # (not a plane of this space: nothing attributed to it)
        return None
    if entry is None:
        return None
    events, ops = entry
    ok = np.array([isinstance(o, str) for o in ops], dtype=bool)
    return (events[ok], ops[ok]) if ok.any() else None


def graph_summary(kernels: pd.DataFrame) -> dict:
    """The counts `graph_kernel_words` reads, of a `GraphAttribution.kernels` table: kernels,
    time_ps, attributed, attributed_time_ps and left ({reason: kernels}). Plain numbers and
    strings: summaries of hosts travel between processes and add up (`add_summaries`)."""
    total = int(kernels["launches"].sum()) if len(kernels) else 0
    done = kernels[kernels["op"].notna()] if len(kernels) else kernels
    left = kernels[kernels["op"].isna()] if len(kernels) else kernels
    reasons = left.groupby("reason", sort=False)["launches"].sum() if len(left) else pd.Series(dtype=np.int64)
    return {
        "kernels": total,
        "time_ps": int(kernels["time_ps"].sum()) if total else 0,
        "attributed": int(done["launches"].sum()) if len(done) else 0,
        "attributed_time_ps": int(done["time_ps"].sum()) if len(done) else 0,
        "left": {str(r): int(n) for r, n in reasons.items()},
    }


def host_graph_summary(run: RunLike, space) -> dict:
    """`graph_summary` of one file's graph kernels. With XProf's accounting
    (`attribute_cuda_graphs=False`) nothing is aligned: the kernels are counted, none
    attributed."""
    if run.attribute_cuda_graphs:
        return graph_summary(graph_attribution(run, space).kernels)
    ev, _ = _graph_events(run, space)
    kernels, time_ps = (0, 0) if ev is None else (len(ev), int(ev["time_ps"].sum()))
    return {"kernels": kernels, "time_ps": time_ps, "attributed": 0, "attributed_time_ps": 0, "left": {}}


def add_summaries(summaries) -> dict:
    """`graph_summary`s of several hosts as one."""
    counts = dict.fromkeys(("kernels", "time_ps", "attributed", "attributed_time_ps"), 0)
    left: dict[str, int] = {}
    for s in summaries:
        for key in counts:
            counts[key] += s[key]
        for reason, n in s["left"].items():
            left[reason] = left.get(reason, 0) + n
    return {**counts, "left": left}


def graph_kernel_words(summary: dict, attributing: bool, naming_an_op=None) -> str:
    """What every tool that shows op numbers says of the kernels run in CUDA graphs ("" when
    there are none): that XProf counts them as idle, and how many got their op and why the
    others did not (`attributing`: the run attributes them), or how to see their ops.
    `summary`: `graph_summary` (of one host or several); `naming_an_op`: how many kernels
    name an op, graph kernels included (None: not said)."""
    total = summary["kernels"]
    if not total:
        return ""
    which = f"{total:,} GPU kernels"
    if naming_an_op:
        which = f"{total:,} of the {naming_an_op:,} GPU kernels that name an op"
    head = (
        f"{which} ran in CUDA graphs (XLA command buffers), where each names its command buffer "
        "(`command_buffer_1`...), not its op: XProf counts their time as idle."
    )
    if not attributing:
        return (
            f"{head} So do we here ({summary['time_ps'] / 1e9:,.3f} ms): `load_run(path)` finds their ops "
            f"(attribute_cuda_graphs=True, the default), or profile with command buffers off: {DISABLE_COMMAND_BUFFERS}"
        )
    words = (
        f"{head} Here their ops were found from the kernels' names and their programs' schedules: "
        f"{summary['attributed']:,} of {total:,} kernels attributed ({summary['attributed_time_ps'] / 1e9:,.3f} ms)"
    )
    left = sorted(summary["left"].items(), key=lambda item: -item[1])
    if left:
        shown = "; ".join(f"{n:,}: {reason}" for reason, n in left[:3])
        words += f", {total - summary['attributed']:,} left idle ({shown})"
    return words + ". `load_run(path, attribute_cuda_graphs=False)` gives XProf's accounting."


def graph_note(run, naming_an_op=None) -> str:
    """`graph_kernel_words` of every host of `run` (read here)."""
    summary = add_summaries(host_graph_summary(run, space) for space in run.xspaces())
    return graph_kernel_words(summary, run.attribute_cuda_graphs, naming_an_op)


def graph_kernels(run: RunLike) -> pd.DataFrame:
    """`GraphAttribution.kernels` of every host of `run`, a `host` column first."""
    frames = [graph_attribution(run, space).kernels.assign(host=host) for host, space in run.host_spaces()]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=["host", *_KERNEL_COLUMNS])
    return pd.concat(frames, ignore_index=True)[["host", *_KERNEL_COLUMNS]]
