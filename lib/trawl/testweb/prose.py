"""News-like prose for the test web's articles: words drawn by Zipf's law, shaped into sentences.

The near-duplicate families (``trawl.testweb.dups``) need article text that
a duplicate detector meets on the real web: hundreds of words from an
English vocabulary whose frequencies fall off as 1/rank (Zipf's law, the
shape every large corpus has; Manning, Raghavan & Schuetze, *Introduction to
Information Retrieval*, 5.1.2), so common words recur in every article and
rare ones almost never, and two articles on one topic share vocabulary but
not word sequences -- the same situation as two real reports on one story.
A bag of uniformly drawn words would make every pair of articles look alike
to shingling (Broder, "On the resemblance and containment of documents",
1997) or to nothing at all; a permutation of one word list would fool a
bag-of-words fingerprint such as simhash.

Words are drawn per class (determiners, nouns, verbs, ...) and put in a few
sentence shapes, so the text reads as news copy ("According to the transit
authority, the council approved a new timetable for the harbour."), with a
topic's own nouns mixed in at ``TOPIC_SHARE``. Everything is a function of a
``random.Random`` passed in: the caller seeds it, so an article is a pure
function of (seed, article id).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

#: Share of nouns drawn from the article's topic rather than the general list.
TOPIC_SHARE = 0.3
#: Bounds of an article's length in words.
MIN_WORDS, MAX_WORDS = 300, 800
#: The exponent of the rank weights: 1.0 is Zipf's classic law.
ZIPF_EXPONENT = 1.0
#: Rank offset of the content-word lists (Zipf-Mandelbrot): each list is a
#: slice of a vocabulary of many thousand words, below the function words,
#: so its head must not be as steep as the head of the whole language.
CONTENT_OFFSET = 8


class ZipfWords:
    """Words ranked by frequency, drawn with weight 1 / (rank + ``offset``) ** ``exponent``.

    ``offset`` 0 is Zipf's law; a positive one flattens the head
    (Mandelbrot's generalisation), for a list that is a slice of a vocabulary.
    """

    def __init__(
        self, words: str | Sequence[str], offset: int = 0, exponent: float = ZIPF_EXPONENT
    ) -> None:
        self.words = tuple(words.split()) if isinstance(words, str) else tuple(words)
        ranks = range(1 + offset, len(self.words) + 1 + offset)
        self._cumulative = list(accumulate(1.0 / rank**exponent for rank in ranks))

    def draw(self, rng: random.Random) -> str:
        """One word; the first of the list is the most frequent."""
        return rng.choices(self.words, cum_weights=self._cumulative)[0]


# Ranked roughly by frequency in news copy (most frequent first).
DETERMINERS = ZipfWords("the a its their this another each every one that")
PREPOSITIONS = ZipfWords(
    "of in for on with at from by about after over under between across against "
    "during before without within through near behind beyond toward despite"
)
ADJECTIVES = ZipfWords(
    "new local national public major former large small recent second early key "
    "final regional senior federal main current annual strong private financial "
    "economic political social long high low young average total full open likely "
    "possible important difficult clear serious similar separate independent joint "
    "temporary permanent rural urban coastal northern southern eastern western "
    "central modest sharp steady rapid gradual unexpected controversial ambitious "
    "costly popular historic official emergency interim revised detailed critical",
    CONTENT_OFFSET,
)
NOUNS = ZipfWords(
    "year time government city week company report plan state month council "
    "group country market number family part program service system school area "
    "team money world business community project policy data law price board "
    "decision support cost change rate level court official effort issue interest "
    "future growth increase industry job worker student player season rule vote "
    "election campaign budget tax bank housing home building street road weather "
    "river coast forest farm food oil gas network phone software customer product "
    "store brand trade deal agreement meeting statement interview analysis survey "
    "study expert hospital patient treatment trial result evidence risk safety "
    "security crisis region province village mayor minister leader party member "
    "committee agency department office staff union strike wage pension benefit "
    "contract investment investor share profit loss revenue debt inflation economy "
    "recovery demand supply shortage production factory construction bridge tunnel "
    "port ship truck vehicle park museum festival film book author artist music "
    "audience ticket club history tradition culture language judge lawyer case "
    "charge investigation fire accident damage flood emergency volunteer charity "
    "fund grant award competition proposal review audit deadline target figure "
    "estimate forecast warning concern complaint protest petition resident "
    "neighbourhood district suburb landmark harbour square library stadium "
    "station airport motorway junction depot warehouse laboratory workshop",
    CONTENT_OFFSET,
)
#: (base form, past tense) of transitive verbs.
_VERBS = (
    "announce/announced approve/approved reject/rejected review/reviewed "
    "expand/expanded delay/delayed fund/funded criticise/criticised support/supported "
    "propose/proposed launch/launched sign/signed block/blocked release/released "
    "defend/defended question/questioned extend/extended reverse/reversed "
    "publish/published welcome/welcomed restore/restored replace/replaced "
    "challenge/challenged consider/considered confirm/confirmed postpone/postponed "
    "overhaul/overhauled scrap/scrapped unveil/unveiled back/backed"
)
VERBS: tuple[tuple[str, str], ...] = tuple(
    (pair.split("/")[0], pair.split("/")[1]) for pair in _VERBS.split()
)
VERB_RANKS = ZipfWords([base for base, _ in VERBS], CONTENT_OFFSET)
PAST = dict(VERBS)
#: Past tenses of verbs of change, used with "by N percent".
MOVES = ZipfWords("rose fell grew declined increased slowed doubled stalled climbed dropped")
TIMES = ZipfWords(
    "last_week on_Tuesday earlier_this_month last_year in_March on_Friday since_2019 "
    "over_the_past_decade this_spring in_recent_weeks on_Monday late_last_year"
)
_FIRST_NAMES = (
    "Maria James Aisha Tom Priya David Elena Kwame Sofia Liam Hannah Omar Grace Mateo "
    "Yuki Daniel Fatima Lucas Chloe Ravi Ingrid Samuel Nadia Patrick Mei Jonas Amara "
    "Victor Leila Oscar Rosa Henrik Zara Felix Anya Marcus Ines Theo Clara Tariq"
)
FIRST_NAMES = tuple(_FIRST_NAMES.split())
_LAST_NAMES = (
    "Okafor Lindqvist Patel Moreau Brennan Kowalski Haddad Nakamura Fischer Osei "
    "Romero Byrne Castillo Novak Achterberg Mensah Dubois Kaur Sorensen Whitfield "
    "Alvarez Petrov Mwangi Costa Gallagher Yilmaz Bergstrom Adeyemi Santos Kelleher"
)
LAST_NAMES = tuple(_LAST_NAMES.split())
_PLACES = (
    "Northbridge Elmstead Carrow Ashford Linton Marwick Dunmore Kestrel_Bay Holloway "
    "Westmere Rivington Falkirk_Cross Ormsby Penhallow Greystone Tarrant Bellhaven "
    "Upper_Wyke Saltmarsh Quarry_Hill Fenwick Aldgate_Park Stromby Kilbride"
)
PLACE_NAMES = tuple(place.replace("_", " ") for place in _PLACES.split())
ROLES = (
    "a spokesperson for {body}",
    "who chairs {body}",
    "a senior adviser to {body}",
    "the head of {body}",
    "an analyst who has studied {body} for years",
    "a former member of {body}",
)
DOUBTS = (
    "it was not clear whether",
    "it remained uncertain whether",
    "officials would not say whether",
    "residents asked whether",
    "few expected that",
)
TAILS = ("again", "after review", "amid protests", "despite objections", "for a second year", "")


@dataclass(frozen=True)
class Topic:
    """A news beat: its label, its own nouns (ranked) and the bodies quoted in it."""

    label: str
    nouns: ZipfWords
    bodies: tuple[str, ...]


def _topic(label: str, nouns: str, bodies: str) -> Topic:
    return Topic(
        label, ZipfWords(nouns, CONTENT_OFFSET // 2), tuple(b.strip() for b in bodies.split(","))
    )


TOPICS = (
    _topic(
        "Energy",
        "grid turbine solar battery tariff pipeline reactor emissions carbon capacity "
        "outage substation hydrogen megawatt utility kilowatt generator heat_pump "
        "interconnector offshore_wind meter",
        "the energy regulator, the grid operator, the city utility, the climate panel",
    ),
    _topic(
        "Transport",
        "rail tram commuter timetable fare platform bus route signal carriage congestion "
        "freight runway terminal cycle_lane ferry ticketing depot rolling_stock toll",
        "the transit authority, the rail operator, the ferry company, the roads agency",
    ),
    _topic(
        "Health",
        "clinic ward nurse surgeon vaccine screening diagnosis prescription ambulance "
        "pharmacy infection therapy waiting_list outpatient midwife ward_round "
        "cardiology dementia_care",
        "the health board, the nursing union, the hospital trust, the medical council",
    ),
    _topic(
        "Housing",
        "tenant landlord rent mortgage planning_permit developer apartment estate "
        "zoning eviction affordability lease deposit social_housing renovation "
        "allotment heritage_listing",
        "the housing association, the planning committee, the tenants' union, the building society",
    ),
    _topic(
        "Education",
        "pupil curriculum exam classroom headteacher tuition campus semester enrolment "
        "scholarship literacy apprenticeship lecture timetable school_meal inspection",
        "the education board, the teachers' union, the university senate, the exams office",
    ),
    _topic(
        "Sport",
        "striker midfielder penalty fixture referee tournament qualifier squad transfer "
        "kickoff goalkeeper league_table relegation derby season_ticket academy",
        "the football association, the league, the supporters' trust, the club board",
    ),
    _topic(
        "Technology",
        "startup chip processor cloud encryption app update developer algorithm dataset "
        "server bandwidth privacy broadband data_centre cyberattack firmware",
        "the data protection office, the telecoms regulator, the digital agency, "
        "the chamber of commerce",
    ),
    _topic(
        "Farming",
        "harvest rainfall drought livestock irrigation fertiliser orchard grain yield "
        "frost dairy pasture seed_bank flood_plain hedgerow tractor cooperative",
        "the farmers' union, the water board, the agriculture ministry, the market cooperative",
    ),
)


def _noun(rng: random.Random, topic: Topic) -> str:
    pool = topic.nouns if rng.random() < TOPIC_SHARE else NOUNS
    return pool.draw(rng).replace("_", " ")


def _with_article(det: str, rest: str) -> str:
    """English a/an agreement: "a" before a vowel letter becomes "an"."""
    return f"{'an' if det == 'a' and rest[:1] in 'aeiou' else det} {rest}"


def noun_phrase(rng: random.Random, topic: Topic) -> str:
    """A determiner, maybe an adjective, a noun, maybe a prepositional tail."""
    adjective = f"{ADJECTIVES.draw(rng)} " if rng.random() < 0.35 else ""
    phrase = _with_article(DETERMINERS.draw(rng), adjective + _noun(rng, topic))
    if rng.random() < 0.25:
        phrase += f" {PREPOSITIONS.draw(rng)} the {_noun(rng, topic)}"
    return phrase


def _past(rng: random.Random) -> str:
    return PAST[VERB_RANKS.draw(rng)]


def _clause(rng: random.Random, topic: Topic) -> str:
    clause = f"{noun_phrase(rng, topic)} {_past(rng)} {noun_phrase(rng, topic)}"
    if rng.random() < 0.4:
        clause += f" {PREPOSITIONS.draw(rng)} {noun_phrase(rng, topic)}"
    return clause


def person(rng: random.Random) -> str:
    """A full name ("Aisha Okafor")."""
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def _quote(rng: random.Random, topic: Topic) -> str:
    role = rng.choice(ROLES).format(body=rng.choice(topic.bodies))
    return f'"{_cap(_clause(rng, topic))}," said {person(rng)}, {role}'


def _figure(rng: random.Random, topic: Topic) -> str:
    percent = rng.choice((rng.randint(2, 40), round(rng.uniform(0.5, 9.9), 1)))
    when = TIMES.draw(rng).replace("_", " ")
    return f"{noun_phrase(rng, topic)} {MOVES.draw(rng)} by {percent} percent {when}"


def sentence(rng: random.Random, topic: Topic) -> str:
    """One sentence in one of seven shapes, capitalised and ending with a full stop."""
    shape = rng.choices(range(7), (30, 12, 12, 12, 10, 14, 10))[0]
    if shape == 0:
        text = _clause(rng, topic)
    elif shape == 1:
        text = f"{_clause(rng, topic)}, and {_clause(rng, topic)}"
    elif shape == 2:
        text = f"according to {noun_phrase(rng, topic)}, {_clause(rng, topic)}"
    elif shape == 3:
        text = _quote(rng, topic)
    elif shape == 4:
        text = _figure(rng, topic)
    elif shape == 5:
        text = f"{TIMES.draw(rng).replace('_', ' ')}, {_clause(rng, topic)}"
    else:
        base = VERB_RANKS.draw(rng)
        doubt = f"in {rng.choice(PLACE_NAMES)}, {rng.choice(DOUBTS)}"
        text = f"{doubt} {noun_phrase(rng, topic)} would {base} {noun_phrase(rng, topic)}"
    return _cap(text) + "."


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def article_text(rng: random.Random, topic: Topic) -> tuple[str, ...]:
    """Paragraphs of 2-6 sentences, ``MIN_WORDS``-``MAX_WORDS`` words in all.

    The target is drawn short of ``MAX_WORDS`` by more than the longest
    sentence, so the paragraph that crosses it never overshoots the bound.
    """
    target, words = rng.randint(MIN_WORDS, MAX_WORDS - 80), 0
    paragraphs: list[str] = []
    while words < target:
        sentences = [sentence(rng, topic) for _ in range(rng.randint(2, 6))]
        while sentences and words + sum(len(s.split()) for s in sentences) > MAX_WORDS:
            sentences.pop()
        paragraphs.append(" ".join(sentences))
        words += len(paragraphs[-1].split())
    return tuple(p for p in paragraphs if p)


def third_person(base: str) -> str:
    """approve -> approves, push -> pushes: the headline's present tense."""
    return base + ("es" if base.endswith(("s", "sh", "ch", "x", "z")) else "s")


def headline(rng: random.Random, topic: Topic) -> str:
    """A news headline in one of four shapes, in sentence case."""
    place, thing = rng.choice(PLACE_NAMES), topic.nouns.draw(rng).replace("_", " ")
    noun, adjective = NOUNS.draw(rng), ADJECTIVES.draw(rng)
    shape = rng.randrange(4)
    if shape == 0:
        body = rng.choice(topic.bodies).removeprefix("the ")
        text = f"{body} {third_person(VERB_RANKS.draw(rng))} {adjective} {thing} {noun}"
    elif shape == 1:
        text = f"{place} {thing} {noun} {_past(rng)} {rng.choice(TAILS)}"
    elif shape == 2:
        text = f"what the {adjective} {thing} {noun} means for {place}"
    else:
        text = f"{rng.randint(3, 9)} things to know about the {adjective} {thing} {noun}"
    return _cap(text.strip())


_SENTENCE_END = re.compile(r'(?<=\.) (?=["A-Z])')


def sentences(paragraph: str) -> tuple[str, ...]:
    """The sentences of a paragraph of ``sentence`` output, in order.

    Every sentence ends with a full stop and the next begins with a capital or
    a quote; no sentence has a full stop followed by a space inside it (numbers
    are spelled "2.5"), so the split is exact.
    """
    return tuple(_SENTENCE_END.split(paragraph)) if paragraph else ()
