"""The query side of retrieval: what a question asks for, in the index's own terms.

Questions name code the way people speak ("the rejection sampler", "DeepSeek model", "GPT-2"),
while the corpus spells it as identifiers (``rejection_sampler``, ``DeepseekModel``, ``gpt2``).
:func:`identifier_variants` joins runs of adjacent query words into those spellings and keeps
the ones the index actually contains; the precision stage uses them to recognise a file name
that the question only paraphrases (:mod:`fastrag.retrieval.precision`).

Measured: appended to the query at full BM25 weight the variants cost 0.02–0.05 recall@5 on the
public sets (rare joined terms drown the rest of the question; ``benches/ablation.py``); as a
score of their own in the precision stage they earned +0.004 pooled recall@5 out of fold, under
the +0.01 a part needs (``benches/cv.py``), so they only spell names. Pseudo-relevance feedback
(top terms of the first chunks, either as a re-score or as a second query fused in) lowered
recall at every weight tried, so it is not used.

A request around what a query asks for ("can you find", "show me the", "I'm looking for") is dropped
before any stage reads it (:func:`request_subject`): its words name no code, and a name asked for in a
sentence is still a query of one identifier.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from fastrag.retrieval.evidence import POINTS_BACK_PRONOUNS, names_identifier, subject_text, topic_words

#: Longest run of adjacent words joined into one identifier.
MAX_JOINED_WORDS = 3
#: Shortest part, and longest word, of a glued word split into index terms (:func:`glued_parts`).
MIN_PART_CHARS = 3
MAX_GLUED_CHARS = 40
_WORD = re.compile(r"[A-Za-z0-9]+")
#: A question that asks for a place in the documentation: "Which (vLLM documentation) page / section /
#: document / anchor / heading / title ...", "Where in ..." (but "where in the code": that asks for code), or the
#: same typed without its question word, the place first ("vLLM documentation page covers ...", "anchor ID marks
#: ...", "section of the docs explains ..."), at the start of a sentence, after a context it may start with ("In
#: vLLM, "). Its answer is a heading or anchor line.
#: What a person calls the code base the search runs over: "this repo", "the codebase", "the source code".
_CODEBASE = r"(?:repo|repository|codebase|code\s+base|project|library|(?:source\s+)?code|sources?)"
_ASKS_WHERE = re.compile(
    r"(?:^|[.!?]\s)\W*(?:(?:in|for|on|with|within|using)\s+[^,?]{1,40},\s*)?"
    r"(?:(?:which|what)(?:\s+\S+){0,4}?\s+(?:page|section|document|anchor|heading|title)s?\b|where\s+in\b"
    rf"(?!\s+(?:the\s+|this\s+|our\s+)?{_CODEBASE}\b)"
    r"|(?:(?:the|a|an)\s+)?(?:\S+\s+){0,3}?"
    r"(?:(?:docs?|documentation|design|guide|readme)\s+(?:page|section|document)s?|anchor\s+(?:id|name|link)|heading)"
    r"\s+(?:of|in|on|that|which|describ|explain|cover|mark|list|show|discuss|use)\w*\b"
    r"|(?:(?:the|a|an)\s+)?(?:page|section)s?\s+(?:of|in)\s+(?:the\s+)?(?:\S+\s+){0,3}?"
    r"(?:docs|documentation|guides?)\b)",
    re.IGNORECASE,
)


#: What a person puts around the thing they look for: "can you find", "I want to see", "show me the", "tell me
#: about", "explain", "help me understand", "details on", "an overview of", "is there code for", "does this repo
#: have", "I'm looking for", "find the", "the code for", "code that handles" before it; "in this repository",
#: "explained", "please" after it. Its words name no code ("find", "show", "list" and "get" are names in many
#: repositories), and with them a name typed alone is no longer a query of one identifier.
_VERB = r"(?:find|show|locate|search\s+for|look\s+for|look\s+up|point\s+(?:me\s+)?to|get|give|list|fetch)"
_ARTICLE = r"(?:(?:the|a|an|all|any|some)\s+)?"
#: What a question about whether something exists asks for: "is there code for", "are there helpers to".
_THING = r"(?:code|logic|something|anything|functions?|class(?:es)?|modules?|methods?|files?|helpers?|utilit(?:y|ies))"
#: Words that greet before a request or a question: "hey", "please", "ok".
_GREETING = r"(?:hey|hi|hello|ok|okay|so|please)"
#: A label or a greeting before the question itself: "Quick question:", "Q:", "onboarding question:", "Task:", "hey,",
#: "hi there,", "Hi!".
_LABEL = (
    r"(?:(?:(?:a\s+)?[\w-]+\s+)?(?:(?:question|q|one|task|request)\s*:|question\s+[-–—])\s*)?"
    rf"(?:{_GREETING}(?:\s+there)?\s*[,!]\s*)?"
)
#: Asking to be told about it rather than shown it: "I need to understand", "help me learn about".
_LEARN = r"(?:understand|know|learn|read)(?:\s+more)?(?:\s+about)?"
#: Saying what one means to do to it: "I want to modify", "we have to fix", "I'm trying to debug".
_CHANGE = r"(?:modify|change|edit|fix|update|extend|debug|tweak|adjust|refactor|patch|touch|improve|work\s+on)"
#: What a person is after: to find it, see it, learn about it or change it.
_INTENT = rf"(?:{_VERB}|see|{_LEARN}|{_CHANGE})"
#: Someone stating what they are after: "I want to", "we need to", "I'm trying to", "I have to", "I'd like to".
_WANTING = r"(?:(?:i|we)(?:\s+(?:want|need|have|would\s+like)|'d\s+like)|(?:i'?m|i\s+am|we'?re|we\s+are)\s+trying)"
#: Asking for help with it: "help me understand", "help me fix", "help me with".
_HELP = rf"help\s+me\s+(?:{_INTENT}|with)"
#: Verbs of fetching that make a request only before the code they fetch: "pull up the logic responsible for",
#: "Fetch the relevant source for" ("fetch retries" is about fetching).
_FETCH = (
    r"(?:pull\s+up|fetch|retrieve|retreive|grab|gather|surface|dig\s+up|bring\s+up|track\s+down|read\s+through"
    r"|open\s+up|open)"
)
#: The code a request asks for, before what it is of: "the code for", "source for", "the relevant source for", "the
#: logic responsible for", "source context for", "the code behind".
_CODE_FOR = (
    r"(?:(?:relevant|actual|real)\s+)?(?:(?:source\s+)?(?:code|implementation|definition)|logic|source)"
    r"(?:\s+context)?\s+(?:for|of|behind|responsible\s+for)"
)
_REQUEST = re.compile(
    rf"^\s*{_LABEL}(?:(?:{_GREETING}[\s,]+)?(?:"
    r"(?:give\s+me\s+)?(?:an?\s+)?overview\s+of|"
    rf"(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?"
    rf"(?:{_HELP}|{_VERB}(?:\s+me)?|tell\s+me(?:\s+more)?(?:\s+about)?)"
    rf"|{_WANTING}\s+(?:to\s+)?{_INTENT}"
    r"|(?:(?:i'?m|i\s+am|we'?re|we\s+are)\s+)?(?:(?:looking|searching)\s+for|looking\s+(?:into|at))"
    r"|(?:(?:i|we)\s+)?need\s+help\s+(?:with|on|understanding)"
    rf"|{_HELP}"
    r"|(?:any\s+)?(?:pointers|tips|hints|advice|ideas)\s+(?:on|for|about|regarding)"
    r"|point\s+me\s+(?:to|at|towards)"
    rf"|(?:{_VERB}|tell)\s+me(?:\s+more)?(?:\s+about)?"
    r"|(?:any\s+idea|do\s+you\s+know|does\s+anyone\s+know)"
    r"|(?:explain|describe)(?:\s+to\s+me)?"
    r"|(?:find|locate|search\s+for|look\s+for|look\s+up)"
    rf"|{_FETCH}(?:\s+me)?(?=\s+{_ARTICLE}{_CODE_FOR})"
    r"|(?:more\s+)?(?:info|information|details)\s+(?:about|on)|(?:what|anything|something)\s+(?:about|on)"
    rf"|(?:is|are)\s+there\s+{_ARTICLE}{_THING}\s+(?:for|to|about|that\s+handles?|which\s+handles?)"
    rf"|(?:does|do)\s+(?:this|the|our|we)\s+(?:{_CODEBASE}\s+)?"
    r"(?:have|contain|include|implement)"
    rf")\s+{_ARTICLE}(?=\S))?"
    rf"(?:{_ARTICLE}(?:{_CODE_FOR}"
    rf"|(?:code|logic)\s+(?:that|which)\s+(?:does|handles|implements|performs))\s+{_ARTICLE}(?=\S))?",
    re.IGNORECASE,
)
_AFTER = re.compile(
    rf"(?:[\s,]+(?:in|from)\s+(?:this|the|our|my)\s+{_CODEBASE}|\s+in\s+here)?"
    r"(?:[\s,]+explained)?(?:[\s,]+(?:please|pls|plz|thanks|thx|thank\s+you)\W*)?$",
    re.IGNORECASE,
)


#: A last sentence that only thanks or signs off, a name perhaps after it: "Thanks so much!", "No rush at all.",
#: "cheers", "Much appreciated - Priya", "Thanks in advance". What it says is said to the one answering, and a
#: request before it is then the message's last. One phrase, not a run of them: a repeated group whose words may
#: also be read as the name after it would backtrack exponentially on a long run of "Thanks".
_SIGN_OFF = re.compile(
    r"(?:[.!?;,]|\s[-–—]|\n)\s*(?i:thanks|thank\s+you|thx|ty|cheers|many\s+thanks|much\s+appreciated"
    r"|(?:i|i'd|i\s+would|would)?\s*(?:really\s+)?appreciate\s+(?:it|that|this|any\s+help)|no\s+rush(?:\s+at\s+all)?"
    r"|(?:kind\s+|best\s+)?regards|best\s+wishes)(?i:\s+(?:so|very)\s+much|\s+a\s+lot|\s+in\s+advance)?"
    r"(?:[\s,.!-]+[A-Z][a-z]+)?[\s.!]*$",
)


#: A field's name that says how to answer, not what to find.
_ANSWER_FIELD = (
    r"(?i:constraints?|scope|output|format|limits?|max(?:imum)?|return(?:s|ing)?|exclud(?:e|ing)|includ(?:e|ing)"
    r"|filters?|top_?k|depth|reason|notes?|deadline|priority|budget|style|requirements?|prefer(?:ences?)?)"
)
#: A field that says how to answer, not what to find, as an agent writes it after what it asks: "Constraints: cite
#: sources", "Output format: file paths", "- output: …", "limit=10", "scope=src". It and what follows are not
#: searched. A name before a colon opens a line, a sentence or a "|" part, after at most two words ("Out of
#: scope:"); further into a sentence it is prose ("Customer escalation, high priority: …").
_HOW_TO_ANSWER = re.compile(
    rf"(?:^|[\s.;,|(]){_ANSWER_FIELD}\s*=(?!=)"
    rf"|(?:^|\n|[.;!?|]\s|\s[-–—]\s)[\s*•-]*(?:\w+\s+){{0,2}}{_ANSWER_FIELD}\s*:(?!:)",
)


#: A sentence that tells how to answer, not what to find: "Do not modify files.", "Respond with paths and line ranges",
#: "Return paths only", "Only return source files".
_INSTRUCTION = re.compile(
    r"(?:[.!?;]\s+|\n\s*)(?i:do\s+not|don'?t|never|respond|reply|return|output|answer\s+with|format|limit|cite"
    r"|only\s+(?:return|list|show|include)|include|exclude)\b"
)
#: A field that says what to find, as an agent writes it: "query: …", 'query="…"', "target: …", "subject: …",
#: "search for: …", "look for: …", "Find: …". Its value (quoted, or up to the next field, "|", ";" or line) is what
#: is asked.
_WHAT_TO_FIND = re.compile(
    r"(?:^|[\s(|;,\[{-])(?i:query|q|target|subject|topic|term|terms|keywords?|symbol|lookup|find"
    r"|search(?:ing)?[\s_]*for|look(?:ing)?[\s_]+(?:for|up))\s*[:=]\s*"
    r"(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^|;\n]*?)"
    r"(?=\s*(?:[|;\n)\]}]|[\s,]\s*[\w-]+\s*[:=](?![:=])|$))"
)
#: The marks around a field's value.
_FIELD_MARKS = " \"'`,.:"


class Vocabulary(Protocol):
    """What the query side needs from an index: its tokenizer and its term statistics."""

    def tokenize(self, text: str) -> list[str]:
        """Tokens of ``text`` under the index's tokenizer."""
        ...

    def idf(self, term: str) -> float:
        """IDF of an exact index term; 0.0 when the index does not contain it."""
        ...


