"""The HLO text of an instruction, as XProf shows it, against XLA's own printer (jaxlib's,
with XProf's print options: no metadata, no backend config, operand shapes shown, large
constants elided) on every instruction of the corpus' modules and the GPU HLO corpus."""

import re

import pytest

from xprof_widgets.io.hlo import hlo_module, parse_hlo_proto
from xprof_widgets.io.hlo_text import instruction_text

from . import hlo_corpus
from .conftest import corpus_run
from .gpu_space import hlo_proto_bytes

RUNS = [
    "amd_jax_gemm_mi300",
    "amd_jax_elementwise_mi300",
    "amd_jax_conv_mi300",
    "nvidia_jax_mlp_h200",
    "nvidia_jax_mlp_no_graphs_h200",
    "jax_mlp_cpu",
    "jax_transformer_cpu",
    "tpu_v6e_inference",
]


def _xla_texts(data):
    """{instruction name: XLA's text of it} for serialized HloProto bytes."""
    xc = pytest.importorskip("jax._src.lib").xla_client
    options = xc.hlo.HloPrintOptions()
    options.print_metadata = False
    options.print_backend_config = False
    options.print_operand_shape = True
    options.print_large_constants = False
    module = xc.hlo.HloModule.from_serialized_hlo_module_proto(parse_hlo_proto(data).hlo_module.SerializeToString())
    out = {}
    for line in module.to_string(options).splitlines():
        line = line.strip().removeprefix("ROOT ")
        m = re.match(r"^%([^ ]+) = ", line)
        if m:
            out.setdefault(m.group(1), line)
    return out


def _modules():
    for name, text in hlo_corpus.modules().items():
        yield pytest.param(lambda text=text: [hlo_proto_bytes(text)], id=name)
    for run in RUNS:
        yield pytest.param(lambda run=run: list(corpus_run(run).hlo_protos.values()), id=run)


@pytest.mark.parametrize("protos", list(_modules()))
def test_instruction_text_equals_xlas(protos):
    compared = 0
    for data in protos():
        ref = _xla_texts(data)
        for comp in hlo_module(data).computations.values():
            for instr in comp.instructions:
                assert instruction_text(instr) == ref[instr.name]
                compared += 1
    assert compared > 0
