"""What a candidate's file and the question's form say, beyond the words they share.

A code repository is not a bag of chunks: a file's path says what it is (a test, an example, a page
of documentation) and what it is about (``cookies.py``, ``routing/``), and a question's form says
what it wants (a bare ``HTTPAdapter`` wants its definition; a question asked in so many words may
want the page that explains it). Only words count: ``how do I enable LoRA``, with or without its
``?``, is the same question. These are features of the precision
stage's linear ranker (:mod:`fastrag.retrieval.precision`); their weights are learned by
cross-validation on vLLM questions pooled with the repositories of a code-search benchmark, folds
by repository (``benches/cv.py``), never set by hand.

* :func:`path_kind` — whether a path is a test, an example or documentation, by conventions
  shared across languages (``tests/``, ``test_*.py``, ``*_test.go``, ``FooTest.java``,
  ``foo.spec.ts``, ``examples/``; documentation is what the language table calls prose).
* :class:`PathWords` — the share of the question's words that name the file or its folder:
  ``cookie storage`` names ``cookies.py``, ``authentication`` names ``auth.py`` (a word and a path
  part match when one is a prefix of the other and the shorter has at least
  :data:`MIN_PREFIX` characters; both sides in the index's own stemmed tokens).
* :func:`older_versions` — the files kept in a version folder beside a newer one (``src/v3/`` beside
  ``src/v4/``): the older copy of code the newer one supersedes, which :func:`names_version` tells a
  query asks for by name (``v3``).
* :func:`is_symbol_query` — a query that is one identifier (``HTTPAdapter``, ``model_post_init``,
  ``Sinatra::Base``), and :func:`symbol_name` the name it asks for (its last qualified part).
* :func:`query_traits` — what the query's words say it asks for (:data:`TRAITS`): whether it is put
  as a direct question, whether it names tests or documentation. The ranker's weights are a
  function of these (:mod:`fastrag.retrieval.precision`).
"""

from __future__ import annotations

import bisect
import itertools
import posixpath
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache

from fastrag.indexing.languages import BUILD_NAMES, BUILD_SUFFIXES, BY_NAME

__all__ = [
    "MIN_PREFIX",
    "POINTS_BACK_PRONOUNS",
    "TRAITS",
    "VERSION_FOLDER",
    "PathKind",
    "PathWords",
    "Prefixes",
    "asked_symbol",
    "asks_directly",
    "asks_for_passage",
    "asks_location",
    "is_symbol_query",
    "lead_phrase",
    "names_identifier",
    "names_version",
    "older_versions",
    "path_kind",
    "query_traits",
    "subject_text",
    "symbol_name",
    "topic_words",
]

#: Languages whose files are prose: documentation rather than code.
PROSE_LANGUAGES = ("markdown", "rst", "text")
_PROSE_SUFFIXES = frozenset(s for name in PROSE_LANGUAGES for s in BY_NAME[name].suffixes)

#: Folders that hold tests, and file names of tests, across languages' conventions.
_TEST_DIR = re.compile(r"(?:^|/)(?:tests?|__tests__|specs?|testing|testdata|test_?utils|fixtures)/", re.IGNORECASE)
_TEST_FILE = re.compile(
    r"(?:^|/)(?:test_[^/]*|[^/]*_(?:test|tests|spec)|[^/]*[a-z0-9](?:Tests?|Spec|Suite)|conftest)\.[A-Za-z0-9]+$"
    r"|\.(?:test|spec)\.[A-Za-z0-9]+$"
)
#: Folders that hold examples and samples rather than the implementation.
_EXAMPLE_DIR = re.compile(r"(?:^|/)(?:_?examples?|samples?|demos?|docs?_src)/", re.IGNORECASE)

#: Shortest word that matches a longer path part (or the other way round) as its prefix.
MIN_PREFIX = 4
#: Query words too common to name a file.
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "use",
        "used",
        "using",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "work",
        "works",
    ]
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
#: One identifier, possibly qualified (``a.b``, ``A::B``, ``A\\B``, ``a->b``), in any case: ``HTTPAdapter``
#: typed as ``httpadapter`` is the same lookup, and a plain word (``middleware``) is one too, which only the
#: index's definitions of that name answer (:class:`fastrag.retrieval.symbols.DefinitionHeads`).
_SYMBOL = re.compile(r"^[A-Za-z_]\w*(?:(?:::|\\|->|\.)[A-Za-z_]\w*)*$")
_QUALIFIER = re.compile(r"::|\\|->|\.")
#: The kinds of thing code is held in, as a question names them: "which file", "what module", "the class".
_CODE_KINDS = r"files?|modules?|class(?:es)?|functions?|methods?|packages?"
#: The stems of the words that ask for a definition: "defined", "definition", "declared".
_DEFINES = r"defin|declar"
#: Words that say what is wanted of a thing rather than which thing: that it exists, where it happens, how it is
#: used, done or built inside, shown, seen, found, explained or called, its purpose or behaviour ("why does ZodType
#: exist", "where does Router happen", "Depends usage", "Serializer internals", "show HTTPAdapter", "how is ZodError
#: done", "where can I find ZodType", "where can ZodType be found", "why is Depends needed", "who calls Depends",
#: "purpose of ZodType").
_ANSWER_KINDS = (
    r"exists?|happen(?:s|ed|ing)?|done|internals?|usages?|show|see|find|found|search|look|need(?:ed)?|explain(?:s|ed)?"
    r"|calls|called|purpose|behaviou?r"
)
#: Words a question about a named thing uses for where and how it is written, beyond :data:`_STOPWORDS`:
#: "which module contains", "where is it defined", "the code for", "how is it implemented", "where are they handled",
#: "what is responsible for it", "the ZodType type", "the Serializer trait".
_ABOUT_DEFINITION = re.compile(
    rf"(?:{_DEFINES}|implement|contain|handl|locat|responsib)\w*|lives?|code|source|{_CODE_KINDS}"
    r"|types?|structs?|interfaces?|traits?|enums?|protocols?|typeclass(?:es)?|macros?|constants?"
    rf"|{_ANSWER_KINDS}",
    re.IGNORECASE,
)
#: Words that ask for a definition as such: "where is session defined", "runtime definition".
_ASKS_DEFINITION = re.compile(rf"\b(?:{_DEFINES})\w*", re.IGNORECASE)
#: The contracted verb of a question word or pronoun ("what's", "where's", "it's", "they're"): the word before it
#: is what counts.
_CONTRACTION = re.compile(r"['’](?:s|re|ll|ve|d)$", re.IGNORECASE)
#: A character a name holds: a word made of none ("-", "—", "&") is punctuation between a question's parts.
_NAME_CHARACTER = re.compile(r"\w")
#: Marks around a word of a question that are not part of a name: quotes, backticks, brackets, sentence marks.
_AROUND_WORD = "\"'`“”‘’()[]{}<>,;:?!."