@dataclass(frozen=True, slots=True)
class Query:
    """A question as the retrieval stages see it.

    ``text``: the question itself (empty for a blank question). ``terms``: the distinct index terms of its
    ``subject``, the question without the words that frame it
    (:func:`~fastrag.retrieval.evidence.subject_text`). ``variants``: index terms of joined identifier spellings
    the subject does not contain verbatim (see :func:`identifier_variants`).
    """

    text: str
    terms: frozenset[str]
    variants: tuple[str, ...]
    subject: str

    @property
    def all_terms(self) -> frozenset[str]:
        """The question's terms and its identifier variants."""
        return self.terms | frozenset(self.variants)


#: Contractions typed without their apostrophe: "whats", "wheres", "im", "doesnt".
_BARE_CONTRACTION = re.compile(
    r"\b(?:(what|where|that|how|who|there)(s)|(i)(m|ve)"
    r"|(do|does|did|is|are|was|were|ca|wo|should|could|would|have|has|had)(nt))\b",
    re.IGNORECASE,
)


_LABELLED = re.compile(_LABEL, re.IGNORECASE)
#: Where the context of a message may end and what it asks may start: a sentence mark, a colon or semicolon, a
#: comma, a dash, or "and" / "so" before what the one asking needs ("I'm debugging a crash and need to find ...",
#: "… over the sprint, so I need …").
_CLAUSE_END = re.compile(
    r"(?:,\s*|\s+)(?:and|so)\s+(?=(?:i\s+|we\s+)?(?:need|want|have\s+to|must|would\s+like)\b)"
    r"|(?:[.;:!?]|,|\s[-–—])\s+",
    re.IGNORECASE,
)
#: The marks that end a sentence, or a label's colon.
_SENTENCE_MARKS = ".;:!?"
#: How many of a clause's first words are read for what it names (:func:`_leading_topic`).
_TOPIC_WORDS = 48
#: The words of a story that point at what it is about: "mentions", "involves", "suspect", "related to", "it's"; not
#: a participle, which may follow what it is about ("… mentioned in error messages").
_MENTIONS = re.compile(
    r"\b(?:mentions?|mentioning|involves?|involving|touch(?:es)?|suspects?"
    r"|(?:related|relates|due|down|similar)\s+to|points\s+(?:at|to)|pointing\s+(?:at|to)|point\s+at|blames?|hints?\s+at"
    r"|(?:it|that)(?:['’]s|\s+is)(?!\s+(?:what|where|how|why|when|who|because|not|just|something|somewhere)\b)"
    r"|caused\s+by|(?:something|thing|class|function|module|file|method|setting|option|flag)\s+(?:called|named))"
    r"\s+(?:(?:the|a|an)\s+)?",
    re.IGNORECASE,
)
#: Where a clause that goes on after what a story names starts: ", but …", " and I …", " so …".
_GOES_ON = re.compile(r",?\s+(?:but|and\s+(?:i|we|nobody|no\s+one)|so|because|since)\s+|;\s+", re.IGNORECASE)
#: A further ask joined to a request, about the answer rather than what to find ("find the relevant code and explain
#: the control flow", "What's the entry point, and are there any docs …"), its purpose ("… so I can compare", "… to
#: use as a template"), or a sentence after it. The request is what names what to find.
_FURTHER_ASK = re.compile(
    r"(?:,\s*|\s+)and\s+(?=(?:are|is|do|does|can|could|explain|describe|show|list|tell|summari[sz]e|give|walk|any"
    r"|also|then|what|where|how|which|why|who|point|maybe|highlight|note|flag|suggest|check|mention|let)\b)"
    r"|\s+so\s+(?:that\s+)?(?:i|we)\b|[.!?]+\s+"
    r"|\s+(?:in\s+order\s+)?to\s+"
    r"(?=(?:use|reuse|see|check|compare|understand|figure|learn|copy|follow|extend|model|base)\b)",
    re.IGNORECASE,
)
#: The first word of a question, or of one put with its verb first ("is the old version still around").
_ASKING_FIRST = re.compile(
    r"\W*(?:how|where|what|which|why|when|who|is|are|was|were|does|do|did|can|could|will|would|should|has|have)\b",
    re.IGNORECASE,
)
#: Where a sentence ends.
_SENTENCE_END = re.compile(r"[.!?]+\s+")
#: Words in "-ing" that open a sentence without telling what the one asking does: "According to the docs, …",
#: "Using LoRA, how do I …".
_NOT_DOING = (
    r"(?:accord|regard|concern|consider|includ|exclud|follow|assum|us|hav|be|noth|someth|anyth|everyth|bring|ship)ing\b"
)
#: A context about the one asking: said in the first person, "As a(n) ...", labelled ("Context:", "Task:"), or
#: opened by what they are doing ("Writing a migration guide, …", "Porting this module to async, so …").
_ABOUT_ASKER = re.compile(
    r"\b(?:i(?!/)|i'm|im|i've|i'd|me|my|we|we're|our|us)\b"
    r"|^\W*as\s+an?\b|^\W*(?:context|background|task|goal|situation|note|fyi|ticket|story)\b"
    rf"|^\W*(?!{_NOT_DOING})[a-z]{{3,}}ing\s",
    re.IGNORECASE,
)
#: What starts the reason given after a request: the one asking at work ("I'm porting it", "we're on call"), their
#: things ("my PR", "our CI broke"), or "asking because", "because", "since", "for my …", "need it for", "it's
#: for". Not what they want ("I want to serve two adapters" says more of what is asked).
_REASON = re.compile(
    r"\W*(?:(?:i'm|im|i\s+am|we're|we\s+are)\s+(?:\w+ing|on|in|at)\b|(?:my|our)\b"
    r"|(?:asking|because|since|context|background)\b|(?:need|needed)\s+(?:it|this)\b"
    r"|(?:it's|this\s+is)\s+for\b|for\s+(?:my|our|a|an)\b)",
    re.IGNORECASE,
)
#: The first words of a question.
_QUESTION_START = re.compile(
    r"\W*(?:how|where|what|which|why|when|who|is\s+there|are\s+there|does|do|can|could)\b(?!\s+not\b)", re.IGNORECASE
)
#: Saying what one needs, the one asking perhaps left out: "need to find", "I want to see", "we'd like"; not a
#: need that points back at what was asked ("need it before standup").
_NEED = re.compile(
    rf"\W*(?:(?:i|we)(?:'d)?\s+)?(?:(?:really|just|only|also)\s+)?(?:need|want|would\s+like|like|have\s+to|must)\s+"
    rf"(?:to\s+{_INTENT}\s+)?"
    r"(?!(?:it|this|that|them)\b)",  # "need it before standup" points back: a reason, not a request
    re.IGNORECASE,
)
#: A need said in the first person ("I just want to see", "we need"): what comes before it is the asker's context,
#: whoever it is about ("Ugh, the docs are no help here. I just want to see the code for …").
_FIRST_PERSON_NEED = re.compile(
    r"(?:i|we)(?:'d)?\s+(?:(?:really|just|only|also)\s+)?(?:need|want|would\s+like)\b", re.IGNORECASE
)
#: A request's subject that starts by pointing back ("the code that does this before I reply" read as "this before I
#: reply"): what it asks for was told before it.
_POINTS_BACK_FIRST = re.compile(rf"\W*(?:{POINTS_BACK_PRONOUNS})\b", re.IGNORECASE)
#: A request's subject that ends by pointing back ("the current version of it"): what it is of was told before.
_POINTS_BACK_LAST = re.compile(
    rf"\b(?:of|for|behind|about|on|in|at|into|from|with)\s+(?:{POINTS_BACK_PRONOUNS})\W*$", re.IGNORECASE
)
#: The pronouns that always point back, wherever they stand ("this" and "that" may also say which).
_POINTS_BACK_ANYWHERE = re.compile(r"\b(?:it|them)\b", re.IGNORECASE)
#: "this", "that", "these", "those" saying which after a question's verb or a preposition: "Where is that warning
#: emitted", "the code behind this feature" (not "the code that handles …").
_POINTS_BACK_WHICH = re.compile(
    r"\b(?:is|are|was|were|does|do|did|of|for|in|on|at|about|behind|with|from|into)\s+(?:this|that|these|those)\b",
    re.IGNORECASE,
)
#: A word that starts with a capital (a name, when it is not a sentence's first word).
_CAPITALISED = re.compile(r"\b[A-Z]")
#: What a person says of the code before "implementation of": "the concrete implementation of".
_QUALITY = re.compile(
    r"((?:the|a|an)\s+)(?:real|actual|concrete|production|proper|underlying|original|genuine)\s+"
    r"(?=(?:source\s+)?(?:code|implementation|definition)\s+(?:for|of)\b)",
    re.IGNORECASE,
)


