"""Record a small, real JAX profile on an NVIDIA GPU (how tests/data/profiles/nvidia_jax_* were made).

usage: python tools/record_nvidia_jax.py OUT [--steps 8] [--only mlp]

Writes two runs under OUT, each a logdir (OUT/NAME/plugins/profile/SESSION/HOST.xplane.pb):

* `mlp`: a three-layer MLP trained with bf16 matrix products (f32 weights, an f32 head),
  each step in `jax.profiler.StepTraceAnnotation`, on batches made on the host with numpy
  and copied to the GPU inside the step (so the input pipeline has host time and a
  host-to-device copy to show), and an evaluation program every fourth step (two XLA
  modules). The training step is compiled before the trace starts; the evaluation
  program at its first use, step 3, inside the trace (so the profile has XLA's
  compilation and autotuning kernels in that step, as a user's first steps do).
* `mlp_no_steps`: the same steps without step annotations: what a user who forgot them sees.

XLA runs the compiled programs as CUDA graphs (command buffers) by default; run with
`XLA_FLAGS=--xla_gpu_enable_command_buffer=` to get a kernel per op launched on its own
(tests/data/profiles/nvidia_jax_mlp_no_graphs_h200 was recorded so, `--only mlp`).

And OUT/env.json: JAX, jaxlib and device versions, the host, the sessions. Needs a machine
with an NVIDIA GPU and JAX built for CUDA; nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

SIZES = (1024, 4096, 4096, 1000)
BATCH = 512


def init(key, sizes=SIZES):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        key, k = jax.random.split(key)
        w = jax.random.normal(k, (fan_in, fan_out), jnp.float32) / np.sqrt(fan_in)
        params.append({"w": w, "b": jnp.zeros(fan_out, jnp.float32)})
    return params


def forward(params, x):
    for layer in params[:-1]:
        h = jnp.dot(x.astype(jnp.bfloat16), layer["w"].astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        x = jax.nn.gelu(h + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]  # the head in f32


def loss(params, x, y):
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(forward(params, x)) * y, axis=-1))


@jax.jit
def train_step(params, x, y):
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), value


@jax.jit
def accuracy(params, x, y):
    return jnp.mean(jnp.argmax(forward(params, x), -1) == jnp.argmax(y, -1))


def host_batch(rng):
    x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return x, y


def train(params, rng, steps, annotate):
    for i in range(steps):
        ctx = jax.profiler.StepTraceAnnotation("train", step_num=i) if annotate else _Nothing()
        with ctx:
            x, y = (jax.device_put(a) for a in host_batch(rng))
            params, value = train_step(params, x, y)
            if i % 4 == 3:
                accuracy(params, x, y).block_until_ready()
            value.block_until_ready()
    return params


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def record(out: Path, name: str, steps: int, annotate: bool) -> str:
    rng = np.random.default_rng(0)
    params = init(jax.random.PRNGKey(0))
    params = train(params, rng, 2, annotate=False)  # compile both programs first
    logdir = Path(tempfile.mkdtemp())
    jax.profiler.start_trace(str(logdir))
    train(params, rng, steps, annotate)
    jax.profiler.stop_trace()
    (session,) = (logdir / "plugins" / "profile").iterdir()
    dest = out / name / "plugins" / "profile" / session.name
    dest.mkdir(parents=True)
    for f in session.glob("*.xplane.pb"):
        shutil.copy(f, dest / f.name)
    return session.name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--only", choices=["mlp", "mlp_no_steps"], help="record this run alone")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sessions = {
        name: record(args.out, name, args.steps, annotate=name == "mlp")
        for name in ("mlp", "mlp_no_steps")
        if args.only in (None, name)
    }
    device = jax.devices()[0]
    env = {
        "jax": jax.__version__,
        "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None,
        "device_kind": device.device_kind,
        "platform": device.platform,
        "device_count": jax.device_count(),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "sizes": SIZES,
        "batch": BATCH,
        "steps": args.steps,
        "sessions": sessions,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    (args.out / "env.json").write_text(json.dumps(env, indent=1))
    print(json.dumps(env, indent=1))


if __name__ == "__main__":
    main()
