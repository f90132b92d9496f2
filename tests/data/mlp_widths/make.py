"""Two small real JAX profiles for tests/test_compare.py: the same MLP step at
hidden width 256 (run `w256`) and 1024 (run `w1024`), 5 StepTraceAnnotation
steps each, on CPU. Each width runs in its own process (XLA puts the HloProtos
of everything the process compiled into a profile) and is compiled and run
twice before the trace, so the steps are steady.

    JAX_PLATFORMS=cpu python tests/data/mlp_widths/make.py tests/data/mlp_widths 256 w256
    JAX_PLATFORMS=cpu python tests/data/mlp_widths/make.py tests/data/mlp_widths 1024 w1024

Made with jax 0.10.2 / jaxlib 0.10.2. The Python tracer is off to keep the
files small; each .xplane.pb is gzipped (load_run reads .xplane.pb.gz).
"""

import gzip
import itertools
import shutil
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
from jax import random


def init(key, sizes):
    ps = []
    for a, b in itertools.pairwise(sizes):
        key, k = random.split(key)
        ps.append((random.normal(k, (a, b)) * 0.01, jnp.zeros(b)))
    return ps


def fwd(ps, x):
    for w, b in ps[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = ps[-1]
    return x @ w + b


def loss(ps, x, y):
    return jnp.mean((fwd(ps, x) - y) ** 2)


@jax.jit
def step(ps, x, y):
    value, grads = jax.value_and_grad(loss)(ps, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, ps, grads), value


def record(logdir, run, width):
    key = random.PRNGKey(0)
    ps = init(key, [256, width, width, 64])
    x, y = random.normal(key, (128, 256)), random.normal(key, (128, 64))
    for _ in range(2):  # compile and warm up outside the trace
        ps, value = step(ps, x, y)
    value.block_until_ready()
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    tmp = Path(logdir) / "_tmp"
    jax.profiler.start_trace(tmp, profiler_options=options)
    for i in range(5):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            ps, value = step(ps, x, y)
            value.block_until_ready()
    jax.profiler.stop_trace()
    (src,) = tmp.glob("plugins/profile/*/*.xplane.pb")
    dst = Path(logdir) / "plugins" / "profile" / run
    dst.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as f, gzip.open(dst / "host.xplane.pb.gz", "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    shutil.rmtree(tmp)


if __name__ == "__main__":
    record(sys.argv[1], sys.argv[3], int(sys.argv[2]))
