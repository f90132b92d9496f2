"""Overview page: xprof-widgets against XProf 2.24.2 on the same file, same machine.

    python benchmarks/bench_overview.py FILE.xplane.pb [--repeat 3] [--xprof-python PYTHON]

The overview is what `ProfileWidget` shows first. Each measurement runs in a fresh
process (its own peak RSS), times start after the imports. Ours: `load_run` +
`overview()` (steps found by the event grouping, each step's breakdown, op statistics),
then building the OverviewWidget. XProf: `xspace_to_tool_data(..., "overview_page")` on
a fresh copy of the file. Make a big input with `tile_xplane.py
jax_transformer_cpu/.../vm.xplane.pb OUT --times 12` (9.7 M events, 185 MB).
"""

from pathlib import Path

from _common import median, ours_against_xprof, ours_tool_script

OURS = ours_tool_script("overview", "OverviewWidget", "overview", '{"steps": len(result.steps)}')


def main():
    args, ours, theirs = ours_against_xprof(__doc__, OURS, "overview_page")
    print(
        f"{Path(args.file).name} ({Path(args.file).stat().st_size / 1e6:.1f} MB), {ours[0]['steps']} steps, "
        f"median of {args.repeat}:\n"
        f"  ours : open {median(ours, 'open_s'):.2f} s, + overview {median(ours, 'analysis_s'):.2f} s, "
        f"+ widget {median(ours, 'widget_s'):.2f} s; peak RSS {median(ours, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  XProf: overview_page {median(theirs, 'seconds'):.2f} s; peak RSS {median(theirs, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  ratio ours (open to widget) / XProf: time {median(ours, 'widget_s') / median(theirs, 'seconds'):.3f}, "
        f"memory {median(ours, 'peak_rss_bytes') / median(theirs, 'peak_rss_bytes'):.3f}"
    )


if __name__ == "__main__":
    main()