def context_request(text: str) -> str | None:
    """What ``text`` asks when it first tells who asks and why: the last request or question after a context about
    the one asking (or a need said in the first person, or a sentence that is a request, after any context) that
    names what it is about, by two topic words or one that is a name (:func:`~fastrag.retrieval.evidence.topic_words`),
    and does not point back at the context (:func:`_points_back`): "As an agent fixing a bug, I need the
    implementation of ZodError" → ``ZodError``; "I keep landing in the tests, where is the code for retries?" → the
    question; "Saw a warning in compat.py. Point me to the retry policy" → the request. A request with its reason
    after it is searched without the reason (:func:`_reasoned`). A message whose last request only points back at
    what it told ("… I think the retry policy is the culprit. Can you find it?") is searched without that request
    (:func:`_told`). ``None`` otherwise."""
    if _asked(text) is not None:
        return _reasoned(text, 0, _reason_cuts(text))
    ends = list(_CLAUSE_END.finditer(text))
    # A context about the one asking lies before a cut when its first mention ends there: read once, not per cut.
    about = _ABOUT_ASKER.search(text)
    told_from = about.end() if about is not None else len(text) + 1
    reasons = _reason_cuts(text)
    for found in reversed(ends):
        cut = found.end()
        asker = told_from <= cut or _FIRST_PERSON_NEED.match(text, cut) or _commanded(text, found)
        subject = _asked(_reasoned(text, cut, reasons) or text[cut:]) if asker else None
        if subject is not None and not _points_back(head := _head(subject)) and _names_topic(head):
            return subject
    return _told(text, ends[-1]) if ends else None