@dataclass(frozen=True, slots=True)
class PathKind:
    """What a file is, by its path: a test (and whether a test folder says so, or only its name), an
    example, documentation (prose), a build or configuration file
    (:attr:`~fastrag.indexing.languages.Language.builds`)."""

    test: bool
    example: bool
    prose: bool
    test_folder: bool = False
    build: bool = False


def path_kind(path: str) -> PathKind:
    """The :class:`PathKind` of ``path`` (``/``-separated, any prefix)."""
    name = posixpath.basename(path)
    dot = name.rfind(".")
    suffix = name[dot:].lower() if dot > 0 else ""
    folder = _TEST_DIR.search(path) is not None
    test = folder or _TEST_FILE.search(path) is not None
    example = _EXAMPLE_DIR.search(path) is not None
    build = suffix in BUILD_SUFFIXES or name in BUILD_NAMES
    return PathKind(test=test, example=example, prose=suffix in _PROSE_SUFFIXES, test_folder=folder, build=build)


#: A folder named for a major version (``v3/``): its number.
VERSION_FOLDER = re.compile(r"(?:^|/)v(\d{1,3})(?=/)")


def older_versions(paths: Sequence[str]) -> dict[int, int]:
    """The files of ``paths`` kept in a version folder whose parent also holds a newer one (``src/v3/``
    beside ``src/v4/``), each with its folder's number: the older copy of code a newer one supersedes.
    A version folder alone (``pydantic/v1/`` beside the package, a new engine in ``vllm/v1/``) says
    nothing of which copy is current, so its files are not listed."""
    newest: dict[str, int] = {}
    found: list[tuple[int, str, int]] = []
    for i, path in enumerate(paths):
        for match in VERSION_FOLDER.finditer(path):
            parent, number = path[: match.start()], int(match.group(1))
            newest[parent] = max(newest.get(parent, number), number)
            found.append((i, parent, number))
    older: dict[int, int] = {}
    for i, parent, number in found:
        if number < newest[parent]:
            older[i] = min(older.get(i, number), number)
    return older


def names_version(text: str, number: int) -> bool:
    """Whether ``text`` names major version ``number`` (``v3``, ``version 3``, ``V3``)."""
    return re.search(rf"\bv(?:ersion\s*)?{number}\b", text, re.IGNORECASE) is not None


def is_symbol_query(text: str) -> bool:
    """Whether ``text`` is a single identifier, as a symbol lookup is typed."""
    return _SYMBOL.match(text.strip()) is not None


def symbol_name(text: str) -> str:
    """The name a symbol query asks for: its last qualified part (``Sinatra::Base`` → ``Base``)."""
    return _QUALIFIER.split(text.strip())[-1]


