"""What every tool of `analysis` shares, as XProf's OpStats holds it for its converters.

`planes`: the planes and lines of an XSpace and their names (host, GPUs, TPU cores, the
lines XProf derives); `intervals`: nesting on a timeline (parents, children's time) and
tsl's SafeDivide. A module here imports nothing from a tool module (`.ci/run` checks the
layers: see DEVELOP.md).
"""
