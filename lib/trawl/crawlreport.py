"""``trawl report``: one self-contained HTML page of plots and tables that
shows how a crawl went, read without a JVM.

What an operator asks after a few cycles, on one page: what each cycle
fetched and with what outcome, what it found and what it kept out (and why),
whether it was polite (requests per address, and the gaps between them
against ``politeness.min_delay_s``), how fast servers answered, how
robots.txt went, how much was duplicate, how often pages change, and the
largest hosts and domains. Nutch prints ``readdb -stats``; Heritrix writes
its crawl reports (hosts, response codes, ...) as text files; this is both,
with pictures.

How it is built:

- Every number comes from an aggregate query (GROUP BY, LIMIT) over the
  DuckDB views of ``trawl.store.lake``: histograms are binned in SQL and the
  gaps between requests come from a window function, so Python holds a few
  hundred rows whatever the crawl's size.
- Plots are matplotlib figures (``matplotlib.figure.Figure``: no pyplot, no
  global figure state) saved as SVG and inlined. No script and no external
  resource (the page's Content-Security-Policy forbids both): a file to mail
  or archive. Text stays text (``svg.fonttype = none``); each figure salts
  its SVG ids with its own id, so inlined SVGs cannot pick up each other's
  clip paths; mathtext is off, so a ``$`` in a reason is a dollar sign.
- Every string from the crawl is escaped (``html.escape``) into the HTML;
  matplotlib escapes what it writes into the SVG.
- A plot or table without data says "no data yet" rather than drawing empty
  axes: a crawl after inject alone gives a valid report.
- The file is written under a temporary name and renamed into place
  (``os.replace``: atomic), so a reader never sees half a report.
"""

from __future__ import annotations

import html
import io
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trawl.config import Config
from trawl.crawldb.status import HAS_CONTENT, FetchOutcome
from trawl.store.files import CrawlRoot
from trawl.store.lake import Lake, open_lake
from trawl.store.schemas import arrow_schema
from trawl.store.tables import SEGMENT_TABLES

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis

__all__ = ["NO_DATA", "ReportSummary", "write_report"]

RECENT_SEGMENTS = 40  # per-segment plots show the latest this many
TOP = 15  # rows of the address, host and domain tables
TOP_REASONS = 8  # reasons drawn apart in a stacked bar; the rest are "other"
BINS = 30
LOG_SPAN = 100.0  # a histogram whose positive values span more than this ratio is log-scaled
NO_DATA = "no data yet"
DAY_S = 86400.0

Draw = Callable[["Axes"], None]
Row = dict[str, Any]

# One colour per fetch outcome, the same in every report: green is good,
# red is refused, grey is "not tried".
OUTCOME_COLOURS = {
    FetchOutcome.SUCCESS: "#2e7d32",
    FetchOutcome.NOTMODIFIED: "#81c784",
    FetchOutcome.REDIR_PERM: "#1565c0",
    FetchOutcome.REDIR_TEMP: "#64b5f6",
    FetchOutcome.GONE: "#6d4c41",
    FetchOutcome.SOFT404: "#bcaaa4",
    FetchOutcome.RETRY: "#ef6c00",
    FetchOutcome.ROBOTS_DENIED: "#c62828",
    FetchOutcome.BLOCKED: "#212121",
    FetchOutcome.NOT_REACHED: "#bdbdbd",
    FetchOutcome.DEFERRED: "#8e24aa",
}
BAR = "#4e79a7"
_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


@dataclass(frozen=True)
class ReportSummary:
    """What ``write_report`` wrote: the file, its sections' ids in page
    order, how many plots it holds, and its size."""

    path: Path
    sections: tuple[str, ...]
    plots: int
    bytes: int


def write_report(
    root: CrawlRoot, cfg: Config, out: Path, at: datetime | None = None
) -> ReportSummary:
    """Write the report of the crawl at ``root`` to ``out``, as of ``at``
    (the header's time and what counts as due; now when not given)."""
    at = at or datetime.now(UTC)
    lake = open_lake(root)
    try:
        _add_empty_segment_views(lake)
        totals = _totals(lake)
        sections = [build(lake, cfg, at) for build in SECTIONS]
    finally:
        lake.close()
    size = _write_atomically(out, _page(root, at, totals, sections))
    return ReportSummary(out, tuple(s.id for s in sections), sum(s.plots for s in sections), size)


