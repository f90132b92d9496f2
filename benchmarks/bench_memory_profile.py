"""Memory profile: xprof-widgets against XProf 2.24.2 on the same file, same machine.

    python benchmarks/bench_memory_profile.py FILE.xplane.pb [--repeat 3] [--xprof-python PYTHON]

Each measurement runs in a fresh process (its own peak RSS), times start after
the imports. Ours: load_run + memory_profile() of the first allocator, then
building the MemoryProfileWidget, and how many bytes its synced state (figures
+ HTML) sends to the page. XProf: xspace_to_tool_data(..., "memory_profile")
on a fresh copy of the file. Make a big input with
`tile_xplane.py tf_keras_cpu/.../vm.xplane.pb OUT --times 50` (~1 M allocator
events).
"""

from pathlib import Path

from _common import median, ours_against_xprof, ours_tool_script

OURS = ours_tool_script(
    "memory_profile",
    "MemoryProfileWidget",
    "memory_profile",
    '{"snapshots": len(result.timeline), "points_drawn": len(result.sampled_timeline()), '
    '"bytes_to_page": len(json.dumps(widget.figures)) + len(widget.html)}',
)


def main():
    args, ours, theirs = ours_against_xprof(__doc__, OURS, "memory_profile")
    print(
        f"{Path(args.file).name} ({Path(args.file).stat().st_size / 1e6:.1f} MB), "
        f"{ours[0]['snapshots']:,} allocator snapshots, median of {args.repeat}:\n"
        f"  ours : open {median(ours, 'open_s'):.2f} s, + memory_profile {median(ours, 'analysis_s'):.2f} s, "
        f"+ widget {median(ours, 'widget_s'):.2f} s; {ours[0]['points_drawn']} points and "
        f"{median(ours, 'bytes_to_page') / 1e3:.0f} KB sent to the page; peak RSS {median(ours, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  XProf: memory_profile {median(theirs, 'seconds'):.2f} s, {median(theirs, 'bytes') / 1e3:.0f} KB of JSON; "
        f"peak RSS {median(theirs, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  ratio ours (open to widget) / XProf: time {median(ours, 'widget_s') / median(theirs, 'seconds'):.3f}, "
        f"memory {median(ours, 'peak_rss_bytes') / median(theirs, 'peak_rss_bytes'):.3f}"
    )


if __name__ == "__main__":
    main()
