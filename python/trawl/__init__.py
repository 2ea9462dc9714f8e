"""trawl from Python: flows, per-second series, flow-database queries and stored packets as
Apache Arrow tables (pyarrow), built by trawl's own Rust code.

Every function does its work with the GIL released and can be interrupted with Ctrl-C
(``KeyboardInterrupt``). Errors trawl reports (an unreadable capture, a bad filter or condition,
a directory that is no database) raise :class:`TrawlError` with trawl's message.

The tables cross from Rust into pyarrow through the Arrow C data interface: pyarrow's columns
are the buffers trawl built, not copies. ``.to_pandas()`` and ``polars.from_arrow()`` work on
them as on any pyarrow table.
"""
from __future__ import annotations

import datetime as _dt
import os
from typing import Iterable, Iterator, Optional, Sequence, Tuple, Union

import pyarrow as pa

from . import _trawl
from ._trawl import TrawlError

__all__ = ["flows", "series", "query", "open_db", "packets", "TrawlError"]

PathLike = Union[str, "os.PathLike[str]"]
Duration = Union[str, int, float, _dt.timedelta]
Time = Union[str, int, _dt.datetime, None]


def _paths(paths: Union[PathLike, Iterable[PathLike]]) -> list:
    if isinstance(paths, (str, bytes, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _duration(value: Duration) -> str:
    """A duration as trawl's flags spell it: text as is (``"30s"``, ``"500ms"``), numbers as
    seconds, :class:`datetime.timedelta` exactly (in nanoseconds)."""
    if isinstance(value, str):
        return value
    if isinstance(value, _dt.timedelta):
        ns = (value.days * 86_400 + value.seconds) * 1_000_000_000 + value.microseconds * 1_000
        return f"{ns}ns"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{round(value * 1_000_000_000)}ns"
    raise TypeError(f"a duration is text ('30s'), seconds or a timedelta, not {value!r}")


def _time_ns(value: Time) -> Optional[int]:
    """A time in ns since the epoch: ``None`` stays ``None``; an ``int`` is ns; a ``datetime``
    (naive means UTC); text in any form the commands take (``'2026-11-22T12:05:00Z'``,
    ``'-15m'``, ``'now'``, epoch seconds)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"a time is text, ns since the epoch or a datetime, not {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    if isinstance(value, str):
        return _trawl.parse_time(value)
    raise TypeError(f"a time is text, ns since the epoch or a datetime, not {value!r}")


def _ifaces(ifaces: Union[str, Sequence[str], None]) -> list:
    if ifaces is None:
        return []
    if isinstance(ifaces, str):
        return [i for i in ifaces.split(",") if i]
    return list(ifaces)


def flows(
    paths: Union[PathLike, Iterable[PathLike]],
    filter: Optional[str] = None,
    idle: Duration = "30s",
    active: Duration = "30m",
    tcp_linger: Duration = "2s",
    capacity: int = 4 << 20,
    payload_bytes: int = 0,
    tunnel: str = "outer",
    addresses: str = "string",
) -> pa.Table:
    """Meters capture files into flow records, as ``trawl flows -r``.

    ``paths``: one capture file or several (pcap, pcapng, gzip/zstd compressed), merged by
    packet time. ``filter``: a tcpdump expression. ``idle``, ``active``, ``tcp_linger``,
    ``capacity``, ``payload_bytes``, ``tunnel`` (``"outer"``/``"inner"``): the flags of the
    same names. ``addresses``: ``"string"`` (``"10.0.0.1"``) or ``"binary"`` (4 or 16 bytes).

    One row per flow record with the fields of ``docs/specs/flow-record.md`` (the CLI's JSON
    keys); ``first_ns`` and ``last_ns`` are ``timestamp[ns, UTC]``, the lengths and gaps of the
    first packets lists, payloads (with ``payload_bytes``) binary.
    """
    if addresses not in ("string", "binary"):
        raise ValueError(f"addresses must be 'string' or 'binary', not {addresses!r}")
    return _trawl.flows(
        _paths(paths),
        filter,
        _duration(idle),
        _duration(active),
        _duration(tcp_linger),
        capacity,
        payload_bytes,
        tunnel,
        addresses == "binary",
    )


def series(
    paths: Union[PathLike, Iterable[PathLike]],
    filter: Optional[str] = None,
    idle: Duration = "30s",
    active: Duration = "30m",
    tcp_linger: Duration = "2s",
    capacity: int = 4 << 20,
    tunnel: str = "outer",
) -> pa.Table:
    """Per-second series of capture files, as ``trawl series -r``: one row per second of
    packet time (``second`` as ``timestamp[s, UTC]``), with packets, bytes, active and new
    flows and the in/out counters (``docs/specs/series.md``). The meter settings count the
    flows as ``flows()`` does."""
    return _trawl.series(
        _paths(paths),
        filter,
        _duration(idle),
        _duration(active),
        _duration(tcp_linger),
        capacity,
        tunnel,
    )


def query(
    db: PathLike,
    attrs: Union[str, Sequence[str]] = "talk_conv",
    condition: Optional[str] = None,
    start: Time = None,
    end: Time = None,
    ifaces: Union[str, Sequence[str], None] = None,
    limit: Optional[int] = None,
    sort: str = "bytes",
) -> pa.Table:
    """Queries a flow database with trawl's engine, as ``trawl query``.

    ``attrs``: what to group by (``"sip,dip"``, ``["dport", "proto"]``, ``"talk_conv"``,
    ``"apps"``, ``"time"``...). ``condition``: the condition language of ``trawl query
    --condition`` (``"sip = 10.0.0.0/8 and dport = 443"``). ``start``/``end``: times (text in
    the commands' forms, ns, or datetimes), widened to whole 5-minute blocks. ``limit``: the
    first groups after sorting by ``sort`` (bytes, packets, flows, time); ``None`` for all.

    One row per group: the attributes under their field names (``src_ip``, ``dst_port``,
    ``time`` as ``timestamp[ns, UTC]``), then ``fwd_packets``, ``rev_packets``, ``fwd_bytes``,
    ``rev_bytes`` and ``flows``.
    """
    if not isinstance(attrs, str):
        attrs = ",".join(attrs)
    return _trawl.query(
        os.fspath(db),
        attrs,
        condition,
        _time_ns(start),
        _time_ns(end),
        _ifaces(ifaces),
        limit,
        sort,
    )


def open_db(db: PathLike, ifaces: Union[str, Sequence[str], None] = None, start: Time = None,
            end: Time = None):
    """The flow database's blocks as a ``pyarrow.dataset.Dataset`` (the stored rows, one per
    flow and 5-minute block, with their columns as stored; ``iface`` and ``date`` from the
    directory names), for pyarrow's, DuckDB's or Polars' own scans. Optionally only some
    interfaces and the blocks of a time range."""
    import pyarrow.dataset as ds

    files = _trawl.blocks(os.fspath(db), _ifaces(ifaces), _time_ns(start), _time_ns(end))
    return ds.dataset(
        [os.fspath(f) for f in files],
        format="parquet",
        partitioning="hive",
        partition_base_dir=os.fspath(db),
    )


def packets(
    store: PathLike,
    start: Time,
    end: Time,
    filter: Optional[str] = None,
    ifaces: Union[str, Sequence[str], None] = None,
) -> Iterator[Tuple[int, str, bytes]]:
    """The stored packets of ``[start, end)`` in a packet store (``trawl run --dump DIR``,
    ``trawl dump``) that match ``filter`` (tcpdump syntax), in time order, as ``(ts_ns, iface,
    frame bytes)``, as ``trawl packets`` retrieves them. Lazy: the store is read while the
    iterator is consumed; breaking out of the loop stops the reading."""
    start_ns, end_ns = _time_ns(start), _time_ns(end)
    if start_ns is None or end_ns is None:
        raise TypeError("packets() needs a start and an end")
    return _trawl.packets(os.fspath(store), start_ns, end_ns, filter, _ifaces(ifaces))