def _head(subject: str) -> str:
    """A request's ``subject`` before any further ask, purpose or sentence after it (:data:`_FURTHER_ASK`): what
    decides what the request names."""
    return _FURTHER_ASK.split(subject, maxsplit=1)[0]


def _points_back(subject: str) -> bool:
    """Whether a request's ``subject`` points back at what was told before it: it starts or ends so, or speaks of
    "it" or "them" before it names anything ("can you track it down", "where is it actually implemented"; not
    "the parser as it exists now")."""
    if _POINTS_BACK_FIRST.match(subject) is not None or _POINTS_BACK_LAST.search(subject) is not None:
        return True
    pronoun = _POINTS_BACK_ANYWHERE.search(subject) or _POINTS_BACK_WHICH.search(subject)
    return pronoun is not None and next(_leading_topic(subject[: pronoun.start()]), None) is None


def _commanded(text: str, end: re.Match[str]) -> bool:
    """Whether the sentence after ``end`` (a clause end of ``text`` that ends a sentence) is a request or a need, not
    a question: "Quick one from the platform team: show me …", "Saw a warning in compat.py. Point me to …"."""
    if end.group()[:1] not in _SENTENCE_MARKS:
        return False
    tail = text[end.end() :]
    request, label = _REQUEST.match(tail), _LABELLED.match(tail)
    return (
        (request is not None and request.end() > (label.end() if label else 0))
        or _NEED.match(tail) is not None
        or _QUESTION_START.match(tail) is not None
    )


