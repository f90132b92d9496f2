"""XProf's inference profile (`inference_profile`, `inference_stats_to_data_table.cc`,
`inference_stats_sampler.cc`): the latency of a server's requests and where it went.

The requests and each one's breakdown come from the run's statistics
(`core.inference.host_requests`, every host's). As XProf shows them:

* **Requests sampled at percentiles**: sorted by latency (then start); with at most 60
  requests every one, at its percentile 100 x i / n; otherwise those whose percentile falls
  in [50, 51), [75, 76), [90, 91), [99, 99.5), [99.9, 99.95), [99.99, 99.995), ten at most
  in each; then the average of every column ("Average", picoseconds summed and divided
  as whole numbers).
* **Average latency** (ms) and **throughput**: requests per second over the time from the
  first request's start to the last one's end.

* **Per model** (the `model_id` of the request, of its batch's session run for TF Serving's
  `BatchingSessionRun`; "ALL" where none is recorded), tables in name order.
* **Batches** (TF Serving's and Orbax's `ProcessBatch`, each its own group, its requests the
  groups that reach it): each batch's latency, padding, padded size, efficiency (real over
  padded size), delay (its start less its first request's), device time (its programs,
  merged) and program ids; per padded size a row of averages in both tables; the batch
  table's "Aggregated" row. A request's wait for its batch is its own column ("Request
  delay for batching"; XProf's id `host_batch_formation`).

* **Batching parameters** of a model TF Serving batches (its `/host:tfstreamz` metrics: the
  number of batch threads, the batch timeout, the largest batch, the most enqueued batches,
  the allowed batch sizes), and **tensor patterns**: per model, each pattern of the TPU
  runtime's tensor conversions (`Linearize`, `Delinearize`,
  `TransferBufferFromDevice-FastPath` with their shapes and layouts) that its requests
  (their own) and its batches had, how often, and the time at the 50, 75, 90, 95, 99 and
  99.9th percentiles (the value at index int(p / 100 x n) of the sorted times). XProf's page
  cannot show the patterns (its table count then disagrees with its own flag and the page
  shows no table); we show them.

XProf 2.24.2 does not list this tool for a run (its tool list leaves it out), but answers it;
we offer it where the run has requests. XProf's arithmetic is kept where it is odd: a
request's "first" and "last" batch are both its smallest batch id, the per-size request row
shows the batches' device time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core.inference import no_batches, no_requests
from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike

COLUMNS = [
    "percentile",
    "request_id",
    "latency_ms",
    "host_preprocessing_ms",
    "host_runtime_ms",
    "data_transfer_h2d_ms",
    "data_transfer_d2h_ms",
    "device_compute_ms",
    "host_postprocess_ms",
    "idle_ms",
]
_PARTS = {
    "latency_ms": "latency_ps",
    "host_preprocessing_ms": "host_preprocess_ps",
    "host_runtime_ms": "host_runtime_ps",
    "data_transfer_h2d_ms": "h2d_ps",
    "data_transfer_d2h_ms": "d2h_ps",
    "device_compute_ms": "device_ps",
    "host_postprocess_ms": "host_postprocess_ps",
    "idle_ms": "idle_ps",
}
#: XProf's sampling windows: (percentile, width), and how many requests each shows at most.
WINDOWS = ((50.0, 1.0), (75.0, 1.0), (90.0, 1.0), (99.0, 0.5), (99.9, 0.05), (99.99, 0.005))
PER_WINDOW = 10
SAMPLE_ALL_UP_TO = 60
NO_REQUESTS = (
    "no inference requests: XProf's inference profile reads requests a server marks, events with "
    "root level -1 (`jax.profiler.TraceAnnotation('Request', _r=-1)`) or `ModelServerRequest_...` "
    "events, each grouped with the work it launches"
)


BATCHING_COLUMNS = ["request_size", "batching_delay_ms", "throughput"]
BATCH_COLUMNS = [
    "percentile",
    "batch_id",
    "latency_ms",
    "padding_amount",
    "batch_size_after_padding",
    "batching_efficiency",
    "batching_delay_ms",
    "throughput",
    "device_compute_ms",
    "program_ids",
]
#: The model name XProf gives every request and batch where no model id is recorded.
ALL_MODELS = "ALL"
#: XProf's percentiles of a tensor pattern's conversion time.
TENSOR_PERCENTILES = (50.0, 75.0, 90.0, 95.0, 99.0, 99.9)
TENSOR_PATTERN_COLUMNS = ["tensor_pattern", "count", *(f"p{p:g}_ms" for p in TENSOR_PERCENTILES)]


@dataclass
class ModelProfile:
    """One model's tables (XProf's per-model request and batch tables).

    requests: the sampled requests, a "Batch size k" row per padded batch size where the
        run batches, and the "Average" row: percentile, request_id, latency_ms, (where the
        run batches: request_size, batching_delay_ms (its wait for its batch), throughput
        (requests/s of the row, "N/A" for a request)), then the breakdown (ms).
    batches: the sampled batches, a row per batch size, "Aggregated" (None where the run
        does not batch): BATCH_COLUMNS.
    average_latency_ms, throughput: of its requests; batch_average_latency_ms,
    batch_throughput: of its batches.
    batching_params: TF Serving's batching parameters of the model
        (`core.inference.BATCHING_PARAMS`), None where the run recorded none.
    tensor_patterns: one row a tensor pattern (TENSOR_PATTERN_COLUMNS: the pattern, its
        count, its time at each of TENSOR_PERCENTILES in ms), most frequent first; None
        where no request or batch of the run has one.
    """

    requests: pd.DataFrame
    batches: pd.DataFrame | None = None
    average_latency_ms: float = 0.0
    throughput: float = 0.0
    batch_average_latency_ms: float = 0.0
    batch_throughput: float = 0.0
    batching_params: dict | None = None
    tensor_patterns: pd.DataFrame | None = None


@dataclass
class InferenceProfile:
    """XProf's inference profile of a run (see the module doc).

    models: the model ids in XProf's order (by name; "ALL" where no model id is recorded);
    per_model: {model: ModelProfile}; has_batching: whether any model ran batches.
    requests, average_latency_ms, throughput, batches: the first model's (a run of one model:
        its tables). all_requests / all_batches: every request and batch, one row each
        (`core.inference.host_inference`' columns, ps). reason: why there is no request ("").
    """

    requests: pd.DataFrame
    all_requests: pd.DataFrame = field(default_factory=no_requests)
    average_latency_ms: float = 0.0
    throughput: float = 0.0
    batches: pd.DataFrame | None = None
    reason: str = ""
    models: list = field(default_factory=list)
    per_model: dict = field(default_factory=dict)
    has_batching: bool = False
    all_batches: pd.DataFrame = field(default_factory=no_batches)


def _sampled(n: int) -> list[tuple[int, float]]:
    """(index, percentile) of the requests XProf shows, of n sorted by latency."""
    if n <= SAMPLE_ALL_UP_TO:
        return [(i, 100.0 * i / n) for i in range(n)]
    out = []
    for p, width in WINDOWS:
        found = [(i, 100.0 * i / n) for i in range(n) if p <= 100.0 * i / n < p + width]
        out.extend(found[:PER_WINDOW])
    return out


def _rate(frame) -> tuple[float, float]:
    """(items per second over first start to last end, mean latency in ms) of a table."""
    if frame.empty:
        return 0.0, 0.0
    span_s = (int(frame["end_ps"].max()) - int(frame["begin_ps"].min())) / 1e12
    mean_us = (frame["latency_ps"].to_numpy(np.float64) / 1e6).sum() / len(frame)
    return (len(frame) / span_s if span_s > 0 else 0.0), mean_us / 1000


_MS = {k: v for k, v in _PARTS.items() if k != "latency_ms"}


def _request_row(percentile, request_id, x, batching, throughput):
    row = {"percentile": percentile, "request_id": request_id, "latency_ms": float(x["latency_ps"]) / 1e9}
    if batching:
        row.update(request_size=float(x["size"]), batching_delay_ms=float(x["delay_ps"]) / 1e9, throughput=throughput)
    row.update({k: float(x[v]) / 1e9 for k, v in _MS.items()})
    return row


def _request_average(r) -> dict:
    n = len(r)
    if n == 0:
        return dict.fromkeys(["latency_ps", "size", "delay_ps", *_MS.values()], 0)
    out = {k: int(r[k].sum()) // n for k in ["latency_ps", "delay_ps", *_MS.values()]}
    out["size"] = int(int(r["size"].sum()) / n)
    return out


def _batch_average(b) -> dict:
    n = len(b)
    if n == 0:
        return {"latency_ps": 0, "padding": 0, "size": 0, "delay_ps": 0, "device_ps": 0, "efficiency": 0.0}
    size, padding = int(b["size"].sum()), int(b["padding"].sum())
    return {
        "latency_ps": int(b["latency_ps"].sum()) // n,
        "padding": int(padding / n),
        "size": int(size / n),
        "delay_ps": int(b["delay_ps"].sum()) // n,
        "device_ps": int(b["device_ps"].sum()) // n,
        "efficiency": (size - padding) / size if size else 0.0,  # XProf's: real over padded, summed
    }


def _batch_row(percentile, batch_id, x, throughput, programs):
    return {
        "percentile": percentile,
        "batch_id": batch_id,
        "latency_ms": float(x["latency_ps"]) / 1e9,
        "padding_amount": float(x["padding"]),
        "batch_size_after_padding": float(x["size"]),
        "batching_efficiency": float(x["efficiency"]),
        "batching_delay_ms": float(x["delay_ps"]) / 1e9,
        "throughput": throughput,
        "device_compute_ms": float(x["device_ps"]) / 1e9,
        "program_ids": programs,
    }


def _programs(ids) -> str:
    return ", ".join(str(i) for i in ids)


def _model_profile(r: pd.DataFrame, b: pd.DataFrame, batching: bool) -> ModelProfile:
    """One model's tables (XProf's `AggregatePerModelInferenceStats`, sampler and tables)."""
    r = r.sort_values(["latency_ps", "begin_ps"], kind="stable").reset_index(drop=True)
    b = b.sort_values(["latency_ps", "begin_ps"], kind="stable").reset_index(drop=True)
    throughput, latency = _rate(r)
    batch_throughput, batch_latency = _rate(b)
    columns = COLUMNS[:3] + (BATCHING_COLUMNS if batching else []) + COLUMNS[3:]
    ids = r["request_id"].to_numpy(np.int64)
    rows = [_request_row(f"{p:.3f}", str(int(ids[i])), r.iloc[i], batching, "N/A") for i, p in _sampled(len(r))]
    sizes = sorted(set(b["size"].tolist())) if batching else []
    for size in sizes:
        in_bucket = [i for i, got in enumerate(r["bucket_sizes"]) for s in got if s == size]
        average = _request_average(r.iloc[in_bucket])
        average["device_ps"] = _batch_average(b[b["size"] == size])["device_ps"]  # (XProf 2.24.2 shows the batches')
        rate = len(in_bucket) * throughput / len(r) if len(r) else 0.0
        rows.append(_request_row(f"Batch size {size}", "N/A", average, batching, f"{rate:.1f}"))
    rows.append(_request_row("Average", "N/A", _request_average(r), batching, f"{throughput:.1f}"))
    requests = pd.DataFrame(rows, columns=columns)
    batches = None
    if batching:
        bids, progs = b["batch_id"].to_numpy(np.int64), b["program_ids"].tolist()
        brows = [
            _batch_row(f"{p:.3f}", str(int(bids[i])), b.iloc[i], "N/A", _programs(progs[i]))
            for i, p in _sampled(len(b))
        ]
        for size in sizes:
            bucket = b[b["size"] == size]
            seen = list(dict.fromkeys(p for ids in bucket["program_ids"] for p in ids))
            rate = len(bucket) * batch_throughput / len(b)
            brows.append(
                _batch_row(f"Batch size {size}", "N/A", _batch_average(bucket), f"{rate:.1f}", _programs(seen))
            )
        brows.append(_batch_row("Aggregated", "N/A", _batch_average(b), f"{batch_throughput:.1f}", "N/A"))
        batches = pd.DataFrame(brows, columns=BATCH_COLUMNS)
    return ModelProfile(requests, batches, latency, throughput, batch_latency, batch_throughput)


def tensor_patterns(requests: pd.DataFrame, batches: pd.DataFrame) -> pd.DataFrame:
    """One model's tensor patterns (see the module doc) from its requests' own and its
    batches' (`core.inference` columns tensor_pattern, tensor_ps)."""
    details = pd.concat(
        [f[["tensor_pattern", "tensor_ps"]] for f in (requests, batches) if "tensor_pattern" in f],
        ignore_index=True,
    )
    details = details[details["tensor_pattern"].astype(str) != ""]
    rows = []
    for pattern, group in details.groupby("tensor_pattern", sort=True):
        times = np.sort(group["tensor_ps"].to_numpy(np.int64))
        n = len(times)
        rows.append([pattern, n, *(times[int(p / 100.0 * n)] / 1e9 for p in TENSOR_PERCENTILES)])
    out = pd.DataFrame(rows, columns=TENSOR_PATTERN_COLUMNS)
    return out.sort_values("count", ascending=False, kind="stable").reset_index(drop=True)


