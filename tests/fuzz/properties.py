"""The fuzz properties, each written once: pytest runs them with a few seeded
examples, ``bench/bench_fuzz.py`` with many.

A property is the body of a hypothesis test, a plain function that asserts on
generated values, and the strategies that generate them. ``@fuzz(...)`` records
it in ``REGISTRY`` under ``<subject>/<name>`` and returns the pytest test:

* derandomized (``derandomize=True``: the same examples on every run, so a
  failure in CI fails again on a laptop) and without an example database, so
  nothing but hypothesis's own caches is written;
* a ``deadline`` per example, for the "in bounded time" half of a property.
  It is generous (seconds, where an example takes milliseconds): it fails a
  parser that goes quadratic on some input, not one that met a busy machine;
* a hang guard: a deadline is only checked once the example returns, so an
  endless loop would hang the suite. ``SIGALRM`` interrupts an example after
  ``hang_s`` with :class:`Hang` instead.

``@example(...)`` under ``@fuzz`` adds a regression example; the bench reruns
those too. Health checks about slow or large inputs are off: deep markup and
huge attribute values are what the properties are about.
"""

from __future__ import annotations

import functools
import importlib
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis.strategies import SearchStrategy

__all__ = ["REGISTRY", "SUBJECTS", "Hang", "Property", "fuzz", "load_all"]

# The modules of tests/fuzz, one per subject; the bench imports them all.
SUBJECTS = ("url", "robots", "sitemaps", "html", "warc", "client")

LARGE_INPUTS = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example)


class Hang(BaseException):
    """An example ran past its hang guard. Not an ``Exception``, so that no
    ``except Exception`` in the code under test can swallow it."""


@contextmanager
def hang_guard(seconds: float, args: tuple[Any, ...]) -> Iterator[None]:
    """Interrupt the block after ``seconds`` (main thread only, where signals go)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(signum: int, frame: object) -> None:
        raise Hang(f"no result after {seconds:g} s for {args!r:.1000}")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass(frozen=True)
class Property:
    """One property: ``check`` asserts it for the values ``strategies`` generate."""

    name: str  # "<subject>/<test name without test_>"
    check: Callable[..., None]
    strategies: tuple[SearchStrategy[Any], ...]
    max_examples: int  # in the test suite; the bench asks for more
    deadline_ms: float
    hang_s: float

    def config(self, **changes: Any) -> settings:
        """The suite's settings for this property, with ``changes``."""
        chosen: dict[str, Any] = {
            "derandomize": True,
            "database": None,
            "max_examples": self.max_examples,
            "deadline": timedelta(milliseconds=self.deadline_ms),
            "suppress_health_check": LARGE_INPUTS,
            "print_blob": False,
        }
        return settings(**(chosen | changes))

    def test(self, config: settings, each: Callable[[], None] | None = None) -> Callable[[], None]:
        """The hypothesis test of the property under ``config``; ``each`` is
        called before every example (the bench counts them with it)."""
        check, hang_s = self.check, self.hang_s

        @functools.wraps(check)  # keeps its signature and its @example regressions
        def guarded(*args: Any, **kwargs: Any) -> None:
            if each is not None:
                each()
            with hang_guard(hang_s, (*args, *kwargs.values())):
                check(*args, **kwargs)

        test: Callable[[], None] = config(given(*self.strategies)(guarded))
        return test


REGISTRY: dict[str, Property] = {}


def fuzz(
    *strategies: SearchStrategy[Any],
    max_examples: int = 100,
    deadline_ms: float = 2_000,
    hang_s: float = 10,
) -> Callable[[Callable[..., None]], Callable[[], None]]:
    """Register the decorated function as a property of the values
    ``strategies`` generate, and return its pytest test."""

    def register(check: Callable[..., None]) -> Callable[[], None]:
        subject = check.__module__.rpartition(".")[2].removeprefix("test_")
        name = f"{subject}/{check.__name__.removeprefix('test_')}"
        prop = Property(name, check, strategies, max_examples, deadline_ms, hang_s)
        REGISTRY[name] = prop
        return prop.test(prop.config())

    return register


def load_all() -> dict[str, Property]:
    """Every property of tests/fuzz, by name (importing the subject modules)."""
    for subject in SUBJECTS:
        importlib.import_module(f"tests.fuzz.test_{subject}")
    return dict(REGISTRY)
