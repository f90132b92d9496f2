"""Record a small, real JAX profile on an NVIDIA GPU (how tests/data/profiles/nvidia_jax_* were made).

usage: python tools/record_nvidia_jax.py OUT [--steps 8] [--only mlp|mlp_no_steps|scan|conv|remat]

Writes two runs under OUT, each a logdir (OUT/NAME/plugins/profile/SESSION/HOST.xplane.pb):

* `mlp`: a three-layer MLP trained with bf16 matrix products (f32 weights, an f32 head),
  each step in `jax.profiler.StepTraceAnnotation`, on batches made on the host with numpy
  and copied to the GPU inside the step (so the input pipeline has host time and a
  host-to-device copy to show), and an evaluation program every fourth step (two XLA
  modules). The training step is compiled before the trace starts; the evaluation
  program at its first use, step 3, inside the trace (so the profile has XLA's
  compilation and autotuning kernels in that step, as a user's first steps do).
* `mlp_no_steps`: the same steps without step annotations: what a user who forgot them sees.
* `scan` (only with `--only scan`): loops on the device, as large JAX models run them: four
  identical layers applied by `jax.lax.scan`, the gradient accumulated over two
  micro-batches by `jax.lax.fori_loop` (XLA while loops, one inside the other), steps
  annotated, compiled before the trace.
* `conv` (only with `--only conv`): a small convolution net (three 3x3 convolutions, NHWC,
  bf16, cuDNN's kernels), its gradient buffers zeroed on the device (memsets), steps
  annotated.
* `remat` (only with `--only remat`): the scan's layers under `jax.checkpoint` (the backward
  pass recomputes them), recorded with the Python tracer on (`python_tracer_level=1`).

XLA runs the compiled programs as CUDA graphs (command buffers) by default; run with
`XLA_FLAGS=--xla_gpu_enable_command_buffer=` to get a kernel per op launched on its own
(tests/data/profiles/nvidia_jax_mlp_no_graphs_h200 was recorded so, `--only mlp`).

And OUT/env.json: JAX, jaxlib and device versions, the host, the sessions. Needs a machine
with an NVIDIA GPU and JAX built for CUDA; nothing else.
"""

from __future__ import annotations

import argparse
import contextlib
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


LAYERS, WIDTH = 4, 1024


def init_stacked(key):
    k1, k2 = jax.random.split(key)
    layers = {
        "w": jax.random.normal(k1, (LAYERS, WIDTH, WIDTH), jnp.float32) / np.sqrt(WIDTH),
        "b": jnp.zeros((LAYERS, WIDTH), jnp.float32),
    }
    head = jax.random.normal(k2, (WIDTH, SIZES[-1]), jnp.float32) / np.sqrt(WIDTH)
    return {"layers": layers, "head": head}


def scan_forward(params, x):
    def layer(h, p):
        z = jnp.dot(h.astype(jnp.bfloat16), p["w"].astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        return jax.nn.gelu(z + p["b"]), None

    h, _ = jax.lax.scan(layer, x, params["layers"])
    return h @ params["head"]


def scan_loss(params, x, y):
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(scan_forward(params, x)) * y, axis=-1))


@jax.jit
def scan_train_step(params, x, y):
    micro = 2
    xs, ys = x.reshape(micro, -1, x.shape[-1]), y.reshape(micro, -1, y.shape[-1])

    def accumulate(i, carry):
        total, grads = carry
        value, g = jax.value_and_grad(scan_loss)(params, xs[i], ys[i])
        return total + value, jax.tree_util.tree_map(jnp.add, grads, g)

    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    total, grads = jax.lax.fori_loop(0, micro, accumulate, (0.0, zeros))
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g / micro, params, grads), total / micro


def record_scan(out: Path, steps: int) -> str:
    rng = np.random.default_rng(0)
    params = init_stacked(jax.random.PRNGKey(0))
    x, y = host_batch(rng)
    x = x[:, :WIDTH]
    params, value = scan_train_step(params, x, y)  # compile first
    value.block_until_ready()
    logdir = Path(tempfile.mkdtemp())
    jax.profiler.start_trace(str(logdir))
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x, y = host_batch(rng)
            params, value = scan_train_step(params, jax.device_put(x[:, :WIDTH]), jax.device_put(y))
            value.block_until_ready()
    jax.profiler.stop_trace()
    return _keep(logdir, out, "scan")


CONV_CHANNELS = (3, 32, 64, 64)
IMAGE = 32