def inference_profile(source: RunStats | RunLike) -> InferenceProfile:
    """XProf's inference profile of a run's statistics (a run: read in this process)."""
    stats = as_stats(source)
    req, bat = stats.requests, stats.batches
    if req.empty:
        return InferenceProfile(requests=pd.DataFrame(columns=COLUMNS), reason=NO_REQUESTS)
    named = sorted({m for m in req["model_id"].tolist() if m})
    batching = len(bat) > 0
    per_model = {}
    if not named:
        per_model[ALL_MODELS] = _model_profile(req, bat, batching)
    else:
        for model in named:
            per_model[model] = _model_profile(req[req["model_id"] == model], bat[bat["model_id"] == model], batching)
    # Tensor patterns: a table for every model once any request or batch of the run has one.
    any_pattern = any(
        "tensor_pattern" in f and (f["tensor_pattern"].astype(str) != "").any() for f in (req, bat) if len(f)
    )
    params = stats.batching_params
    for model, profile in per_model.items():
        mine = (req, bat) if model == ALL_MODELS else (req[req["model_id"] == model], bat[bat["model_id"] == model])
        profile.tensor_patterns = tensor_patterns(*mine) if any_pattern else None
        profile.batching_params = params.get(model) if model != ALL_MODELS else None
    models = list(per_model)
    first = per_model[models[0]]
    return InferenceProfile(
        requests=first.requests,
        all_requests=req.reset_index(drop=True),
        average_latency_ms=first.average_latency_ms,
        throughput=first.throughput,
        batches=first.batches,
        models=models,
        per_model=per_model,
        has_batching=batching,
        all_batches=bat.reset_index(drop=True),
    )


__all__ = [
    "BATCH_COLUMNS",
    "COLUMNS",
    "TENSOR_PATTERN_COLUMNS",
    "InferenceProfile",
    "ModelProfile",
    "inference_profile",
    "tensor_patterns",
]
