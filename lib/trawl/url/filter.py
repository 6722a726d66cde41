"""Cheap string rules that keep unwanted URLs out of the crawl db.

Modelled on Nutch's ``regex-urlfilter.txt``: skip schemes we cannot fetch, file
types we cannot parse, absurdly long URLs, and the classic crawler traps
(endlessly deep paths and paths that repeat the same segment, as produced by
relative links on pages that echo their own path). The rules look at the URL
text only: no I/O, no DNS, no normalisation, so :meth:`UrlFilter.reject_reason`
runs per link inside a Spark UDF. Run it on URLs already passed through
:func:`trawl.url.normalize.normalize` so the rules see one canonical spelling.

It returns a reason rather than a bool so rejections can be counted by cause.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["DEFAULT_SKIP_EXTENSIONS", "UrlFilter"]

# Non-HTML file types, after Nutch's regex-urlfilter.txt suffix rule
# (gif|jpg|png|ico|css|sit|eps|wmf|zip|ppt|mpg|xls|gz|rpm|tgz|mov|exe|jpeg|bmp|js),
# widened to current formats. The crawler parses HTML only, so PDF and office
# documents are skipped too; pass your own tuple to fetch them.
DEFAULT_SKIP_EXTENSIONS: tuple[str, ...] = (
    # images
    "gif", "jpg", "jpeg", "png", "bmp", "ico", "svg", "svgz", "webp", "avif", "tif", "tiff",
    "psd", "eps", "wmf", "heic",
    # audio
    "mp3", "wav", "ogg", "oga", "flac", "aac", "m4a", "wma", "mid", "midi",
    # video
    "mp4", "m4v", "mov", "avi", "wmv", "flv", "mkv", "webm", "mpg", "mpeg", "3gp",
    # archives
    "zip", "gz", "tgz", "bz2", "xz", "7z", "rar", "tar", "zst", "sit",
    # binaries and packages
    "exe", "msi", "dmg", "iso", "bin", "dll", "so", "deb", "rpm", "apk", "jar", "class",
    # fonts
    "woff", "woff2", "ttf", "otf", "eot",
    # style and script
    "css", "js", "mjs", "map",
    # documents
    "pdf", "ps", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "rtf",
)  # fmt: skip

# RFC 3986 3.1: the scheme is everything before the first ":" and must be well formed.
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# RFC 3986 Appendix B, path part only: after "scheme://authority", before "?" or "#".
_PATH_RE = re.compile(r"^(?:[^:/?#]+:)?(?://[^/?#]*)?([^?#]*)")


class UrlFilter:
    """Accept or reject URLs by scheme, length, path shape and file extension."""

    def __init__(
        self,
        allowed_schemes: Iterable[str] = ("http", "https"),
        max_url_length: int = 2048,
        max_path_depth: int = 16,
        max_repeated_segments: int = 3,
        max_query_params: int = 8,
        skip_extensions: Iterable[str] = DEFAULT_SKIP_EXTENSIONS,
    ) -> None:
        self.allowed_schemes = frozenset(s.lower() for s in allowed_schemes)
        self.max_url_length = max_url_length
        self.max_path_depth = max_path_depth
        self.max_repeated_segments = max_repeated_segments
        self.max_query_params = max_query_params
        self.skip_extensions = frozenset(
            e.lower().lstrip(".") for e in skip_extensions if e.strip(".")
        )

    def reject_reason(self, url: str, any_extension: bool = False) -> str | None:
        """Return None if ``url`` passes, else the name of the first rule it fails.

        Rules in order: ``scheme``, ``too_long``, ``extension``, ``path_depth``,
        ``repeated_segments``, ``too_many_params`` (more query parameters than
        ``max_query_params``: faceted search combining every filter). With
        ``any_extension`` the URL is not judged by its extension: a sitemap
        (.xml, .xml.gz or .txt by nature), a page requisite (an image, a
        stylesheet, a script: what the skip list is made of).
        """
        m = _SCHEME_RE.match(url)
        if m is None or m.group(1).lower() not in self.allowed_schemes:
            return "scheme"
        if len(url) > self.max_url_length:
            return "too_long"
        path_match = _PATH_RE.match(url)
        path = path_match.group(1) if path_match else ""
        if (
            not any_extension
            and self._extension(path[path.rfind("/") + 1 :]) in self.skip_extensions
        ):
            return "extension"
        segments = [s for s in path.split("/") if s]
        if len(segments) > self.max_path_depth:
            return "path_depth"
        if segments and max(Counter(segments).values()) > self.max_repeated_segments:
            return "repeated_segments"
        query = url.partition("#")[0].partition("?")[2]
        if sum(1 for piece in query.split("&") if piece) > self.max_query_params:
            return "too_many_params"
        return None

    def accepts(self, url: str) -> bool:
        """True if :meth:`reject_reason` finds nothing wrong with ``url``."""
        return self.reject_reason(url) is None

    @staticmethod
    def _extension(segment: str) -> str:
        """Lowercase extension of a file name, ignoring ";params" (RFC 3986 3.3); "" if none."""
        name = segment.partition(";")[0]
        dot = name.rfind(".")
        return name[dot + 1 :].lower() if dot > 0 else ""
