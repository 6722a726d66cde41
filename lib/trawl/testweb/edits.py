"""Edited copies of an article: how the web changes a story's words when it copies it.

A near-duplicate family (``trawl.testweb.dups``) that only re-dresses one
text tests whether a detector sees past the template; on the real web most
of the copies a detector misses differ in the text itself, a little. This
module makes those texts, each a pure function of the original's
paragraphs and a ``random.Random`` the caller keys. The four kinds
(``records.EDIT_KINDS``):

* **correction** -- one sentence with one to three words changed (a figure,
  a name, a place, a noun, adjective or verb swapped for another of its
  kind, so the sentence still reads), and in ``NOTE_SHARE`` of them a
  correction note appended as its own paragraph ("An earlier version of
  this article misstated a figure.");
* **update** -- some sentences replaced by new sentences on the story's
  topic, and in ``ADDED_SHARE`` one more sentence inserted;
* **trimmed** -- an aggregator's copy with the last sentences cut (whole
  paragraphs when the cut reaches them), in ``SWAP_SHARE`` of them one or
  two sentences further in swapped for the aggregator's own;
* **extended** -- an aggregator's copy with an intro before the story
  ("Via <brand>: ...") or a comment after it ("Our take: ..."), one or two
  sentences.

**How much changes.** Counted in sentences of the original's prose, an edit
touches at most ``edit_budget(n) = max(1, round(EDIT_SHARE * n))`` of them
(replaced, dropped or added; an appended note counts as one added), and at
least one word: from a single word up to about ``EDIT_SHARE`` of the
sentences, the range a correction, an update or an aggregator's cut spans
on news sites. Because every new sentence is distinct from every sentence of
the original, the count is ``max(removed, added)`` over the two texts'
sentence multisets, which is how the tests measure it.

A paragraph the site repeats inside every article (``frozen``: the bio,
disclosure or newsletter pitch of ``trawl.testweb.boilerplate``) is left
as it is by every edit: an aggregator keeps the body as the feed gives it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from trawl.testweb.prose import (
    ADJECTIVES,
    FIRST_NAMES,
    LAST_NAMES,
    MOVES,
    NOUNS,
    PAST,
    PLACE_NAMES,
    Topic,
    noun_phrase,
    sentence,
    sentences,
)

#: Most of an article's sentences an edit touches (about; see ``edit_budget``).
EDIT_SHARE = 0.10
#: Shares of corrections with a note, of updates with an added sentence, and
#: of trimmed copies with sentences swapped.
NOTE_SHARE = 0.7
ADDED_SHARE = 0.5
SWAP_SHARE = 0.35
#: Words a correction changes in its sentence (bounds).
CORRECTED_WORDS = (1, 3)

Paragraphs = tuple[tuple[str, ...], ...]
_Spot = tuple[int, int]  # (paragraph, sentence) of a sentence of the prose


def edit_budget(prose_sentences: int) -> int:
    """Sentences an edit may touch in a text of ``prose_sentences``: about
    ``EDIT_SHARE`` of them, at least one."""
    return max(1, round(EDIT_SHARE * prose_sentences))


def edited_text(
    rng: random.Random,
    kind: str,
    paragraphs: Sequence[str],
    frozen: int | None,
    topic: Topic,
    source: str,
) -> tuple[str, ...]:
    """The paragraphs of the ``kind`` copy of ``paragraphs``.

    ``frozen`` is the index of the site's boilerplate paragraph (None: none),
    which no edit touches; ``source`` the brand an aggregator credits.
    """
    split: Paragraphs = tuple(sentences(p) for p in paragraphs)
    spots = [(i, j) for i, p in enumerate(split) if i != frozen for j in range(len(p))]
    draft = [list(p) for p in split]
    taken = {s for p in split for s in p}
    budget = edit_budget(len(spots))
    if kind == "correction":
        _correct(rng, draft, spots, budget)
    elif kind == "update":
        _update(rng, draft, spots, budget, _fresh(rng, topic, taken))
    elif kind == "trimmed":
        _trim(rng, draft, spots, budget, _fresh(rng, topic, taken))
    elif kind == "extended":
        _extend(rng, draft, budget, _fresh(rng, topic, taken), source, topic)
    else:
        raise ValueError(f"no edit of kind {kind!r}")
    return tuple(" ".join(p) for p in draft if p)


def _fresh(rng: random.Random, topic: Topic, taken: set[str]) -> Callable[[], str]:
    """A source of new sentences on ``topic``, none equal to one in ``taken``."""

    def draw() -> str:
        text = sentence(rng, topic)
        while text in taken:
            text = sentence(rng, topic)
        taken.add(text)
        return text

    return draw


# -- correction ----------------------------------------------------------------

_NUMBER, _PERSON, _PLACE, _DETAIL = "a figure", "a name", "the name of a place", "a detail"
_NOTES = (
    "An earlier version of this article misstated {what}.",
    "Correction: an earlier version of this story gave {what} incorrectly.",
    "This article has been amended to correct {what}.",
)


def _correct(rng: random.Random, draft: list[list[str]], spots: list[_Spot], budget: int) -> None:
    """One sentence with 1-3 words swapped, maybe a note paragraph at the end."""
    wanted = rng.randint(*CORRECTED_WORDS)
    order = rng.sample(spots, len(spots))
    for want in range(wanted, 0, -1):  # fewer words if no sentence has enough
        for i, j in order:
            fixed = respell(rng, draft[i][j], want)
            if fixed is not None:
                draft[i][j], what = fixed
                if budget >= 2 and rng.random() < NOTE_SHARE:
                    draft.append([rng.choice(_NOTES).format(what=what)])
                return
    raise ValueError("no sentence has a word a correction could change")


def respell(rng: random.Random, text: str, count: int) -> tuple[str, str] | None:
    """``text`` with ``count`` of its words swapped for others of their kind,
    and what a correction note would call the first ("a figure"); None if
    ``text`` has fewer than ``count`` swappable words.

    The first word is left alone (its capital), and a swapped word keeps its
    punctuation and, for nouns and adjectives, whether it starts with a vowel
    (so "a"/"an" still agrees).
    """
    tokens = text.split(" ")
    swaps = {k: alt for k in range(1, len(tokens)) if (alt := _swap_for(tokens, k)) is not None}
    if len(swaps) < count:
        return None
    chosen = sorted(rng.sample(sorted(swaps), count))
    what = ""
    for k in chosen:
        pool, label = swaps[k]
        core = tokens[k].strip('",.;')
        new = rng.choice([w for w in pool if w != core])
        tokens[k] = tokens[k].replace(core, new, 1)
        what = what or label
    return " ".join(tokens), what


def _swap_for(tokens: list[str], k: int) -> tuple[tuple[str, ...], str] | None:
    """(the words token ``k`` may become, what it is), or None."""
    core = tokens[k].strip('",.;')
    following = tokens[k + 1] if k + 1 < len(tokens) else ""
    if following == "percent" and core.replace(".", "", 1).isdigit():
        return (tuple(str(n) for n in range(2, 41)) if core.isdigit() else _DECIMALS), _NUMBER
    for names, what in ((FIRST_NAMES, _PERSON), (LAST_NAMES, _PERSON)):
        if core in names:
            return names, what
    if core in _ONE_WORD_PLACES:
        return _ONE_WORD_PLACES, _PLACE
    for words in (NOUNS.words, ADJECTIVES.words, _PASTS, MOVES.words):
        if core in words:
            vowel = core[:1] in "aeiou"
            return tuple(w for w in words if (w[:1] in "aeiou") == vowel and "_" not in w), _DETAIL
    return None


_DECIMALS = tuple(f"{n / 10:.1f}" for n in range(5, 100))
_ONE_WORD_PLACES = tuple(p for p in PLACE_NAMES if " " not in p)
_PASTS = tuple(PAST.values())


# -- update, trimmed, extended -------------------------------------------------------


def _update(
    rng: random.Random,
    draft: list[list[str]],
    spots: list[_Spot],
    budget: int,
    fresh: Callable[[], str],
) -> None:
    """Some sentences replaced by new ones, maybe one more inserted."""
    added = 1 if budget >= 2 and rng.random() < ADDED_SHARE else 0
    for i, j in rng.sample(spots, rng.randint(1, budget - added)):
        draft[i][j] = fresh()
    if added:
        i, j = rng.choice(spots)
        draft[i].insert(j + 1, fresh())


def _trim(
    rng: random.Random,
    draft: list[list[str]],
    spots: list[_Spot],
    budget: int,
    fresh: Callable[[], str],
) -> None:
    """The last sentences of the prose cut, maybe one or two before them swapped."""
    dropped = rng.randint(1, max(1, min(budget, len(spots) - 1)))
    kept = spots[: len(spots) - dropped]
    room = min(2, budget - dropped, len(kept))
    swapped = rng.randint(1, room) if room >= 1 and rng.random() < SWAP_SHARE else 0
    for i, j in rng.sample(kept, swapped):
        draft[i][j] = fresh()
    for i, j in sorted(spots[len(kept) :], reverse=True):
        del draft[i][j]


_INTROS = (
    "Via {source}: {what} is back in the news, and this report has the details.",
    "This report first appeared in {source} and is shared here in full.",
    "Editor's note: we are following the story of {what} closely; {source} reports.",
)


def _extend(
    rng: random.Random,
    draft: list[list[str]],
    budget: int,
    fresh: Callable[[], str],
    source: str,
    topic: Topic,
) -> None:
    """An intro paragraph before the story or a comment after it: 1-2 sentences."""
    what = noun_phrase(rng, topic)
    count = rng.randint(1, min(2, budget))
    if rng.random() < 0.6:
        intro = rng.choice(_INTROS).format(source=source, what=what)
        draft.insert(0, [intro, *(fresh() for _ in range(count - 1))])
    else:
        comment = fresh()
        added = [
            f"Our take: {comment[:1].lower()}{comment[1:]}",
            *(fresh() for _ in range(count - 1)),
        ]
        draft.append(added)