_AUXILIARY = r"(?:is|are|was|were|do|does|did|can|could|should|would|will|shall|may|might|must|has|have|had)"
#: The auxiliaries (also with "not": "can't", "doesn't") and pronouns a question is put with beyond
#: :data:`_STOPWORDS` ("Could you explain ZodType", "should we use Depends"): no more a part of what it asks about
#: than "is" or "the".
_ASKING_WORDS = re.compile(rf"{_AUXILIARY}|\w+n['’]t|you|your|yours|our|ours|us|they|them|their", re.IGNORECASE)
#: Words that frame a question rather than say what it is about, beyond :func:`_own_word`: what the one asking
#: means to do ("I want to modify", "how do I change", "can you help") and the code base and its places ("which
#: part of the codebase", "what component is responsible", "the code that handles"). A verb frames only after the
#: one asking ("I", "you", "to", another such verb), or first before "me", "to", "for" (:data:`_PARTICLE`); a place
#: only before a question's own word or another frame word, and at the end only the few that never name a thing
#: (:data:`_FRAME_END`) and the verb of "how ... work" (:data:`_WORKS`). "how change detection works" is about change
#: detection, "how Component lifecycle hooks run" about Component, and "engine configuration and load paths" about
#: load paths.
_FRAME_VERB = re.compile(
    r"(?:want|need|like|try|help|point|look|search|see|find|locate|show|tell|explain|describe|understand|know"
    r"|learn|read|open|modify|chang|edit|fix|updat|extend|debug|tweak|adjust|touch|figure|check|refactor|review"
    r"|add|grep|dig|appreciat|start)(?:s|es|e|ed|d|ing)?|tried",
    re.IGNORECASE,
)
#: The places that never name a thing: framing wherever they stand, also after what the question is about.
_NOWHERE = (
    r"here|there|anywhere|somewhere|currently|actually|exactly|first|just|fine|else|stuff|things?|codebase|repos?"
    r"|repository|project|relevant|related|new|most"
)
_FRAME_PLACE = re.compile(
    rf"{_NOWHERE}|parts?|pieces?|areas?|places?|spots?|bits?|components?|pointers|tips|hints|involved|deals?|dealing"
    r"|that|about|bugs?|issues?|problems?|paths?|best|something|anything|everything|main|core|logic|entry",
    re.IGNORECASE,
)
_FRAME_END = re.compile(rf"{_NOWHERE}|across|throughout|within", re.IGNORECASE)
#: A question word that asks which thing, and the kinds of code it may ask for: "which file implements", "what class
#: defines", "which module contains" name the kind of answer, then how it holds the thing, not the thing itself.
_WHICH = re.compile(r"which|what", re.IGNORECASE)
_KIND = re.compile(_CODE_KINDS, re.IGNORECASE)
#: The verb a question asking how something works ends with ("how does routing work", "how X and Y work together"):
#: it frames the question as "how" does, and names nothing the code holds.
_WORKS = re.compile(r"works?|working", re.IGNORECASE)
#: What a person says of the code they want, as against its tests or documentation ("the real implementation", "the
#: actual code", "production source", "the concrete implementation"), before the word for the code itself.
_CODE_QUALITY = re.compile(
    r"real|actual|concrete|production|proper|underlying|original|genuine|shipping|hand-written", re.IGNORECASE
)
_CODE_ITSELF = re.compile(r"code|sources?|implementations?|logic|definitions?|modules?|files?|thing", re.IGNORECASE)
#: What follows the word for the code itself when it frames what the code is of: "the code for …", "the
#: implementation of …", "the logic behind …", "the module that …".
_OF = re.compile(r"for|of|behind|that|which", re.IGNORECASE)
#: The one asking, and "to": the words a verb follows when it says what they mean to do ("do I change", "how to
#: fix"; "how does update work" is about an update).
_ASKER = re.compile(r"to|i|me|my|we|us|our|you|your|u", re.IGNORECASE)
#: What a verb that opens a request is followed by: "help me", "trying to", "grep for", "dig up", "look at".
_PARTICLE = re.compile(r"me|us|to|for|up|out|at|into|through", re.IGNORECASE)
#: A query put as a direct question, by its words alone: an auxiliary first (``does X support Y``),
#: a question word that stands for what is asked (``what``, ``which``, ``who``), ``how``, ``where``,
#: ``why`` or ``when`` followed by an auxiliary or a quantity (``how do I``, ``how many``, ``where in``),
#: or a person asking (``I``, ``my``, ``you``). A description of code (``how requests are retried``,
#: ``retry policy``) is none of these, whatever punctuation ends it.
_ASKS = re.compile(
    rf"^\W*{_AUXILIARY}\b|\b(?:what|which|who|whose|whom)\b"
    rf"|\b(?:how|where|why|when)(?:'s|\s+{_AUXILIARY}|\s+(?:many|much|long|often|far)|\s+in)\b"
    r"|(?-i:\b(?:I|me|my)\b(?!/))|\byou(?:rs?)?\b",
    re.IGNORECASE,
)
#: Words that name tests, and words that name documentation.
_NAMES_TESTS = re.compile(r"\b(?:tests?|testing|tested|unit ?tests?|specs?|fixtures?)\b", re.IGNORECASE)
_NAMES_DOCS = re.compile(
    r"\b(?:docs?|documentation|documented|guides?|tutorials?|readmes?|manual|pages?|sections?)\b", re.IGNORECASE
)
#: A question that asks where something is: ``where``; which (or what) file, module, class, function,
#: package, folder or code holds it; what handles it, implements it, is responsible for it; or a request for the code
#: itself ("show me the implementation", "can you pull up the code", "I need the source for …").
_LOCATES = re.compile(
    rf"\bwhere\b|\b(?:which|what)\s+(?:\w+\s+){{0,2}}?"
    rf"(?:{_CODE_KINDS}|code|logic|folders?|director(?:y|ies)|components?|parts?)\b"
    r"|\bwhat\s+(?:handles|implements|is\s+responsible\s+for|takes\s+care\s+of|deals\s+with|manages)\b"
    r"|\b(?:show|point|pull\s+up|bring\s+up|see|read|need|give|open|find)\b(?:\s+(?:me|us))?(?:\s+to)?"
    r"\s+(?:the|that|its|their|this|your)\s+(?:\w+\s+)?(?:code|implementation|source(?:\s+code)?|logic)\b",
    re.IGNORECASE,
)
#: A word in the shape of a name in code: snake_case (an underscore beside a letter or digit), qualified
#: (``a.b``, ``A::B``, ``a->b``), camelCase, CamelCase of two humps or more, or a call (``f()``). An
#: acronym (``HTTP``, ``MoE``, ``vLLM``) is not one.
_IDENTIFIER = re.compile(
    r"[^\W_]_|_[^\W_]|[A-Za-z_]\w*(?:\.|::|->)[A-Za-z_]|[a-z]{2,}[A-Z]|\b[A-Z][a-z0-9]+[A-Z][a-z]|\w\(\)"
)
#: The traits :func:`query_traits` reads from a query's words, in its order.
TRAITS = ("asks", "names_tests", "names_docs")


