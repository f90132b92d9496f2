"""The roofline model against XProf 2.24.2: every row and column of its roofline_model
table for every corpus run, the roofs and ridge points, the diagnostics, and a profile
made here (two GPUs, two hosts) run through XProf itself."""

import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.roofline import COLUMNS_GPU, COLUMNS_TPU, NO_DEVICE, roofline_model

from . import xprof_oracle as oracle
from .conftest import PROFILES, corpus_run, host_copies
from .xprof_tables import RUNS, assert_rows_equal, reference_json, table, write_hand_made_run

#: Runs without a GPU or TPU: XProf's table has no rows and zero roofs.
CPU_RUNS = {"tf_keras_cpu", "jax_mlp_cpu", "jax_transformer_cpu"}


def _check(df, ref, diagnostics, what):
    ids, rows, props = ref
    if rows:
        assert list(df.columns) == ids, what
    assert_rows_equal(df, ids, rows, what=what)
    # XProf prints the roofs with 6 significant digits (absl::StrCat of a double).
    for key, value in props.items():
        ours = df.attrs[key]
        if key == "device_type":
            assert ours == value, what
        else:
            assert float(ours) == pytest.approx(float(value), rel=5e-6, abs=1e-12), (what, key)
    assert df.attrs["diagnostics"] == [tuple(r) for r in table(diagnostics)[1]], what


@pytest.mark.parametrize("logdir,session", RUNS, ids=lambda v: v)
def test_roofline_equal_xprof(logdir, session):
    """Every row (Total: program then ops by self time; Average; each step; all of it with
    infeed/outfeed, then without) and every column XProf's table has (its GPU table has
    fewer); the roofs and ridge points of its table properties; its diagnostics."""
    roofline, diagnostics = reference_json(logdir, session, "roofline_model")
    df = roofline_model(corpus_run(logdir, session))
    _check(df, table(roofline), diagnostics, f"{logdir}/{session}")
    if logdir in CPU_RUNS:
        assert df.empty and df.attrs["reason"] == NO_DEVICE
    else:
        assert not df.empty and df.attrs["reason"] == ""
        assert list(df.columns) == (COLUMNS_GPU if "GPU" in df.attrs["device_type"] else COLUMNS_TPU)


def test_roofs_by_hand():
    """The MI300X's roofs from its plane: 304 CUs x 2.1 GHz x 2048 FLOPs per CU and cycle,
    2.6624 TB/s of HBM and 128 bytes per CU and cycle of LDS, as GiB/s; the TPU's from its
    plane stats (merged VMEM)."""
    gpu = roofline_model(corpus_run("amd_jax_gemm_mi300")).attrs
    assert gpu["peak_flop_rate"] == pytest.approx(304 * 2.1 * 2048)
    assert gpu["peak_hbm_bw"] == pytest.approx(2662.4 / 1.073741824)
    assert gpu["peak_vmem_write_bw"] == pytest.approx(304 * 2.1 * 128 / 1.073741824)
    assert gpu["hbm_ridge_point"] == pytest.approx(304 * 2.1 * 2048 / 2662.4)
    tpu = roofline_model(corpus_run("tpu_v6e_inference"))
    assert tpu.attrs["has_merged_vmem"] and not tpu.attrs["has_cmem"]
    assert tpu.attrs["peak_flop_rate"] == 918_000
    total = tpu[(tpu["step"] == "Total") & tpu["include_infeed_outfeed"]]
    assert total["operation"].iloc[0] == "Program" and total["total_time_in_percentage"].iloc[0] == 1.0
    # Op rows by self time, cumulative fractions rising.
    assert (total["total_self_time"].iloc[1:].diff().dropna() <= 0).all()
    assert (total["cumulative_total_self_time_percent"].diff().dropna() >= 0).all()


@pytest.mark.parametrize("hosts", [1, 2])
def test_hand_made_run_equals_xprof(tmp_path, hosts):
    """tests/xprof_tables.py's profile on an H100 and a GPU without a vendor: XLA ops with
    the cost model's FLOPs and bytes, TF-op kernels, source info, the Shm/L1 roof; two
    hosts add the "Average" row (and no step: no step markers)."""
    _, paths = write_hand_made_run(tmp_path)
    paths = paths[:hosts]
    ref = oracle.tool_data(paths, "roofline_model")
    df = roofline_model(xw.load_run(paths))
    _check(df, table(ref[0]), ref[1], f"{hosts} hosts")
    assert ("Average" in set(df["step"])) == (hosts == 2)


def test_one_gpu_host_with_a_step_equals_xprof():
    """One host of tf_gpu_multiworker alone: its GPU step database has one step (group 0),
    so XProf adds a "0" row after "Total" and no "Average" row (that is for TPU hosts and
    combined hosts); no diagnostics."""
    path = min((PROFILES / "tf_gpu_multiworker" / "plugins" / "profile").glob("*/*.xplane.pb"))
    ref = oracle.tool_data([path], "roofline_model")
    df = roofline_model(xw.load_run([path]))
    _check(df, table(ref[0]), ref[1], "one GPU host")
    assert list(df["step"]) == ["Total", "0", "Total", "0"]


def test_two_tpu_hosts_equal_xprof(tmp_path):
    src = next((PROFILES / "tpu_v6e_inference" / "plugins" / "profile").glob("*/*.xplane.pb"))
    paths = host_copies(src, tmp_path, ["h1", "h2"])
    ref = oracle.tool_data(paths, "roofline_model")
    _check(roofline_model(xw.load_run(paths)), table(ref[0]), ref[1], "two TPU hosts")


def test_tpu_step_markers_are_not_reimplemented(tmp_path):
    """A TPU host with a `Steps` line: XProf fills per-step op databases from the TPU's
    step events (`ConvertTpuDeviceTraceXLineToStepEvents`), which we do not reimplement;
    the "Average" row is kept, the step rows are left out and `attrs["notes"]` says so."""
    from xprof_widgets.io import schema

    src = next((PROFILES / "tpu_v6e_inference" / "plugins" / "profile").glob("*/*.xplane.pb"))
    space = schema.XSpace()
    space.ParseFromString(src.read_bytes())
    plane = next(p for p in space.planes if p.name == "/device:TPU:0")
    line = plane.lines.add(id=999, name="Steps", timestamp_ns=plane.lines[0].timestamp_ns)
    line.events.add(metadata_id=next(iter(plane.event_metadata)), offset_ps=0, duration_ps=1000)
    folder = tmp_path / "plugins" / "profile" / "x"
    folder.mkdir(parents=True)
    (folder / "tpu.xplane.pb").write_bytes(space.SerializeToString())
    df = roofline_model(xw.load_run(str(folder)))
    assert "not reimplemented" in df.attrs["notes"]
    assert set(df["step"]) == {"Total", "Average"}
