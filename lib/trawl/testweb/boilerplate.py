"""Paragraphs a news site repeats inside the text of its articles.

Sites put prose of their own *inside* the article body, not only around it:
an "About the author" bio under every story of a byline, an affiliate or
legal disclosure, a pitch for the site's newsletter between two paragraphs.
Main-text extraction keeps it -- it is a long paragraph inside the article,
like the story's own (``trawl.parse.maintext``: length and link density
decide, and the paragraph has no links) -- so two different articles of one
site can share a paragraph word for word and nothing else. That is the
hard negative of the near-duplicate families (``trawl.testweb.dups``).

``boilerplate_paragraph`` writes one (three or four sentences, 80-100
words) from the site's brand, the byline and the topic; the caller keys the
``random.Random`` by what the paragraph belongs to, so every article that
carries it carries the same words.
"""

from __future__ import annotations

import random

from trawl.testweb.prose import PLACE_NAMES, Topic, noun_phrase


def boilerplate_paragraph(
    rng: random.Random, kind: str, brand: str, byline: str, topic: Topic
) -> str:
    """A site's paragraph of kind "bio", "disclaimer" or "newsletter" (80-100 words).

    The caller keys ``rng`` by what the paragraph belongs to (the site and
    the byline, the site, the site and the topic), so every article that
    carries it carries the same words.
    """
    if kind == "bio":
        return _bio(rng, brand, byline, topic)
    if kind == "disclaimer":
        return _disclaimer(rng, brand, topic)
    if kind == "newsletter":
        return _newsletter(rng, brand, topic)
    raise ValueError(f"no boilerplate of kind {kind!r}")


def _bio(rng: random.Random, brand: str, byline: str, topic: Topic) -> str:
    first, beat = byline.split()[0], topic.label.lower()
    places = rng.sample(PLACE_NAMES, 3)
    rank = rng.choice(("a senior", "the chief", "the"))
    before = rng.choice(("as a researcher for", "on the newsdesk of", "as a press officer for"))
    return " ".join(
        (
            f"About the author: {byline} is {rank} {beat} correspondent at {brand} and has "
            f"covered {beat} stories across {places[0]} and {places[1]} for "
            f"{rng.randint(3, 19)} years.",
            f"Before joining {brand}, {first} worked {before} {rng.choice(topic.bodies)} in "
            f"{places[2]}.",
            f"{first}'s reporting on {rng.choice(topic.bodies)} was shortlisted for the "
            f"regional press awards in {rng.randint(2015, 2025)}.",
            f"Readers can send story ideas and documents to {first} in confidence through the "
            f"{brand} newsdesk; every message is read, though not every one can be answered.",
        )
    )


def _disclaimer(rng: random.Random, brand: str, topic: Topic) -> str:
    opener = rng.choice(("Disclosure:", "Please note:", "Editorial note:"))
    advice = rng.choice(("financial, legal or medical", "financial or legal", "professional"))
    return " ".join(
        (
            f"{opener} {brand} may earn a commission when readers buy products or services "
            "through some of the links in this article.",
            "This never affects which stories we cover or what our reporters write, and "
            "advertisers see our articles only once they are published.",
            f"Nothing in this article is {advice} advice: figures and prices were correct "
            "when it was published and may have changed since.",
            "Readers should seek independent advice before making any decision about "
            f"{noun_phrase(rng, topic)}, and can read our editorial standards on the {brand} "
            "website.",
        )
    )


def _newsletter(rng: random.Random, brand: str, topic: Topic) -> str:
    beat = topic.label.lower()
    day = rng.choice(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"))
    name = rng.choice(
        (f"{topic.label} Weekly", f"The {topic.label} Brief", f"{topic.label} Matters")
    )
    return " ".join(
        (
            f"Want more {beat} news like this? Sign up for {name}, the free newsletter from "
            f"{brand}, and get the week's most important {beat} stories in your inbox every "
            f"{day} morning.",
            f"Our reporters pick the stories, explain what they mean for {rng.choice(PLACE_NAMES)} "
            "and the rest of the region, and answer readers' questions in every issue.",
            "It takes less than a minute to subscribe, we never share your email address with "
            "anyone, and you can unsubscribe at any time with one click.",
        )
    )