def _names_topic(text: str, capitalised: bool = True) -> bool:
    """Whether ``text`` names what it is about: two topic words (:func:`~fastrag.retrieval.evidence.topic_words`),
    or one that is a name: shaped as one in code, or (when ``capitalised``) typed with a capital ("Step 1" is no
    sentence about anything)."""
    topic = list(itertools.islice(_leading_topic(text), 2))
    return len(topic) >= 2 or (bool(topic) and (names_identifier(topic[0]) or (capitalised and topic[0][:1].isupper())))


def _leading_topic(text: str) -> Iterator[str]:
    """The topic words (:func:`~fastrag.retrieval.evidence.topic_words`) among the first :data:`_TOPIC_WORDS` words
    of ``text``: a clause names what it is about early, and a message of thousands of words is read in linear time."""
    return topic_words(" ".join(text.split()[:_TOPIC_WORDS]))


def _told(text: str, last: re.Match[str]) -> str | None:
    """What ``text`` told before its last clause, when that clause is a request that only points back at it ("Find
    it for me", "can you show me where that happens", "Point me at the relevant files", or with one word besides:
    "the current version of it") and what was told names its topic; ``None`` otherwise. Of what was told, what
    follows the word that points at the topic in its last sentence that has one and asks nothing
    (:func:`_mentioned`: "Customer saw 502s. Logs hint at the TCP connector. Find the code responsible." → "TCP
    connector"), else all it states. The request's words ("find", "show", "code") would search for themselves. A
    request with a capitalised word after its first (a name) stays."""
    request = _asked(text[last.end() :])
    request = _head(request) if request is not None else None
    if request is None or _CAPITALISED.search(request, 1):
        return None
    topic = list(itertools.islice(_leading_topic(request), 2))
    if len(topic) > 1 or (topic and not _points_back(request)):
        return None
    told = text[: last.start()].rstrip(" ,;:-–—?.!")
    if not _names_topic(told):
        return None
    starts = [0, *(found.end() for found in _SENTENCE_END.finditer(told))]
    sentences = [told[start:end].rstrip(" ,;:-–—?.!") for start, end in zip(starts, [*starts[1:], len(told)])]
    stated = [sentence for sentence in sentences if not _ASKING_FIRST.match(sentence)]
    for sentence in reversed(stated):
        if (named := _mentioned(sentence)) != sentence:
            return named
    return ". ".join(stated) if stated and _names_topic(". ".join(stated)) else told