def asks_directly(text: str) -> bool:
    """Whether ``text`` is put as a direct question (see :data:`_ASKS`): its words decide, never its
    punctuation."""
    return _ASKS.search(text) is not None


def asks_location(text: str) -> bool:
    """Whether ``text`` asks where something is (``where is the retry policy``, ``which file parses
    cookies``): its answer is a file, and several files answer it better than one file's spans."""
    return _LOCATES.search(text) is not None


def names_identifier(text: str) -> bool:
    """Whether ``text`` names something by its name in code (``ClientSession``, ``max_num_seqs``,
    ``app.render``, ``withContext``): a question about a named thing asks for the passage about it."""
    return _IDENTIFIER.search(text) is not None


#: The pronouns that point back at what a message named before ("can you find it", "show me that").
POINTS_BACK_PRONOUNS = r"it|this|that|them|these|those"
#: Words that point back at what a message named before: those pronouns, and "now", "here", "there".
_POINTS_BACK = re.compile(rf"{POINTS_BACK_PRONOUNS}|now|here|there", re.IGNORECASE)
#: A number ("Step 1", "by 10", "4.2"): it counts or versions what a message names.
_NUMBER = re.compile(r"\d[\d.,:x%]*")
#: Words that name nothing a message asks about: what places or relates it ("the code behind that", "somewhere
#: around it", "before standup"), a verb's particle or a hedge ("track it down", "actually", "somehow"), and the
#: verbs of fetching ("track down", "pull up", "grab").
_NAMING_NOTHING = re.compile(
    r"about|above|across|after|against|along|among|around|before|behind|below|beneath|beside|besides|between"
    r"|beyond|during|inside|onto|outside|over|past|since|than|through|throughout|toward|towards|under|until|upon"
    r"|via|within|without|somewhere|anywhere|everywhere|something|anything|everything"
    r"|up|down|out|off|back|away|actually|really|just|exactly|even|also|still|only|already|somehow|again|please"
    r"|track|hunt|pull|fetch|grab|pinpoint|one|ones|points?|existing|current|latest|whole|entire",
    re.IGNORECASE,
)


def topic_words(text: str) -> Iterator[str]:
    """The words of ``text`` that say what it is about, in order and read as they are asked for: not a question's
    own words (:func:`_own_word`), not the words that frame a request (:data:`_FRAME_VERB`, :data:`_FRAME_PLACE`),
    what a person says of the code (:data:`_CODE_QUALITY`, :data:`_CODE_ITSELF`) or a word that names nothing
    (:data:`_POINTS_BACK`, :data:`_NAMING_NOTHING`). A word shaped as a name in code is one whatever it spells
    (``HandlerStack`` is no word about handling)."""
    framing = (_FRAME_VERB, _FRAME_PLACE, _CODE_QUALITY, _CODE_ITSELF, _POINTS_BACK, _NAMING_NOTHING, _NUMBER)
    return (
        w for w in _words(text) if names_identifier(w) or not (_own_word(w) or any(f.fullmatch(w) for f in framing))
    )


def asked_symbol(text: str, names_code: Callable[[str], bool] = names_identifier) -> str | None:
    """The one identifier ``text`` asks about, or ``None``: ``text`` itself when it is one identifier
    (:func:`is_symbol_query`); else its only word beyond a question's own words (:data:`_STOPWORDS`,
    :data:`_ABOUT_DEFINITION`, :data:`_ASKING_WORDS`, words under three letters, marks such as a dash) when that
    word is a name: shaped or known as one in code (``names_code``), capitalised as a name is typed, or asked for
    as a definition ("where is session defined": a word in any case, which the index may define). "How does
    ZodType work", "how ZodType works", "What is Sinatra::Base", "which module defines `Depends`", "the Depends
    class", "why does ZodType exist" ask for the same definition as the name typed alone, however the question is
    put; "how does generation work" asks about a concept, and "ZodType parse" about more than the name."""
    if is_symbol_query(text):
        return text.strip()
    content = [w for w in _subject(text) if not _own_word(w)]
    if len(content) != 1 or not is_symbol_query(content[0]):
        return None
    name = content[0]
    return name if name[0].isupper() or names_code(name) or _ASKS_DEFINITION.search(text) else None


def lead_phrase(text: str) -> list[str]:
    """The words of the first phrase ``text`` is about: from its first word beyond a question's own
    (:func:`_own_word`) up to the next function or asking word. "queue connection resolution and connectors" is
    about the queue's connection resolution, "Mutex and Semaphore for coroutine synchronization" about `Mutex`,
    "Where is the code for request logging middleware?" about request logging middleware: the file a query is
    about is named there more often than by its later words, which say what it does or what it works with."""
    words = _subject(text)
    start = next((i for i, w in enumerate(words) if not _own_word(w)), len(words))
    lead: list[str] = []
    for word in words[start:]:
        if word.lower() in _STOPWORDS or _ASKING_WORDS.fullmatch(word):
            break
        lead.append(word)
    return lead


