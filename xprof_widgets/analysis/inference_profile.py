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

XProf 2.24.2 does not list this tool for a run (its tool list leaves it out), but answers it;
we offer it where the run has requests. Not reimplemented: batches, per-model tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core.inference import REQUEST_COLUMNS, no_requests
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


@dataclass
class InferenceProfile:
    """XProf's inference profile of a run (see the module doc).

    requests: DataFrame of the sampled requests and the "Average" row: percentile (as XProf
        writes it, "50.505"), request_id, latency_ms and its breakdown (host_preprocessing_ms,
        host_runtime_ms, data_transfer_h2d_ms, data_transfer_d2h_ms, device_compute_ms,
        host_postprocess_ms, idle_ms).
    all_requests: every request, one row each (`core.inference.host_requests`' columns, ps).
    average_latency_ms: the mean latency; throughput: requests per second.
    batches: None (batching is not reimplemented); reason: why there is no request ("").
    """

    requests: pd.DataFrame
    all_requests: pd.DataFrame = field(default_factory=no_requests)
    average_latency_ms: float = 0.0
    throughput: float = 0.0
    batches: pd.DataFrame | None = None
    reason: str = ""


def _sampled(n: int) -> list[tuple[int, float]]:
    """(index, percentile) of the requests XProf shows, of n sorted by latency."""
    if n <= SAMPLE_ALL_UP_TO:
        return [(i, 100.0 * i / n) for i in range(n)]
    out = []
    for p, width in WINDOWS:
        found = [(i, 100.0 * i / n) for i in range(n) if p <= 100.0 * i / n < p + width]
        out.extend(found[:PER_WINDOW])
    return out


def inference_profile(source: RunStats | RunLike) -> InferenceProfile:
    """XProf's inference profile of a run's statistics (a run: read in this process)."""
    req = as_stats(source).requests
    if req.empty:
        return InferenceProfile(requests=pd.DataFrame(columns=COLUMNS), reason=NO_REQUESTS)
    r = req.sort_values(["latency_ps", "begin_ps"], kind="stable").reset_index(drop=True)
    n = len(r)
    rows = []
    for i, pct in _sampled(n):
        x = r.iloc[i]
        rows.append(
            {"percentile": f"{pct:.3f}", "request_id": str(int(x.request_id))}
            | {k: float(x[v]) / 1e9 for k, v in _PARTS.items()}
        )
    rows.append(
        {"percentile": "Average", "request_id": "N/A"}
        | {k: float(int(r[v].sum()) // n) / 1e9 for k, v in _PARTS.items()}
    )
    span_s = (int(r["end_ps"].max()) - int(r["begin_ps"].min())) / 1e12
    return InferenceProfile(
        requests=pd.DataFrame(rows, columns=COLUMNS),
        all_requests=req[REQUEST_COLUMNS].reset_index(drop=True),
        average_latency_ms=float(r["latency_ps"].to_numpy(np.float64).mean()) / 1e9,
        throughput=n / span_s if span_s > 0 else 0.0,
    )


__all__ = ["COLUMNS", "InferenceProfile", "inference_profile"]
