"""``trawl demo`` and ``trawl testweb``: the crawler against the synthetic web.

The demo starts the test web on loopback, points the crawler at it (its
hosts file as ``dns.hosts_file``, loopback allowed through the SSRF guard),
injects its seed pages and runs several cycles in one Spark session, then
prints what happened: pages by status, hosts, new URLs per cycle, the
politeness audit computed from the test web's own access log, a check of
every WARC record, a WACZ export of the crawl checked by py-wacz's
validator, and how to query the tables with ``trawl sql``. With
``--archive`` the web's pages need images, stylesheets, a font and a
script, and the crawl captures them (``requisites.capture``), so the WACZ
replays as the pages looked.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from trawl.config import Config

DEMO_SEEDS = 300  # every homepage of the default test web: the crawl ramps up fast
# The demo's web (``trawl demo --hosts``): big enough to show politeness
# across shared addresses, robots rules, duplicate families and new URLs each
# cycle, small enough that the crawl's time is fetching.
DEMO_HOSTS = 60
# A demo cycle's fetch: each host gets what its politeness gap allows in this
# many seconds (generate.fetch_window_s), and the fetch stops there.
DEMO_FETCH_S = 15.0


def serve_testweb(
    cfg: Config,
    out: Path,
    at: datetime | None = None,
    *,
    traps: bool = False,
    requisites: bool = False,
) -> int:
    """Serve the test web until interrupted, as of logical time ``at``
    (default: the test web's epoch), with the crawler traps if ``traps``,
    pages that need images, stylesheets and scripts if ``requisites``."""
    from trawl.testweb import run
    from trawl.testweb.changes import EPOCH

    t = cfg.testweb
    run(t.seed, t.hosts, t.port, out, ips=t.ips, agent=cfg.http.agent_name, n_seeds=DEMO_SEEDS,
        at=at or EPOCH, dup_families=t.dup_families, traps=traps,
        requisites=requisites)  # fmt: skip
    return 0


def crawl_config(
    cfg: Config, hosts_file: Path, overrides: Sequence[str], archive: bool = False
) -> Config:
    """The demo's settings: the test web's names, loopback allowed, and shorter
    gaps and time limits than a real crawl (unless the user set them); with
    ``archive``, page requisites captured."""
    given = {item.split("=", 1)[0].strip() for item in overrides}
    if archive and "requisites.capture" not in given:
        cfg = dataclasses.replace(cfg, requisites=dataclasses.replace(cfg.requisites, capture=True))
    fetch = cfg.fetch
    if "fetch.allow_networks" not in given:
        fetch = dataclasses.replace(fetch, allow_networks=("127.0.0.0/8",))
    if "fetch.time_limit_s" not in given:
        fetch = dataclasses.replace(fetch, time_limit_s=DEMO_FETCH_S)
    generate = cfg.generate
    if "generate.fetch_window_s" not in given:
        # what generate plans for a host is what the fetch has time for
        generate = dataclasses.replace(generate, fetch_window_s=fetch.time_limit_s)
    politeness = cfg.politeness
    if "politeness.min_delay_s" not in given:
        politeness = dataclasses.replace(politeness, min_delay_s=0.5)
    return dataclasses.replace(
        cfg,
        fetch=fetch,
        generate=generate,
        politeness=politeness,
        dns=dataclasses.replace(cfg.dns, hosts_file=str(hosts_file)),
    )


def run_demo(
    cfg: Config,
    out: Path,
    cycles: int,
    overrides: Sequence[str],
    hosts: int = DEMO_HOSTS,
    archive: bool = False,
) -> int:
    from trawl.report import emit
    from trawl.runner import JobContext, run_cycles, run_inject, say, segment_id
    from trawl.store.session import build_spark
    from trawl.testweb import TestWeb, WebModel, politeness_audit, robots_audit

    for previous in (out / "crawl", out / "testweb"):  # a demo starts afresh
        shutil.rmtree(previous, ignore_errors=True)
    (out / "crawl.wacz").unlink(missing_ok=True)
    t = cfg.testweb
    model = WebModel.generate(
        t.seed,
        hosts=hosts,
        ips=min(t.ips, hosts),
        agent=cfg.http.agent_name,
        dup_families=t.dup_families,
        requisites=archive,
    )
    root = str((out / "crawl").absolute())
    with TestWeb(model, out / "testweb", port=t.port, n_seeds=DEMO_SEEDS) as web:
        say(
            f"test web: {len(model.hosts)} hosts, {model.page_count} pages on "
            f"{len(model.ips)} loopback addresses, port {web.port}"
        )
        ccfg = crawl_config(cfg, web.hosts_file, overrides, archive)
        spark = build_spark(ccfg)
        at = datetime.now(UTC).replace(microsecond=0)
        ctx = JobContext(spark, ccfg, root, segment_id(at), at)
        emit([run_inject(ctx, [str(web.seeds_file)])], False, "inject")
        per_cycle = run_cycles(ctx, cycles, timedelta(hours=1))
    emit(per_cycle, False, "cycles")
    from trawl.sql import lake_stats
    from trawl.store.files import CrawlRoot

    # ``trawl stats --engine duckdb``'s summary: the same SQL as on Spark,
    # in 1 s instead of 15 (Delta log replays and a job per section)
    for title, rows in lake_stats(CrawlRoot.of(root, ccfg.storage), ccfg, at).items():
        emit(rows, False, title)
    audit = politeness_audit(web.access_log, ccfg.politeness.min_delay_s)
    emit([audit.as_dict()], False, "politeness audit (from the test web's access log)")
    denied = robots_audit(web.access_log, model, ccfg.http.agent_name)
    print(f"\nrequests to URLs that robots.txt disallows for us: {len(denied)}")
    warc = warc_check(Path(root))
    emit([warc], False, "WARC files (every record framed and its digests checked)")
    wacz = wacz_check(ctx, out / "crawl.wacz")
    emit([wacz], False, "WACZ export (2xx, no duplicates; checked by py-wacz's validator)")
    from trawl.crawlreport import write_report

    report = write_report(CrawlRoot.of(root), ccfg, out / "report.html", at)
    print(f"\nreport: {report.path} ({report.plots} plots); open it in a browser: "
          f"{Path(report.path).absolute().as_uri()}")  # fmt: skip
    print(_next_steps(out))
    ok = audit.hosts_with_overlap == 0 and audit.gaps_below_min == 0 and not denied
    return 0 if ok and not warc["problems"] and wacz["wacz_validate"] != "fail" else 1


def wacz_check(ctx: Any, out: Path) -> dict[str, Any]:
    """Export the crawl's 2xx captures (duplicates left out) as the WACZ
    ``out`` and run py-wacz's ``wacz validate`` on it, as an archive builder
    would (a dev dependency: without it the package is not checked)."""
    import importlib.util
    import subprocess

    from trawl.runner.archive import run_wacz_export
    from trawl.stages.export import Selection

    made = run_wacz_export(ctx, Selection(statuses=("2xx",), duplicates=False), str(out))
    verdict = "not installed (pip install wacz)"
    if importlib.util.find_spec("wacz") is not None:
        done = subprocess.run(
            [sys.executable, "-m", "wacz", "validate", "-f", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        verdict = "pass" if done.returncode == 0 else "fail"
        if done.returncode:
            print((done.stdout + done.stderr)[-2000:], file=sys.stderr)
    return {
        "file": str(out),
        "pages": made["pages"],
        "captures": made["captures"],
        "mb": round(made["bytes"] / 1e6, 1),
        "wacz_validate": verdict,
    }


def warc_check(root: Path) -> dict[str, Any]:
    """Files, records by type and problems over every WARC file of the crawl."""
    import contextlib
    import io
    from collections import Counter
    from types import SimpleNamespace

    from warcio.checker import Checker

    from trawl.warc.reader import check_file, iter_records

    files = sorted(root.glob("segments/*/warc/*.warc.gz"))
    problems = [p for f in files for p in check_file(f)]
    for problem in problems[:10]:
        print(f"WARC problem: {problem}", file=sys.stderr)
    kinds: Counter[str] = Counter()
    if not problems:
        kinds.update(r.rec_type for f in files for r in iter_records(f, verify=False))
    # and warcio's own checker, the one archive builders run ("warcio check")
    with contextlib.redirect_stdout(io.StringIO()) as said:
        failed = Checker(SimpleNamespace(inputs=[str(f) for f in files], verbose=False))
        warcio_exit = failed.process_all()
    if warcio_exit:
        print(said.getvalue()[-2000:], file=sys.stderr)
    return {
        "files": len(files),
        **dict(sorted(kinds.items())),
        "problems": len(problems) + (1 if warcio_exit else 0),
        "warcio_check": "fail" if warcio_exit else "pass",
    }


def _next_steps(out: Path) -> str:
    crawl = out / "crawl"
    # The command as the user ran it (e.g. .venv/bin/trawl), so the hints paste.
    trawl = sys.argv[0] if Path(sys.argv[0]).name == "trawl" else "trawl"
    return (
        "\nQuery the crawl:\n"
        f"  {trawl} stats --crawl {crawl}\n"
        f'  {trawl} sql --crawl {crawl} "SELECT status, count(*) AS n FROM crawldb GROUP BY 1"\n'
        f'  {trawl} sql --crawl {crawl} "SELECT host, delay_s, robots_status, fetches '
        'FROM hostdb ORDER BY fetches DESC LIMIT 10"\n'
        f'  {trawl} sql --crawl {crawl} "SELECT segment, outcome, count(*) FROM fetch '
        'GROUP BY 1, 2 ORDER BY 1, 2"\n'
        f'  {trawl} sql --crawl {crawl} "SELECT duplicate_of, count(*) AS copies FROM crawldb '
        "WHERE status = 'duplicate' GROUP BY 1 ORDER BY 2 DESC LIMIT 10\"\n"
        f"WARC files: {crawl}/segments/*/warc/ (CDXJ: segments/*/index.cdxj)\n"
        f"  {trawl} warc get --crawl {crawl} FILE:OFFSET:LENGTH   "
        "(a fetch row's warc_file, warc_offset, warc_length)\n"
        f"  {trawl} export warc --crawl {crawl} --out {out}/export --status 2xx --no-duplicates\n"
        f"WACZ (one file for ReplayWeb.page or pywb): {out}/crawl.wacz, written as\n"
        f"  {trawl} export wacz --crawl {crawl} --out {out}/crawl.wacz --status 2xx "
        "--no-duplicates\n"
    )