def _words(text: str) -> list[str]:
    """The words of ``text`` without the marks around them (quotes, brackets, sentence marks, a possessive or
    contracted ending); marks alone, such as a dash, are left out."""
    words = (_CONTRACTION.sub("", w.strip(_AROUND_WORD)) for w in text.split())
    return [w for w in words if _NAME_CHARACTER.search(w)]


@lru_cache(maxsize=256)
def subject_text(text: str) -> str:
    """``text`` without the words that frame it (:data:`_FRAME_VERB`, :data:`_FRAME_PLACE`) and without the tests or
    documentation it says it does not want (:func:`_unwanted`): "Which part of the codebase handles retries" →
    "Which of the handles retries", "retries, not the tests" → "retries, "; the rest as typed. Every stage that reads
    a query asks for it, so the last few are kept."""
    wanted = _unwanted(text)
    tokens = wanted.split()
    words = [_CONTRACTION.sub("", t.strip(_AROUND_WORD)) for t in tokens]
    named = [i for i, w in enumerate(words) if _NAME_CHARACTER.search(w)]
    framed = {named[i] for i in _frame([words[i] for i in named])}
    return " ".join(t for i, t in enumerate(tokens) if i not in framed) if framed else wanted


@lru_cache(maxsize=256)
def _subject(text: str) -> tuple[str, ...]:
    """The words of ``text`` (:func:`_words`) without the ones that frame the question (:func:`_frame`)."""
    words = _words(_unwanted(text))
    framed = _frame(words)
    return tuple(w for i, w in enumerate(words) if i not in framed)


def _frame(words: Sequence[str]) -> set[int]:
    """The places of the frame words (:data:`_FRAME_VERB`, :data:`_FRAME_PLACE`, the kind of code asked for after
    :data:`_WHICH`, the code itself before :data:`_OF`) among the question's own words it opens with, before the
    first word it is about, and among those it ends with (:data:`_FRAME_END`, :data:`_WORKS`): "which file do I
    open", "which file implements", "where is the code for", "how is it done here", "the retry stuff", "how does
    routing work"; none when they are all the query says."""
    framed: set[int] = set()

    def verb(i: int, after: str) -> bool:
        before = words[i - 1] if i else ""
        return _FRAME_VERB.fullmatch(words[i]) is not None and (
            _ASKER.fullmatch(before) is not None
            or i - 1 in framed
            or (not i and _PARTICLE.fullmatch(after) is not None)
        )

    def place(word: str, after: str) -> bool:
        return _FRAME_PLACE.fullmatch(word) is not None and (
            _own_word(after) or _FRAME_PLACE.fullmatch(after) is not None or _FRAME_VERB.fullmatch(after) is not None
        )

    kind: int | None = None  # the place of the kind of code a question word asks for
    for i, word in enumerate(words):
        after = words[i + 1] if i + 1 < len(words) else ""
        if not _own_word(word):
            if not (verb(i, after) or place(word, after)):
                break
            framed.add(i)
        elif i and _WHICH.fullmatch(words[i - 1]) and _KIND.fullmatch(word):
            kind = i
            framed.add(i)
        elif kind is not None and i - 1 == kind and _ABOUT_DEFINITION.fullmatch(word):
            framed.add(i)
        elif i and words[i - 1].lower() == "the" and _CODE_ITSELF.fullmatch(word) and _OF.fullmatch(after):
            framed.add(i)  # "where is the code for", "the implementation of"
    how = next((i for i, word in enumerate(words) if word.lower() == "how"), len(words))

    def works(i: int) -> bool:
        return i > how and (
            _WORKS.fullmatch(words[i]) is not None
            or (words[i].lower() == "together" and _WORKS.fullmatch(words[i - 1]) is not None)
        )

    for i in range(len(words) - 1, -1, -1):
        if works(i):
            framed.add(i)
        elif not _own_word(words[i]):
            if not (verb(i, "") or _FRAME_END.fullmatch(words[i])):
                break
            framed.add(i)
    for i in range(len(words) - 1):
        if _CODE_QUALITY.fullmatch(words[i]) and _CODE_ITSELF.fullmatch(words[i + 1]):
            framed.add(i)  # "the real implementation", "the actual code", "production source"
    if all(i in framed or _own_word(word) for i, word in enumerate(words)):
        return set()  # nothing left to be about: the words are the query ("here", "the project")
    return framed


def _own_word(word: str) -> bool:
    """Whether ``word`` is one of a question's own words rather than what it asks about: a stopword, a word under
    three letters, a word about definitions (``defined``, ``implemented``, ``class``) or one of asking (``does``,
    ``you``)."""
    return (
        (len(word) < 3 and word.isalpha())
        or word.lower() in _STOPWORDS
        or bool(_ABOUT_DEFINITION.fullmatch(word))
        or bool(_ASKING_WORDS.fullmatch(word))
    )


def asks_for_passage(text: str, docs_lead: float, names_code: Callable[[str], bool] = names_identifier) -> bool:
    """Whether ``text`` asks for the passage that answers it, rather than for the files that hold what it
    names: a direct question does, unless it asks where one name is (:func:`asked_symbol`: "where is
    `HTTPAdapter` defined", the file that defines it), or names nothing in code (``names_code``, asked last)
    and asks where or finds no documentation among its first stage's best candidates (``docs_lead`` 0):
    "where is the code for cookie storage" and "how does dependency injection work" ask which code holds a
    concept, as a few keywords do."""
    if not asks_directly(text):
        return False
    if asks_location(text):
        return asked_symbol(text, names_code) is None and names_code(text)
    return docs_lead > 0.0 or names_code(text)