# -- the page -----------------------------------------------------------------------------


@dataclass
class _Section:
    """A titled part of the page: figures, tables, facts or no-data notes."""

    id: str
    title: str
    intro: str
    parts: list[str] = field(default_factory=list)
    plots: int = 0

    def plot(
        self,
        plot_id: str,
        caption: str,
        draw: Draw | None,
        height: float = 3.0,
        empty: str = NO_DATA,
    ) -> None:
        """A figure that ``draw`` fills, or a note that there is nothing to
        draw (``empty``: there are no data, or they are all zero)."""
        if draw is None:
            self.note(f"{caption}: {empty}.")
            return
        svg = _svg(plot_id, draw, height)
        self.parts.append(
            f'<figure class="plot" id="{plot_id}">{svg}'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
        self.plots += 1

    def note(self, text: str) -> None:
        self.parts.append(f'<p class="empty">{html.escape(text)}</p>')

    def facts(self, facts: Mapping[str, object]) -> None:
        items = "".join(f"<li>{html.escape(k)}: <b>{_cell(v)}</b></li>" for k, v in facts.items())
        self.parts.append(f'<ul class="facts">{items}</ul>')

    def table(self, caption: str, columns: Sequence[str], rows: Sequence[Row]) -> None:
        if not rows:
            self.note(f"{caption}: {NO_DATA}.")
            return
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join("<tr>" + "".join(_td(row.get(c)) for c in columns) + "</tr>" for row in rows)
        self.parts.append(
            f"<table><caption>{html.escape(caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        )

    def html(self) -> str:
        return (
            f'<section id="{self.id}"><h2>{html.escape(self.title)}</h2>'
            f"<p>{html.escape(self.intro)}</p>{''.join(self.parts)}</section>"
        )


def _cell(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return html.escape(str(value))


def _td(value: object) -> str:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    return f'<td class="n">{_cell(value)}</td>' if numeric else f"<td>{_cell(value)}</td>"


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;color:#222;max-width:1060px;margin:1.5em auto}
body{padding:0 1em}
h1{font-size:1.6em;margin:0 0 .2em}h2{border-bottom:1px solid #ccc;margin-top:2em}
header p{margin:.2em 0;color:#555}code{font-size:.95em}
dl.totals{display:flex;flex-wrap:wrap;gap:.4em 2.2em;margin:1em 0}dl.totals dt{color:#666}
dl.totals dd{margin:0;font-size:1.5em;font-weight:600}nav a{margin-right:1em}
figure.plot{margin:1.2em 0}figure.plot svg{width:100%;height:auto;display:block}
figcaption{color:#555;font-size:.9em}p.empty{color:#888;font-style:italic}
ul.facts{padding-left:1.2em}table{border-collapse:collapse;margin:1em 0;font-size:.92em}
caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{padding:.2em .7em;border-bottom:1px solid #e5e5e5;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
"""
# Nothing but inline styles: no script, no fetch of any kind.
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _page(root: CrawlRoot, at: datetime, totals: Row, sections: list[_Section]) -> str:
    when = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    facts = "".join(
        f"<div><dt>{html.escape(name)}</dt><dd>{_cell(totals[key])}</dd></div>"
        for key, name in (("urls", "URLs"), ("hosts", "hosts"), ("domains", "domains"),
                          ("segments", "segments"), ("pages", "pages fetched"),
                          ("requests", "requests"))
    )  # fmt: skip
    nav = "".join(f'<a href="#{s.id}">{html.escape(s.title)}</a>' for s in sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>trawl report: {html.escape(root.uri)}</title><style>{_CSS}</style></head>"
        f"<body><header><h1>Crawl report</h1><p>crawl <code>{html.escape(root.uri)}</code></p>"
        f'<p>as of {when}</p><dl class="totals">{facts}</dl><nav>{nav}</nav></header>'
        + "".join(s.html() for s in sections)
        + "</body></html>\n"
    )


def _write_atomically(out: Path, text: str) -> int:
    data = text.encode("utf-8")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return len(data)


# -- plots --------------------------------------------------------------------------------


def _svg(plot_id: str, draw: Draw, height: float) -> str:
    """``draw``'s figure as an ``<svg>`` element to inline (no XML prolog)."""
    import matplotlib
    from matplotlib.figure import Figure

    buf = io.BytesIO()
    rc: Any = {**_RC, "svg.hashsalt": plot_id}  # newer stubs want their key Literal
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=(10.0, height), layout="constrained")
        draw(fig.add_subplot())
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue().decode("utf-8")
    return text[text.index("<svg") :].strip()


def _segment_axis(ax: Axes, segments: Sequence[str]) -> None:
    step = max(1, math.ceil(len(segments) / 20))
    labels = [s if i % step == 0 else "" for i, s in enumerate(segments)]
    ax.set_xticks(range(len(segments)), labels=labels, rotation=35, ha="right", fontsize=7)
    ax.set_xlabel("segment")


def _per_segment(
    rows: Sequence[Row], ylabel: str, colours: Mapping[str, str] | None = None
) -> Draw | None:
    """Stacked bars of ``n`` by ``label`` for each ``segment`` (None: all
    zero). Labels beyond ``TOP_REASONS`` by total are folded into "other"."""
    totals: dict[str, int] = {}
    for r in rows:
        if r["n"]:
            totals[r["label"]] = totals.get(r["label"], 0) + r["n"]
    if not totals:
        return None
    order = [k for k in (colours or {}) if k in totals] or sorted(totals, key=lambda k: -totals[k])
    order += sorted(k for k in totals if k not in order)
    kept = order if len(order) <= TOP_REASONS + 1 else order[:TOP_REASONS]
    segments = sorted({r["segment"] for r in rows})
    series = {k: [0] * len(segments) for k in [*kept, "other"]}
    for r in rows:
        series[r["label"] if r["label"] in kept else "other"][segments.index(r["segment"])] += (
            r["n"] or 0
        )

    def draw(ax: Axes) -> None:
        bottom = [0] * len(segments)
        for label, values in series.items():
            if any(values):
                colour = (colours or {}).get(label) or (BAR if len(series) <= 2 else None)
                ax.bar(range(len(segments)), values, bottom=bottom, label=label, color=colour)
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        _segment_axis(ax, segments)
        _counts_on(ax.yaxis)
        ax.set_ylabel(ylabel)
        if len(totals) > 1:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)

    return draw


def _bars_by(rows: Sequence[Row], label: str, value: str, xlabel: str) -> Draw | None:
    """Horizontal bars, one per row, labelled with their values."""
    if not rows:
        return None

    def draw(ax: Axes) -> None:
        ys = range(len(rows))
        bars = ax.barh(ys, [r[value] for r in rows], color=BAR)
        ax.set_yticks(ys, labels=[str(r[label]) for r in rows])
        ax.invert_yaxis()
        ax.bar_label(bars, fmt="{:,.0f}", padding=2, fontsize=7)
        _counts_on(ax.xaxis)
        ax.set_xlabel(xlabel)

    return draw


def _bars_height(rows: Sequence[object]) -> float:
    return 1.0 + 0.24 * len(rows)


@dataclass(frozen=True)
class _Binned:
    """A histogram binned in SQL: ``counts[i]`` values in [edges[i], edges[i+1])."""

    edges: list[float]
    counts: list[int]
    log: bool
    total: int
    left_out: int  # values at or below zero, not on a log axis


def _binned(
    lake: Lake, values: str, floor: float | None = None, log: bool | None = None
) -> _Binned | None:
    """The histogram of column ``x`` of query ``values`` (nulls left out):
    ``BINS`` bins, of log10(x) over whole decades when ``log`` says so or,
    when it is None, when the positive values span more than ``LOG_SPAN``
    (the values at or below zero are then only counted). A linear one starts
    at ``floor`` or below."""
    [s] = lake.rows(
        f"SELECT count(x) AS n, min(x) AS lo, max(x) AS hi, count(CASE WHEN x <= 0 THEN 1 END) "
        f"AS nonpositive, min(CASE WHEN x > 0 THEN x END) AS pos FROM ({values})"
    )
    if not s["n"]:
        return None
    if log is None:
        log = s["pos"] is not None and s["hi"] / s["pos"] > LOG_SPAN
    log = log and s["pos"] is not None
    if log:
        # whole decades, so that bins line up with the axis' ticks
        expr, lo = "log10(x)", float(math.floor(math.log10(s["pos"])))
        hi = max(float(math.ceil(math.log10(s["hi"]))), lo + 1)
    else:
        expr, lo, hi = "x", s["lo"] if floor is None else min(floor, s["lo"]), s["hi"]
    if hi <= lo:
        lo, hi = (lo - 0.5, hi + 0.5) if log or lo == 0 else (lo * 0.9, hi * 1.1)
        lo, hi = min(lo, hi), max(lo, hi)
    width = (hi - lo) / BINS
    rows = lake.rows(
        f"SELECT least(CAST(floor(({expr} - {lo!r}) / {width!r}) AS BIGINT), {BINS - 1}) AS b, "
        f"count(*) AS n FROM ({values}) WHERE x {'> 0' if log else 'IS NOT NULL'} GROUP BY b"
    )
    counts = [0] * BINS
    for r in rows:
        counts[max(0, r["b"])] += r["n"]
    edges = [lo + i * width for i in range(BINS + 1)]
    if log:
        edges = [10**e for e in edges]
    return _Binned(edges, counts, log, s["n"], s["nonpositive"] if log else 0)


def _histogram(
    b: _Binned | None, xlabel: str, mark: tuple[float, str] | None = None
) -> Draw | None:
    if b is None:
        return None

    def draw(ax: Axes) -> None:
        ax.stairs(b.counts, b.edges, fill=True, color=BAR)
        if b.log:
            _plain_log_axis(ax)
        if mark is not None and (mark[0] > 0 or not b.log):
            ax.axvline(mark[0], color="#c62828", linestyle="--", linewidth=1.2, label=mark[1])
            ax.legend(fontsize=8, frameon=False)
        ax.set_xlabel(xlabel)
        _counts_on(ax.yaxis)
        ax.set_ylabel("count")

    return draw


def _counts_on(axis: Axis) -> None:
    """Ticks at whole numbers only: the axis counts things."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 2.5, 5, 10]))


def _plain_log_axis(ax: Axes) -> None:
    """A log x axis labelled in plain numbers (mathtext, which the default
    labels need, is off)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


# -- the sections -------------------------------------------------------------------------


def _add_empty_segment_views(lake: Lake) -> None:
    """``fetch`` and ``fetchlist`` with no rows for a crawl that has no
    segment yet, so every query of the report runs on it."""
    import pyarrow as pa

    for name, schema in SEGMENT_TABLES.items():
        if name not in lake.tables:
            columns = pa.schema([*arrow_schema(schema), pa.field("segment", pa.string())])
            lake.con.register(name, columns.empty_table())


def _recent(table: str) -> str:
    return f"SELECT DISTINCT segment FROM {table} ORDER BY segment DESC LIMIT {RECENT_SEGMENTS}"


def _totals(lake: Lake) -> Row:
    [row] = lake.rows(
        "SELECT (SELECT count(*) FROM crawldb) AS urls, "
        "(SELECT count(DISTINCT host) FROM crawldb) AS hosts, "
        "(SELECT count(DISTINCT domain) FROM crawldb) AS domains, "
        "(SELECT count(DISTINCT segment) FROM (SELECT segment FROM fetchlist "
        "UNION ALL SELECT segment FROM fetch)) AS segments, "
        "(SELECT count(*) FROM fetch WHERE kind = 'page' AND outcome = 'success') AS pages, "
        "(SELECT count(elapsed_s) FROM fetch) AS requests"
    )
    return row


def _cycles(lake: Lake, cfg: Config, at: datetime) -> _Section:
    s = _Section(
        "cycles", "Cycles",
        f"What each segment fetched, found and kept out (the latest {RECENT_SEGMENTS}).",
    )  # fmt: skip
    outcomes = lake.rows(
        "SELECT segment, coalesce(outcome, 'unknown') AS label, count(*) AS n FROM fetch "
        f"WHERE kind = 'page' AND segment IN ({_recent('fetch')}) GROUP BY 1, 2"
    )
    colours = {str(k): v for k, v in OUTCOME_COLOURS.items()}
    s.plot("outcomes", "Pages by fetch outcome per segment",
           _per_segment(outcomes, "pages", colours))  # fmt: skip
    new = lake.rows(
        "SELECT segment, 'new URLs' AS label, CAST(sum(value) AS BIGINT) AS n FROM counters "
        f"WHERE name = 'updatedb/new_urls' AND segment IN ({_recent('counters')}) GROUP BY 1"
    )
    s.plot("new-urls", "New URLs added to crawldb per segment (updatedb/new_urls)",
           _per_segment(new, "URLs"), empty="none" if new else NO_DATA)  # fmt: skip
    kept_out = lake.rows(
        "SELECT segment, replace(replace(name, 'generate/', ''), 'updatedb/', '') AS label, "
        "CAST(sum(value) AS BIGINT) AS n FROM counters "
        "WHERE (name LIKE 'generate/deferred/%' OR name LIKE 'updatedb/rejected/%') "
        f"AND segment IN ({_recent('counters')}) GROUP BY 1, 2"
    )
    s.plot("kept-out", "Due URLs deferred (by budget) and links rejected, by reason, per segment",
           _per_segment(kept_out, "URLs"), height=3.4,
           empty="none" if kept_out else NO_DATA)  # fmt: skip
    return s


# The pause before each request to an address in one segment: from the end
# of the previous response (fetched_at + elapsed_s) to this request's start,
# the gap the scheduler keeps per address (trawl.fetch.politeness). Rows
# without elapsed_s sent no request (denied by robots.txt, not reached).
_GAPS = (
    "SELECT ip, host, epoch_us(fetched_at) / 1e6 - lag(epoch_us(fetched_at) / 1e6 + elapsed_s) "
    "OVER (PARTITION BY segment, ip ORDER BY fetched_at) AS x FROM fetch "
    "WHERE elapsed_s IS NOT NULL AND ip IS NOT NULL AND fetched_at IS NOT NULL"
)


def _politeness(lake: Lake, cfg: Config, at: datetime) -> _Section:
    least = cfg.politeness.min_delay_s
    s = _Section(
        "politeness", "Politeness",
        "Requests per IP address, and the gaps between consecutive requests to one address "
        f"(end of a response to the start of the next) against politeness.min_delay_s = {least} s.",
    )  # fmt: skip
    busiest = lake.rows(
        f"SELECT ip, count(DISTINCT host) AS hosts, count(*) AS requests, min(x) AS min_gap_s, "
        f"quantile_cont(x, 0.5) AS median_gap_s, count(CASE WHEN x < {least!r} THEN 1 END) "
        f"AS below_min_delay FROM ({_GAPS}) GROUP BY ip ORDER BY requests DESC, ip LIMIT {TOP}"
    )
    s.plot("requests-per-address", f"Requests per address, the {TOP} busiest",
           _bars_by(busiest, "ip", "requests", "requests"), _bars_height(busiest))  # fmt: skip
    [n] = lake.rows(
        f"SELECT count(x) AS gaps, count(CASE WHEN x < {least!r} THEN 1 END) AS below "
        f"FROM ({_GAPS})"
    )
    gaps = _binned(lake, f"SELECT x FROM ({_GAPS})", floor=0.0)
    s.plot("gaps", f"Gaps between requests to one address: {n['gaps']:,} gaps, "
           f"{n['below']:,} shorter than politeness.min_delay_s",
           _histogram(gaps, "gap (s)", (least, f"min_delay_s = {least} s")))  # fmt: skip
    s.table("The busiest addresses", list(busiest[0]) if busiest else [], busiest)
    return s


def _response_times(lake: Lake, cfg: Config, at: datetime) -> _Section:
    s = _Section(
        "response-times", "Response times",
        "Time from sending a request to the end of its response (fetch elapsed_s).",
    )  # fmt: skip
    [q] = lake.rows(
        "SELECT count(elapsed_s) AS n, quantile_cont(elapsed_s, 0.5) AS p50, "
        "quantile_cont(elapsed_s, 0.9) AS p90, quantile_cont(elapsed_s, 0.99) AS p99, "
        "max(elapsed_s) AS max FROM fetch"
    )
    caption = "Response times"
    if q["n"]:
        caption += (
            f" of {q['n']:,} requests: median {q['p50']:.3g} s, p90 {q['p90']:.3g} s, "
            f"p99 {q['p99']:.3g} s, max {q['max']:.3g} s"
        )
    times = _binned(lake, "SELECT elapsed_s AS x FROM fetch")
    s.plot("response-times-histogram", caption, _histogram(times, "elapsed (s)"))
    return s


def _robots(lake: Lake, cfg: Config, at: datetime) -> _Section:
    s = _Section("robots", "robots.txt", "The last robots.txt outcome of each host (hostdb).")
    statuses = lake.rows(
        "SELECT coalesce(robots_status, 'not fetched yet') AS status, count(*) AS hosts "
        "FROM hostdb GROUP BY 1 ORDER BY hosts DESC, status"
    )
    s.plot("robots-status", "Hosts by robots.txt outcome",
           _bars_by(statuses, "status", "hosts", "hosts"), _bars_height(statuses))  # fmt: skip
    [denied] = lake.rows(
        "SELECT count(*) AS n FROM fetch WHERE kind = 'page' AND outcome = 'robots_denied'"
    )
    s.facts({"page fetches denied by robots.txt": denied["n"]})
    return s


def _duplicates(lake: Lake, cfg: Config, at: datetime) -> _Section:
    s = _Section(
        "duplicates", "Duplicates",
        "Exact duplicates (same content as a kept URL) and near-duplicate pairs found by dedup.",
    )  # fmt: skip
    [dup] = lake.rows(
        "SELECT count(CASE WHEN status = 'duplicate' THEN 1 END) AS duplicates, "
        "count(DISTINCT duplicate_of) AS groups FROM crawldb"
    )
    [nd] = lake.rows(
        "SELECT (SELECT count(*) FROM content) AS contents, (SELECT count(*) FROM neardup) AS "
        "pairs, (SELECT count(*) FROM (SELECT a FROM neardup UNION SELECT b FROM neardup)) "
        "AS nodes"
    )
    s.facts({"URLs marked duplicate": dup["duplicates"], "kept URLs they copy": dup["groups"],
             "distinct contents stored": nd["contents"], "near-duplicate pairs": nd["pairs"],
             "contents in a near-duplicate pair": nd["nodes"]})  # fmt: skip
    sizes = lake.rows(
        "SELECT copies || ' duplicates' AS label, groups FROM (SELECT copies, count(*) AS "
        "groups FROM (SELECT duplicate_of, count(*) AS copies FROM crawldb WHERE duplicate_of "
        f"IS NOT NULL GROUP BY 1) GROUP BY copies ORDER BY groups DESC, copies LIMIT {TOP}) "
        "ORDER BY copies"
    )
    s.plot("duplicate-groups", f"Kept URLs by how many duplicates they have (the {TOP} most "
           "common counts)",
           _bars_by(sizes, "label", "groups", "kept URLs"), _bars_height(sizes))  # fmt: skip
    marked = lake.rows(
        "SELECT segment, 'duplicates marked' AS label, CAST(sum(value) AS BIGINT) AS n "
        "FROM counters WHERE name = 'dedup/duplicates/marked' "
        f"AND segment IN ({_recent('counters')}) GROUP BY 1"
    )
    s.plot("duplicates-per-segment", "URLs marked duplicate per segment (dedup/duplicates/marked)",
           _per_segment(marked, "URLs"), empty="none" if marked else NO_DATA)  # fmt: skip
    largest = lake.rows(
        "SELECT duplicate_of AS kept_url, count(*) AS duplicates FROM crawldb "
        f"WHERE duplicate_of IS NOT NULL GROUP BY 1 ORDER BY duplicates DESC, kept_url LIMIT {TOP}"
    )
    s.table("The most copied URLs", ["kept_url", "duplicates"], largest)
    return s


def _freshness(lake: Lake, cfg: Config, at: datetime) -> _Section:
    s = _Section(
        "freshness", "Change rate and freshness",
        "How often pages change (crawldb change_rate, estimated from the visits that compared "
        "content) and how many revisits found a change (fetch changed: null on a first visit).",
    )  # fmt: skip
    [f] = lake.rows(
        f"SELECT count(change_rate) AS estimated, quantile_cont(change_rate * {DAY_S}, 0.5) AS "
        f"median_changes_per_day, count(CASE WHEN next_fetch_at IS NULL OR next_fetch_at <= "
        f"{_timestamp(at)} THEN 1 END) AS due, quantile_cont(fetch_interval_s / {DAY_S}, 0.5) "
        "AS median_interval_days FROM crawldb"
    )
    s.facts({"URLs with a change-rate estimate": f["estimated"],
             "median changes per day": f["median_changes_per_day"],
             "median refetch interval (days)": f["median_interval_days"],
             f"URLs due at {at.astimezone(UTC):%Y-%m-%d %H:%M} UTC": f["due"]})  # fmt: skip
    rates = _binned(lake, f"SELECT change_rate * {DAY_S} AS x FROM crawldb", log=True)
    caption = "URLs by estimated change rate"
    if rates is not None and rates.left_out:
        caption += f" ({rates.left_out:,} with rate 0 not shown)"
    s.plot("change-rate", caption, _histogram(rates, "changes per day"))
    revisits = lake.rows(
        "SELECT segment, count(changed) AS revisits, count(CASE WHEN changed THEN 1 END) AS "
        f"changed FROM fetch WHERE kind = 'page' AND segment IN ({_recent('fetch')}) "
        "GROUP BY 1 ORDER BY 1"
    )
    s.plot("revisits-changed", "Share of revisits (pages fetched before) that found a change, "
           "per segment (changed / revisits on each bar)", _change_share(revisits))  # fmt: skip
    return s


def _timestamp(at: datetime) -> str:
    return f"TIMESTAMPTZ '{at.astimezone(UTC).isoformat()}'"


def _change_share(rows: Sequence[Row]) -> Draw | None:
    rows = [r for r in rows if r["revisits"]]
    if not rows:
        return None

    def draw(ax: Axes) -> None:
        shares = [100.0 * r["changed"] / r["revisits"] for r in rows]
        bars = ax.bar(range(len(rows)), shares, color=BAR)
        ax.bar_label(bars, labels=[f"{r['changed']}/{r['revisits']}" for r in rows], fontsize=7)
        ax.set_ylim(0, 110)
        ax.set_ylabel("% of revisits changed")
        _segment_axis(ax, [r["segment"] for r in rows])

    return draw


def _hosts(lake: Lake, cfg: Config, at: datetime) -> _Section:
    s = _Section("hosts", "Largest hosts and domains",
                 f"The {TOP} hosts and registered domains with the most URLs.")  # fmt: skip
    content = ", ".join(f"'{status.value}'" for status in sorted(HAS_CONTENT))
    counts = (
        f"count(*) AS urls, count(CASE WHEN status IN ({content}) THEN 1 END) AS fetched, "
        "count(CASE WHEN status = 'unfetched' THEN 1 END) AS unfetched, "
        "CAST(coalesce(sum(fetches), 0) AS BIGINT) AS fetches"
    )
    hosts = lake.rows(
        f"WITH top AS (SELECT host, {counts} FROM crawldb GROUP BY host "
        f"ORDER BY urls DESC, host LIMIT {TOP}) SELECT top.*, h.ip, h.robots_status AS robots, "
        "h.delay_s FROM top LEFT JOIN (SELECT host, any_value(ip) AS ip, "
        "any_value(robots_status) AS robots_status, max(delay_s) AS delay_s FROM hostdb "
        "WHERE host IN (SELECT host FROM top) GROUP BY host) h ON h.host = top.host "
        "ORDER BY urls DESC, top.host"
    )
    s.table("Hosts", ["host", "urls", "fetched", "unfetched", "fetches", "ip", "robots",
                      "delay_s"], hosts)  # fmt: skip
    domains = lake.rows(
        f"SELECT domain, count(DISTINCT host) AS hosts, {counts} FROM crawldb GROUP BY domain "
        f"ORDER BY urls DESC, domain LIMIT {TOP}"
    )
    s.table("Registered domains", ["domain", "hosts", "urls", "fetched", "unfetched", "fetches"],
            domains)  # fmt: skip
    return s


SECTIONS: tuple[Callable[[Lake, Config, datetime], _Section], ...] = (
    _cycles, _politeness, _response_times, _robots, _duplicates, _freshness, _hosts,
)  # fmt: skip