def init_conv(key):
    params = []
    for c_in, c_out in zip(CONV_CHANNELS[:-1], CONV_CHANNELS[1:], strict=True):
        key, k = jax.random.split(key)
        params.append(jax.random.normal(k, (3, 3, c_in, c_out), jnp.float32) / np.sqrt(9 * c_in))
    key, k = jax.random.split(key)
    head = jax.random.normal(k, (CONV_CHANNELS[-1], 10), jnp.float32) / 8.0
    return {"convs": params, "head": head}


def conv_loss(params, x, y):
    h = x
    for w in params["convs"]:
        h = jax.lax.conv_general_dilated(
            h.astype(jnp.bfloat16),
            w.astype(jnp.bfloat16),
            (1, 1),
            "SAME",
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
            preferred_element_type=jnp.float32,
        )
        h = jax.nn.relu(h)
    logits = jnp.mean(h, axis=(1, 2)) @ params["head"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=-1))


@jax.jit
def conv_train_step(params, x, y):
    value, grads = jax.value_and_grad(conv_loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-2 * g, params, grads), value


def conv_batch(rng):
    x = rng.standard_normal((64, IMAGE, IMAGE, CONV_CHANNELS[0]), dtype=np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
    return x, y


def record_conv(out: Path, steps: int) -> str:
    rng = np.random.default_rng(0)
    params = init_conv(jax.random.PRNGKey(0))
    params, value = conv_train_step(params, *conv_batch(rng))  # compile first
    value.block_until_ready()
    logdir = Path(tempfile.mkdtemp())
    jax.profiler.start_trace(str(logdir))
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x, y = (jax.device_put(a) for a in conv_batch(rng))
            params, value = conv_train_step(params, x, y)
            value.block_until_ready()
    jax.profiler.stop_trace()
    return _keep(logdir, out, "conv")


def remat_loss(params, x, y):
    def layer(h, p):
        z = jnp.dot(h.astype(jnp.bfloat16), p["w"].astype(jnp.bfloat16), preferred_element_type=jnp.float32)
        return jax.nn.gelu(z + p["b"]), None

    h, _ = jax.lax.scan(jax.checkpoint(layer), x, params["layers"])
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ params["head"]) * y, axis=-1))


@jax.jit
def remat_train_step(params, x, y):
    value, grads = jax.value_and_grad(remat_loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 1e-3 * g, params, grads), value


def record_remat(out: Path, steps: int) -> str:
    rng = np.random.default_rng(0)
    params = init_stacked(jax.random.PRNGKey(0))
    x, y = host_batch(rng)
    params, value = remat_train_step(params, x[:, :WIDTH], y)  # compile first
    value.block_until_ready()
    logdir = Path(tempfile.mkdtemp())
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 1
    jax.profiler.start_trace(str(logdir), profiler_options=options)
    for i in range(steps):
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            x, y = host_batch(rng)
            params, value = remat_train_step(params, jax.device_put(x[:, :WIDTH]), jax.device_put(y))
            value.block_until_ready()
    jax.profiler.stop_trace()
    return _keep(logdir, out, "remat")


def host_batch(rng):
    x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
    y = np.eye(SIZES[-1], dtype=np.float32)[rng.integers(0, SIZES[-1], BATCH)]
    return x, y


def train(params, rng, steps, annotate):
    for i in range(steps):
        ctx = jax.profiler.StepTraceAnnotation("train", step_num=i) if annotate else contextlib.nullcontext()
        with ctx:
            x, y = (jax.device_put(a) for a in host_batch(rng))
            params, value = train_step(params, x, y)
            if i % 4 == 3:
                accuracy(params, x, y).block_until_ready()
            value.block_until_ready()
    return params


def record(out: Path, name: str, steps: int, annotate: bool) -> str:
    rng = np.random.default_rng(0)
    params = init(jax.random.PRNGKey(0))
    params = train(params, rng, 2, annotate=False)  # compiles the training step (evaluation: at step 3)
    logdir = Path(tempfile.mkdtemp())
    jax.profiler.start_trace(str(logdir))
    train(params, rng, steps, annotate)
    jax.profiler.stop_trace()
    return _keep(logdir, out, name)


def _keep(logdir: Path, out: Path, name: str) -> str:
    """Copies the one run jax.profiler wrote under `logdir` to OUT/name; its session name."""
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
    parser.add_argument(
        "--only", choices=["mlp", "mlp_no_steps", "scan", "conv", "remat"], help="record this run alone"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in ("scan", "conv", "remat"):
        recorder = {"scan": record_scan, "conv": record_conv, "remat": record_remat}[args.only]
        sessions = {args.only: recorder(args.out, args.steps)}
    else:
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