def _mentioned(told: str) -> str:
    """What a sentence of a story names after the first word that points at it ("the changelog mentions …", "Support
    thinks it's …", "I suspect it's related to …"), without a clause that goes on after it (", but …"), when that
    names the topic; else the sentence."""
    found = _MENTIONS.search(told)
    if found is None:
        return told
    named = _GOES_ON.split(told[found.end() :], maxsplit=1)[0]
    return named if _names_topic(named) else told


def _reasoned(text: str, start: int, reasons: Sequence[int]) -> str | None:
    """The request ``text`` starts with at ``start``, when a reason or a context about the one asking follows it
    ("Where is the retry policy? Asking because our CI broke", "… — I'm on call tonight") and the request names what
    it is about; ``None`` otherwise. ``reasons`` are where the reasons of ``text`` start (:func:`_reason_cuts`)."""
    after = bisect.bisect_right(reasons, start)
    if after == len(reasons):
        return None
    asked = text[start : reasons[after]].rstrip(" ,;:-–—?.!")
    return asked if _names_topic(_plain_subject(asked)) else None


def _reason_cuts(text: str) -> list[int]:
    """Where a reason (:data:`_REASON`) starts a clause of ``text``, in order."""
    return [found.end() for found in _CLAUSE_END.finditer(text) if _REASON.match(text, found.end())]