#: Where one clause of a question ends and the next begins: a sentence mark, a comma, a colon, a dash, "but".
_CLAUSE = re.compile(r"[.;:!?,]\s|\s[-–—]\s|(?<!anything )\bbut\b", re.IGNORECASE)
#: Words before a mention of what is not wanted (tests, documentation, examples): "not the tests", "no docs",
#: "without tests", "skip the tests", "rather than the docs", "I don't need docs", "leave out the tests", "non-test",
#: a search engine's "-test".
_NOT_BEFORE = re.compile(
    r"\b(?:not|no|without|except|excluding|exclude|ignore|ignoring|disregard|skip|skipping|avoid|omit|omitting"
    r"|drop|minus|instead\s+of|rather\s+than|other\s+than|apart\s+from|anything\s+but|nothing\s+(?:from|in)"
    r"|filter(?:ing)?\s+out|leav(?:e|ing)\s+(?:out|aside)|steer\s+clear\s+of|spare\s+me|(?:keep|stay)\s+away\s+from"
    r"|(?:do|does)\s+not\s+\w+|(?:don|doesn)['’]?t\s+\w+)\b|\bnon-|(?<![\w-])-(?!\s)",
    re.IGNORECASE,
)
#: Words after one that say so: "tests aren't useful", "docs are not needed", "the tests are irrelevant", "test code
#: should be left out".
_NOT_AFTER = re.compile(
    r"(?:n['’]t|\bnot)\s+(?:\w+\s+)?(?:useful|needed|relevant|helpful|wanted|necessary|important)\b|\birrelevant\b"
    r"|\b(?:left|leave|stay|keep)\s+out\b|\b(?:excluded|ignored|skipped|omitted|noise|clutter)\b",
    re.IGNORECASE,
)
#: What else a query may say it does not want, beyond tests and documentation: examples, mocks, benchmarks.
_NAMES_OTHERS = re.compile(
    r"\b(?:examples?|samples?|demos?|mocks?|snippets?|benchmarks?|changelogs?|stubs?|suites?|markdown)\b",
    re.IGNORECASE,
)
#: Words beside a mention of what is not wanted that leave it the whole of what is not wanted: "not the test
#: files", "no docs please", "the tests here aren't useful", "usage examples", "unit or integration tests" (but not
#: "without manual implementation").
_ASIDE = re.compile(
    r"please|files?|folders?|director(?:y|ies)|dirs?|data|code|apps?|either|too|here|there|ones?|also|all|any|at"
    r"|these|those|its?|i|we|unit|integration|e2e|usage|type|generated|vendored|like|such|etc|stuff|things"
)


#: What a query may say it does not want.
_LEFT_OUT = (_NAMES_TESTS, _NAMES_DOCS, _NAMES_OTHERS)
#: The mentions that name a kind of something else when a word follows them ("test helpers", "example configs").
_KINDS_OF = re.compile(
    r"tests?|specs?|fixtures?|mocks?|docs?|documentation|readmes?|examples?|samples?|demos?|benchmarks?"
    r"|changelogs?|stubs?|tutorials?|unit|integration|generated|vendored|markdown|usage|fake",
    re.IGNORECASE,
)


#: A request for the code itself: a request or question, then within the sentence the code, its implementation,
#: source, logic or definition, or where it lives ("need the real implementation", "where's the code they exercise",
#: "Where is that code?", "where does it live"; not "test code", "example code", "code reviews"); or a request to find
#: something whose sentence names no tests, pages or examples ("Find the TCP connector", "locate the retry policy").
_ASKS_CODE = re.compile(
    r"\b(?:where|which|show|point|need|see|find|read)\b[^.;?!]{0,60}?"
    r"(?:\b(?:implement(?:ation|ed|s)?|sources?|logic|defin(?:es|ed|ition)|lives?)\b"
    r"|(?<!test )(?<!tests )(?<!example )(?<!sample )(?<!demo )\bcode\b(?!\s+(?:reviews?|of\s+conduct|style)))"
    r"|\b(?:find|locate|pull\s+up|trace|point\s+(?:me|us)\s+(?:to|at)|show\s+(?:me|us))\b"
    r"(?![^.;?!\n]*?\b(?:tests?|specs?|fixtures?|docs?|documentation|readmes?|examples?|samples?|demos?)\b)",
    re.IGNORECASE,
)
#: The words of a request or a question for something ("show me …", "where are …", "I need …").
_REQUEST_WORDS = r"show|see|find|read|look|give|pull|list|open|want|need|where|which|what"
#: A request or question just before a mention, which makes it what is asked for: "show me the tests", "which spec
#: files", "I want the README", "what do the integration tests", "are there examples".
_REQUESTED = re.compile(rf"\b(?:{_REQUEST_WORDS}|any|there)\b(?:\W+\w+){{0,4}}\W*$", re.IGNORECASE)


#: What comes before a mention of where the asker stands: the start of a sentence with at most two words between,
#: the asker with at most five, or a word that says it fails ("Writing docs for …", "The tests for …", "In the tests I
#: keep seeing …", "I'm writing tests", "I'd like to write a test for …", "my test suite", "to fix the failing test");
#: a mention further into a sentence is part of what it asks about ("how the mock handler for tests works").
_STANDS = re.compile(
    r"(?:^|[.;:!?]\s+)\W*(?:\w+\s+){0,2}\W*$|\b(?:i|i['’]m|we|we['’]re|my|our)\b(?:\W+\w+){0,5}\W*$"
    r"|\b(?:failing|failed|flaky|broken|erroring|crashing)\s+(?:\w+\s+)?$",
    re.IGNORECASE,
)


