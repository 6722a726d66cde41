"""Tests for trawl.warc.record: a record's fields read as warcio reads them."""

from __future__ import annotations

from trawl.warc.record import HttpHead, WarcRecord


def test_target_uri_as_warcio_reads_it_and_http_head_only_for_http_records() -> None:
    def record(rec_type: str, uri: str, block: bytes) -> WarcRecord:
        return WarcRecord(0, 1, rec_type, (("WARC-Target-URI", uri),), block)

    assert record("response", "<http://a.example/x y>", b"").target_uri == "http://a.example/x%20y"
    head = record("request", "https://a.example/", b"POST /f HTTP/1.1\r\nHost: a\r\n\r\nq=1")
    assert head.http_head() == HttpHead("POST", "/f HTTP/1.1", (("Host", "a"),), 29)
    assert head.payload() == b"q=1"
    dns = record("response", "dns:a.example", b"20240506070809\r\na.example. 60 IN A 1.2.3.4")
    assert dns.http_head() is None and dns.payload() == dns.block
    assert record("resource", "http://a.example/", b"HTTP/1.1 200 OK\r\n\r\n").http_head() is None
