"""Find an op of the HLO op profile by what another tool knows of it: its program id and
HLO name (roofline rows, kernels of XLA ops), or its framework op (kernel stats).

The tools that select an op (kernel stats, roofline) show XProf's op details card of
that op, which is made from an op-profile node (`op_details`). The whole op profile
(every op: `top_n=10**9`) is built once per widget, on the first selection.
"""

from __future__ import annotations

from ..analysis.core.tf_op import parse_tf_op


class OpIndex:
    """The op nodes (kind "op") of `run.op_profile(group_by="program")`, indexed.

    `root` is the profile's root (None when the run has no op profile), `reason`
    why there is none.
    """

    def __init__(self, run):
        profile = run.op_profile(group_by="program", top_n=10**9)
        self.reason = profile.reason if profile.empty else ""
        self.root = None if profile.empty else profile.root
        self._by_id = {}  # (program id, op name) -> (node, program name)
        self._by_framework_op = {}  # framework op name -> [(node, program name)], longest first
        if self.root is None:
            return
        program_of = {}
        for node, _depth, parent in self.root.walk():
            program = node.name if node.kind == "program" else program_of.get(id(parent))
            program_of[id(node)] = program
            if node.kind != "op":
                continue
            self._by_id.setdefault((int(node.program_id), node.name), (node, program))
            if node.provenance:
                name = parse_tf_op(node.provenance)[1] or node.provenance
                self._by_framework_op.setdefault(name, []).append((node, program))
        for nodes in self._by_framework_op.values():
            nodes.sort(key=lambda pair: -pair[0].time_ps)

    def op(self, program_id, name):
        """(node, program name) of HLO op `name` of program `program_id`, or None."""
        try:
            key = (int(program_id), str(name))
        except (TypeError, ValueError):
            return None
        return self._by_id.get(key)

    def framework_op(self, name):
        """[(node, program name)] of the HLO ops made from framework op `name`, longest first."""
        return list(self._by_framework_op.get(name, []))