#: What ends a list of what is not wanted: the end of its sentence or line, a colon or a dash, or a request or
#: question ("skip the docs: where are the tests").
_LIST_BREAK = re.compile(rf"[.;!?]\s|\n|[:–—]|\s-\s|\b(?:{_REQUEST_WORDS}|how|are|is)\b", re.IGNORECASE)
#: How far before or after a mention the words that read it are looked for: every such pattern spans a few words,
#: so a long message is read in time linear in its length.
_NEAR = 400
#: Mentions of one kind a clause is read for; a clause that names tests more often is left as typed past them.
_MENTIONS_READ = 16


@lru_cache(maxsize=64)
def _asks_code(text: str) -> bool:
    """Whether ``text`` asks for the code itself anywhere (:data:`_ASKS_CODE`), before a mention of tests or pages
    that tells where the asker stands or after it; read once per message, not once per mention."""
    return _ASKS_CODE.search(text) is not None


def _situation(text: str, at: int, clause: str, found: re.Match[str]) -> bool:
    """Whether the mention ``found`` in ``clause`` says where the asker stands rather than what they ask for: the
    query asks for the code (before the mention or after it), no request stands just before it, it stands where a
    situation is told (:data:`_STANDS`), and it does not name a kind of something else, as a singular before another
    word does ("I'm writing tests for X and need the implementation", "the docs for X are thin; where does it live?",
    "point me to X? Trying to fix a flaky test"; not "show me the tests and the code", nor "how the test reporter
    works, where is that code"). ``clause`` starts at ``at`` in ``text``."""
    at += found.start()
    if not _asks_code(text):
        return False
    if _REQUESTED.search(clause, max(0, found.start() - _NEAR), found.start()) is not None:
        return False
    if not _STANDS.search(text, max(0, at - _NEAR), at):
        return False
    following = _words(clause[found.end() : found.end() + _NEAR])[:1]
    return (
        found.group().lower().endswith("s")
        or not following
        or _aside(following[0])
        or "test" in following[0].lower()  # the test named: "the failing test test_session_reuse"
        or _ASKING_WORDS.fullmatch(following[0]) is not None
    )


def _wants(kind: re.Pattern[str], text: str) -> bool:
    """Whether ``text`` names ``kind`` (tests, documentation) as what it wants: in a clause that does not say,
    before the mention or after it, that it is not wanted ("need the source, not the tests"), and not as the asker's
    situation (:func:`_situation`)."""
    for start, clause in _clauses(text):
        found = kind.search(clause)
        if (
            found
            and _negation(clause, found) == (None, None)
            and _not_listed(text, start + found.start()) is None
            and not _situation(text, start, clause, found)
        ):
            return True
    return False


def _not_listed(text: str, at: int) -> int | None:
    """Where the word that says not (:data:`_NOT_BEFORE`) starts before the mention at ``at``, in the same sentence
    but an earlier clause, when only a list of what is not wanted lies between (:func:`_aside`): "(skip vendored
    code, generated files and fixtures)"; else ``None``."""
    negations = _negations(text)
    last = bisect.bisect_right(negations, at, key=lambda span: span[1]) - 1
    if last < 0:
        return None
    first, end = negations[last]
    gap = text[end:at]
    if at - end > _NEAR or _LIST_BREAK.search(gap):
        return None
    return first if _aside(gap) else None


@lru_cache(maxsize=64)
def _negations(text: str) -> list[tuple[int, int]]:
    """Where the words of ``text`` that say not (:data:`_NOT_BEFORE`) start and end, found once per message."""
    return [found.span() for found in _NOT_BEFORE.finditer(text)]


def _clauses(text: str) -> Iterator[tuple[int, str]]:
    """The clauses of ``text`` (:data:`_CLAUSE`), each with where it starts in ``text``."""
    start = 0
    for clause in _CLAUSE.split(text):
        start = text.index(clause, start)
        yield start, clause
        start += len(clause)


def _negation(clause: str, found: re.Match[str]) -> tuple[re.Match[str] | None, re.Match[str] | None]:
    """The words in ``clause`` that say the mention ``found`` is not wanted: the last such word before it
    (:data:`_NOT_BEFORE`) and the first after it (:data:`_NOT_AFTER`), ``None`` where there is none."""
    before = None
    for before in _NOT_BEFORE.finditer(clause, 0, found.start()):
        pass
    return before, _NOT_AFTER.search(clause, found.end())


def _aside(words: str) -> bool:
    """Whether ``words`` say nothing beside a mention of what is not wanted: stopwords, :data:`_ASIDE`, more such
    mentions, a word that says not (a list of "not tests, not docs"), and the one word a mention names a kind of
    ("test helpers", "demo programs", "mock objects"; "manual implementation" is not one)."""
    seen = _words(words)
    return all(
        w.lower() in _STOPWORDS
        or _ASIDE.fullmatch(w.lower())
        or _NOT_BEFORE.fullmatch(w)
        or any(k.fullmatch(w) for k in _LEFT_OUT)
        or (i > 0 and _KINDS_OF.fullmatch(seen[i - 1]) is not None)
        for i, w in enumerate(seen)
    )


