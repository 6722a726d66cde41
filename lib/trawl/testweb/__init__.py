"""trawl.testweb: a deterministic synthetic web on loopback that plays the internet.

``WebModel.generate(seed)`` draws hosts, pages, links and robots rules;
``TestWeb(model, out_dir)`` serves them from one process on 127.0.1.x and
logs every request; ``politeness_audit`` and ``robots_audit`` check a crawl
against that log and the model's ground truth. Stdlib only, no pyspark.
"""

from __future__ import annotations

from trawl.testweb.audit import PolitenessReport, politeness_audit, robots_audit
from trawl.testweb.model import WebModel
from trawl.testweb.records import HostInfo, Link, Page, RobotsGroup
from trawl.testweb.runner import run
from trawl.testweb.server import TestWeb

__all__ = [
    "HostInfo",
    "Link",
    "Page",
    "PolitenessReport",
    "RobotsGroup",
    "TestWeb",
    "WebModel",
    "politeness_audit",
    "robots_audit",
    "run",
]