def _asked(text: str) -> str | None:
    """What ``text`` asks for when it starts with a request (more than a label: "Task:"), a need or a question;
    ``None`` otherwise."""
    request, need = _REQUEST.match(text), _NEED.match(text)
    label = _LABELLED.match(text)
    if request is not None and request.end() > (label.end() if label else 0):
        return _AFTER.sub("", text[request.end() :])
    if need is not None:
        return _plain_subject(_QUALITY.sub(r"\1", text[need.end() :]))
    return text if _QUESTION_START.match(text) else None


def with_apostrophes(text: str) -> str:
    """``text`` with its contractions typed without an apostrophe given one ("whats" → "what's", "im" → "i'm",
    "doesnt" → "doesn't"), as the rules that read a question's own words spell them."""

    def spelled(found: re.Match[str]) -> str:
        word, ending = (part for part in found.groups() if part is not None)
        return f"{word}{ending[0]}'{ending[1]}" if ending.lower() == "nt" else f"{word}'{ending}"

    return _BARE_CONTRACTION.sub(spelled, text)


def request_subject(text: str) -> str:
    """What ``text`` asks to find, without the request around it (:data:`_REQUEST`, :data:`_AFTER`): "Can
    you find the HTTPAdapter" → ``HTTPAdapter``, "show me the retry logic in this repo, please" → ``retry
    logic``; ``text`` itself when it makes no such request or the request is all it says. A question's own
    words ("how does", "where is") stay: they say what kind of answer it wants. A context about the one asking
    before the request goes too (:func:`context_request`), and so does a last sentence that only thanks
    (:data:`_SIGN_OFF`). Of an agent's fields, the one that says what to find is searched (:data:`_WHAT_TO_FIND`:
    'query="retry policy" limit=10'), and those that say how to answer are not (:data:`_HOW_TO_ANSWER`:
    "Constraints: only source files")."""
    return _read(text)[0]


def searched_text(text: str) -> str:
    """What retrieval searches for ``text``: what it asks (:func:`request_subject`), followed by the whole message
    when that was read out of a story around it (:func:`context_request`). The reading picks one part of a
    message, and a wrong pick ("… so I can read through it", "Could you call into that instead?") would search
    words that name nothing of the topic; with the message after it, a wrong pick costs little and a right one
    still comes first, where the precision stage reads what kind of answer a query wants."""
    subject, story = _read(text)
    return subject if story is None else _plain_subject(f"{story[0]}. {story[1]}")


def _read(text: str) -> tuple[str, tuple[str, str] | None]:
    """:func:`request_subject` of ``text``, and, when :func:`context_request` read it out of a story, that reading
    and the message it was read from (without its sign-off and the fields that say how to answer)."""
    signed = _SIGN_OFF.search(text)
    text = text[: signed.start()] if signed is not None and signed.start() > 0 else text
    field = _HOW_TO_ANSWER.search(text) or _INSTRUCTION.search(text)
    text = text[: field.start()].rstrip(_FIELD_MARKS + "|;-–—") if field is not None and field.start() > 0 else text
    named = _WHAT_TO_FIND.search(text)
    if named is not None and any(c.isalnum() for c in named.group("value")):  # a value, not a mark ("find:\n- ")
        return _plain_subject(named.group("value").strip(_FIELD_MARKS)), None
    read = context_request(text)
    return _plain_subject(read or text), None if read is None else (read, text)