def _cut_mentions(text: str, start: int, clause: str, cut: list[tuple[int, int]]) -> bool:
    """Add to ``cut`` the spans of ``clause`` (at ``start`` in ``text``) that say what is not wanted (see
    :func:`_unwanted`); whether the clause ends in such a list, which the next clause may go on with."""
    listing = False
    for found in (found for kind in _LEFT_OUT for found in itertools.islice(kind.finditer(clause), _MENTIONS_READ)):
        before, after = _negation(clause, found)
        if before is not None and before.end() == found.start():  # "non-test code": the compound alone
            cut.append((start + before.start(), start + found.end()))
        elif before is not None and _aside(clause[before.end() :]):
            cut.append((start + before.start(), start + len(clause)))
            listing = True
        elif after is not None and _aside(clause[: found.start()]):
            rest = _aside(clause[after.end() :])
            cut.append((start, start + (len(clause) if rest else after.end())))
            listing = rest
        elif before is None and after is None and (listed := _not_listed(text, start + found.start())) is not None:
            cut.append((listed, start + found.end()))
        elif before is None and after is None and _situation(text, start, clause, found):
            cut.append((start + found.start(), start + found.end()))
    return listing


@lru_cache(maxsize=256)
def _unwanted(text: str) -> str:
    """``text`` without what it says it does not want (:data:`_LEFT_OUT`), from the word that says so to the end of
    its clause, or from the clause's start to the word that says so after the mention, when the clause says nothing
    else (:func:`_aside`); a clause after such a cut that only goes on listing goes too, and so does a clause that
    only says not ("Exclude: tests, docs"). "the retry code, not the tests" → "the retry code, ", "retries,
    excluding docs, READMEs and examples" → "retries, ", "retries. Tests and docs aren't useful" → "retries. ";
    "non-test code" → " code". They say what to leave out, and searched they would find it."""
    if not any(kind.search(text) for kind in _LEFT_OUT):
        return text
    cut: list[tuple[int, int]] = []
    ended, listing = 0, False
    for start, clause in _clauses(text):
        if listing and _aside(clause):  # the list goes on, with the marks between its items
            cut.append((ended, start + len(clause)))
        elif _NOT_BEFORE.fullmatch(clause.strip(_AROUND_WORD + " ")):  # "Exclude:" before its list
            cut.append((start, start + len(clause)))
            listing = True
        else:
            listing = _cut_mentions(text, start, clause, cut)
        ended = start + len(clause)
    if not cut:
        return text
    kept, end = [], 0
    for first, last in sorted(cut):
        kept.append(text[end:first])
        end = max(end, last)
    kept.append(text[end:])
    wanted = "".join(kept)
    return wanted if _NAME_CHARACTER.search(wanted) else text  # "no tests": nothing else to be about


def query_traits(text: str) -> tuple[float, ...]:
    """The :data:`TRAITS` of a query, 1.0 or 0.0 each: asked as a direct question, naming tests,
    naming documentation."""
    return (
        float(asks_directly(text)),
        float(_wants(_NAMES_TESTS, text)),
        float(_wants(_NAMES_DOCS, text)),
    )


class PathWords:
    """The share of a question's words that name a file or its folder (see the module docstring).

    ``tokenize`` is the index's tokenizer, so that a question's ``cookie`` and a file's
    ``cookies`` meet as the same stem. A file's path terms are computed once per file.
    """

    def __init__(self, tokenize: Callable[[str], list[str]]) -> None:
        self.tokenize = tokenize
        self._parts: dict[str, Prefixes] = {}

    def words(self, subject: str) -> frozenset[str]:
        """The index terms of the content words (no stopwords, at least 3 letters) of a question's ``subject``
        (:func:`subject_text`: the question without the words that frame it)."""
        kept = " ".join(w for w in _WORD.findall(subject) if len(w) > 2 and w.lower() not in _STOPWORDS)
        return frozenset(self.tokenize(kept)) if kept else frozenset()

    def parts(self, path: str) -> Prefixes:
        """The index terms of a file's stem and of its folder's name."""
        found = self._parts.get(path)
        if found is None:
            folder, name = posixpath.split(path)
            stem = name.split(".", 1)[0]
            found = Prefixes(self.tokenize(f"{stem} {posixpath.basename(folder)}"))
            self._parts[path] = found
        return found

    def share(self, words: frozenset[str], path: str) -> float:
        """The share of ``words`` (:meth:`words`) that match a part of ``path``'s name."""
        if not words:
            return 0.0
        parts = self.parts(path)
        return sum(1 for w in words if parts.meets(w)) / len(words)


class Prefixes:
    """Terms that a word meets when it equals one, or one is a prefix of the other, the shorter at least
    :data:`MIN_PREFIX` long (``cookie`` and ``cookies``, ``rout`` and ``router``). The terms are kept by their first
    :data:`MIN_PREFIX` characters, so a word is met in a lookup or two, not a pass over every term: the precision
    stage asks this of every candidate file and every query word."""

    __slots__ = ("_heads", "terms")

    def __init__(self, terms: Iterable[str]) -> None:
        self.terms = frozenset(terms)
        self._heads: dict[str, list[str]] = {}
        for term in self.terms:
            if len(term) >= MIN_PREFIX:
                self._heads.setdefault(term[:MIN_PREFIX], []).append(term)

    def meets(self, word: str) -> bool:
        """Whether ``word`` meets one of the terms."""
        if word in self.terms:
            return True
        near = self._heads.get(word[:MIN_PREFIX]) if len(word) >= MIN_PREFIX else None
        return near is not None and any(term.startswith(word) or word.startswith(term) for term in near)
