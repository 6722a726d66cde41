"""trawl.testweb: a deterministic synthetic web on loopback that plays the internet.

``WebModel.generate(seed)`` draws hosts, pages, links, robots rules,
sitemaps, how often each page changes and, on request (``dup_families``),
near-duplicate families of articles with their ground truth and
(``requisites``) the stylesheets, images, script and font pages need to
render, with theirs (``trawl.testweb.requisites``);
``TestWeb(model, out_dir)`` serves them from one process on 127.0.1.x, as of
a logical time (``set_time``), and logs every request (with ``hostile=True``,
``traps=True`` and ``estate=n`` also the hostile hosts of
``trawl.testweb.hostile``, the crawler traps of ``trawl.testweb.traps`` and
the seeded sites under one domain of ``trawl.testweb.estate``);
``politeness_audit`` and ``robots_audit`` check a crawl against that log and
the model's ground truth. Stdlib only, no pyspark.
"""

from __future__ import annotations

from trawl.testweb.audit import PolitenessReport, politeness_audit, robots_audit
from trawl.testweb.changes import EPOCH, ChangeRates
from trawl.testweb.model import WebModel
from trawl.testweb.records import Article, HostInfo, Link, Page, RobotsGroup, SitemapSet
from trawl.testweb.requisites import Requisite
from trawl.testweb.runner import run
from trawl.testweb.server import TestWeb

__all__ = [
    "EPOCH",
    "Article",
    "ChangeRates",
    "HostInfo",
    "Link",
    "Page",
    "PolitenessReport",
    "Requisite",
    "RobotsGroup",
    "SitemapSet",
    "TestWeb",
    "WebModel",
    "politeness_audit",
    "robots_audit",
    "run",
]