def _plain_subject(text: str) -> str:
    """:func:`request_subject` of a text that starts with its request, if it makes one."""
    found = _REQUEST.match(text)
    subject = _AFTER.sub("", text[found.end() :] if found else text)
    return subject if subject.strip() else text


def asks_where(text: str) -> bool:
    """Whether the question asks *where* something is documented (which page, section, anchor,
    heading or title): such questions are answered by a heading line, and searched in the
    heading lines too (:meth:`fastrag.retrieval.retriever.Retriever.search_many`)."""
    return _ASKS_WHERE.search(text) is not None


def analyse(text: str, vocabulary: Vocabulary, variants: bool = True) -> Query:
    """``text`` as a :class:`Query`; a blank text gives an empty query (no terms, no variants)."""
    if not text.strip():
        return Query("", frozenset(), (), "")
    subject = subject_text(text)
    terms = frozenset(vocabulary.tokenize(subject))
    joined = tuple(identifier_variants(subject, vocabulary, terms)) if variants else ()
    return Query(text, terms, joined, subject)


def identifier_variants(text: str, vocabulary: Vocabulary, known: frozenset[str] | None = None) -> list[str]:
    """Index terms of the identifiers that runs of 2..:data:`MAX_JOINED_WORDS` adjacent words spell.

    Each run is tried as ``snake_case`` and as one word (which also stands for ``CamelCase``: the
    tokenizer lowercases identifiers), in the order the runs occur. A variant is kept when its
    whole-identifier token is in the index and is not already a term of the query (``known``,
    default: the tokens of ``text``). Runs containing a word the tokenizer drops (a stopword, a
    single character such as the ``s`` of ``vLLM's``) are skipped: "for the" must not become
    ``forthe``.
    """
    words = _WORD.findall(text)
    if known is None:
        known = frozenset(vocabulary.tokenize(text))
    usable = [len(w) >= 2 and bool(vocabulary.tokenize(w)) for w in words]
    found: list[str] = []
    for n in range(2, MAX_JOINED_WORDS + 1):
        for i in range(len(words) - n + 1):
            if not all(usable[i : i + n]):
                continue
            run = words[i : i + n]
            for spelling in ("_".join(run), "".join(run)):
                tokens = vocabulary.tokenize(spelling)
                whole = tokens[0] if tokens else ""
                if whole and whole not in known and whole not in found and vocabulary.idf(whole) > 0:
                    found.append(whole)
    return found


def glued_parts(text: str, vocabulary: Vocabulary) -> list[str]:
    """The parts of the words of ``text`` the index does not know that split into words it does.

    An identifier typed without its case (``vitestproject`` for ``VitestProject``) is one unknown word to
    the tokenizer, where the capitals would have given it its parts. Each such word is split
    into the fewest parts of at least :data:`MIN_PART_CHARS` characters that are all index terms (the longer
    first part on a tie); a word the index knows, or one that does not split so, adds nothing.
    """
    parts: list[str] = []
    for word in _WORD.findall(text):
        if not MIN_PART_CHARS * 2 <= len(word) <= MAX_GLUED_CHARS:
            continue
        tokens = vocabulary.tokenize(word)
        if len(tokens) != 1 or vocabulary.idf(tokens[0]) > 0:
            continue
        split = _fewest_known_parts(word.lower(), vocabulary)
        if split:
            parts.extend(split)
    return parts


def _fewest_known_parts(word: str, vocabulary: Vocabulary) -> list[str]:
    """``word`` as the fewest (at least two) pieces that each tokenize to known index terms; empty if none."""

    def known(piece: str) -> bool:
        tokens = vocabulary.tokenize(piece)
        return bool(tokens) and all(vocabulary.idf(t) > 0 for t in tokens)

    n = len(word)
    best: list[list[str] | None] = [None] * (n + 1)  # best[i]: the fewest pieces of word[i:]
    best[n] = []
    for i in range(n - MIN_PART_CHARS, -1, -1):
        for j in range(n, i + MIN_PART_CHARS - 1, -1):  # longer pieces first: the longer first part wins ties
            rest = best[j]
            if rest is not None and (best[i] is None or len(rest) + 1 < len(best[i] or ())) and known(word[i:j]):
                best[i] = [word[i:j], *rest]
    found = best[0]
    return found if found is not None and len(found) >= 2 else []
