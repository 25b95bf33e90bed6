"""CMU's Link Grammar as a check that a written sentence is grammatical.

A reviewer's own slip is often a real word in the wrong place ("This must me one of the
worst", "I thought is was impossible", "The jokes and script was terrible!"): no word
list sees it, and the packaged language models rank such sentences no lower than clean
ones (``bench/seed_slip_detectors.py``). Link Grammar parses a sentence by linking every
word to others under an English lexicon; when no parse links them all, it names the words
it had to leave out. On the contrast-set sentences people read, it refused 10 of the 14
seeds with a slip and 15 of 80 clean ones (same script). Its lexicon misses some informal
English ("Liam was great as always."), and on CR1's tokenised review fragments it refused
30 of 80 clean seeds, so checkray asks it only of whole sentences a person wrote
(COSTELLO's ``inversion_grammar``).

The parser is Debian's ``link-grammar`` (``python3-link-grammar`` and
``link-grammar-dictionaries-en``; ``make grammar`` installs them where apt is available,
and ``make test`` and ``make setup-at-size`` run it).
Debian builds the Python module for its own Python 3.11, whose ABI a venv's CPython 3.11
shares, so it is loaded from Debian's folder when the venv has no copy of its own.
"""

from __future__ import annotations

import atexit
import importlib.util
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

from checkray.engine.errors import InputError

DEBIAN_MODULE = Path("/usr/lib/python3/dist-packages/linkgrammar")
INSTALL = "apt-get install python3-link-grammar link-grammar-dictionaries-en"
MAX_PARSE_SECONDS = 3  # a longer parse is given up; the sentence then counts as unparsed


@lru_cache(maxsize=1)
def _module():
    """The ``linkgrammar`` module, or None where it is not installed for this Python."""
    try:
        import linkgrammar

        return linkgrammar
    except ImportError:
        pass
    init = DEBIAN_MODULE / "__init__.py"
    abi = sysconfig.get_config_var("SOABI")
    if not init.is_file() or not any(DEBIAN_MODULE.glob(f"_clinkgrammar.{abi}*.so")):
        return None
    spec = importlib.util.spec_from_file_location("linkgrammar", init, submodule_search_locations=[str(DEBIAN_MODULE)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["linkgrammar"] = module
    try:
        spec.loader.exec_module(module)
    except ImportError:  # the C library or a dependency is missing
        del sys.modules["linkgrammar"]
        return None
    return module


def available() -> bool:
    """Whether the parser's Python module loads here (its dictionary loads on first use)."""
    return _module() is not None


def require() -> None:
    """A one-line error where the check is asked for and the parser is missing."""
    if not available():
        raise InputError(f"the grammar check needs CMU's Link Grammar parser: {INSTALL}")


@lru_cache(maxsize=1)
def _parser():
    require()
    lg = _module()
    lg.LG_Error.set_handler(lambda *_: None)  # the dictionary's locale notices are not errors
    dictionary = lg.Dictionary("en")

    def options(nulls: int):
        opts = lg.ParseOptions(min_null_count=nulls, max_null_count=nulls if nulls == 0 else 1000, verbosity=0)
        opts.max_parse_time = MAX_PARSE_SECONDS
        return opts

    # Free the dictionary while its module is still loaded: at interpreter exit the
    # module's globals go first and the dictionary's own __del__ then fails.
    atexit.register(_parser.cache_clear)
    return lg, dictionary, options(0), options(1)


@lru_cache(maxsize=65536)
def unlinked_words(sentence: str) -> tuple[str, ...]:
    """The words the best parse of ``sentence`` leaves out; () when every word is linked."""
    lg, dictionary, whole, partial = _parser()
    timed_out = getattr(lg, "LG_TimerExhausted", lg.LG_Error)  # a long sentence past MAX_PARSE_SECONDS
    try:
        if len(lg.Sentence(sentence, dictionary, whole).parse()) > 0:
            return ()
        for linkage in lg.Sentence(sentence, dictionary, partial).parse():
            # A word left out is printed in brackets ("[me]"); a subscript follows a dot.
            return tuple(w[1:-1].split(".")[0] for w in linkage.words() if w.startswith("[") and w.endswith("]"))
    except timed_out:
        pass
    return (sentence,)  # no parse at all within the time limit
