"""`run.events()`: the DataFrame of every event, built from codes and shared columns, holds
what a frame built line by line from strings holds, for every filter."""

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw

from .conftest import PROFILES


def _reference(run, plane=None, line=None, host=None):
    """The events frame the slow, obvious way: a frame of strings per line, concatenated."""
    frames = []
    for space in run.xspaces() if host is None else [run.xspace(host)]:
        for p in space.planes:
            if plane is not None and p.name != plane:
                continue
            for ln in p.lines:
                if (line is not None and line not in (ln.name, ln.display_name)) or not len(ln):
                    continue
                frames.append(
                    pd.DataFrame(
                        {
                            "host": space.host,
                            "plane": p.name,
                            "line": ln.title,
                            "name": np.asarray(ln.names(), dtype=object),
                            "start_ps": np.asarray(ln.start_ps),
                            "duration_ps": np.asarray(ln.event_duration_ps),
                            "metadata_id": np.asarray(ln.metadata_id),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)


def _same(got, expected):
    assert list(got.columns) == list(expected.columns)
    for column in ("host", "plane", "line", "name"):
        assert isinstance(got[column].dtype, pd.CategoricalDtype)
        assert list(got[column].cat.categories) == sorted(set(got[column].dropna()))  # sorted, the used ones
        assert got[column].astype(object).tolist() == expected[column].tolist()
    assert got["start_ps"].dtype == got["duration_ps"].dtype == np.int64
    assert got["metadata_id"].dtype == np.int32  # the ids fit: kept narrow (issue 18)
    for column in ("start_ps", "duration_ps", "metadata_id"):
        np.testing.assert_array_equal(got[column].to_numpy(), expected[column].to_numpy())


@pytest.fixture(scope="module")
def pod():
    """Two hosts, GPU and host planes: names that repeat across planes and hosts."""
    return xw.load_run(PROFILES / "tf_gpu_multiworker")


def test_all_events_of_every_host(pod):
    assert len(pod.hosts) == 2
    _same(pod.events(), _reference(pod))


def test_filters(pod):
    host = pod.hosts[1]
    space = pod.xspace(host)
    busiest = max((p for p in space.planes), key=lambda p: p.event_count)
    line = max(busiest.lines, key=len)
    _same(pod.events(host=host), _reference(pod, host=host))
    _same(pod.events(plane=busiest.name), _reference(pod, plane=busiest.name))
    _same(pod.events(line=line.name, host=host), _reference(pod, line=line.name, host=host))
    empty = pod.events(plane="no such plane")
    assert empty.empty and list(empty.columns) == list(_reference(pod).columns)


def test_one_hosts_columns_are_shared_and_safe_to_change(pod):
    host = pod.hosts[0]
    start = pod.xspace(host).event_columns()[0]["start_ps"]
    events = pod.events(host=host)
    assert np.shares_memory(events["start_ps"].to_numpy(), start.to_numpy())
    events["start_ps"] += 1  # copy-on-write: the run's columns stay as they were
    np.testing.assert_array_equal(pod.events(host=host)["start_ps"].to_numpy(), start.to_numpy())
    assert (events["start_ps"].to_numpy() == start.to_numpy() + 1).all()
