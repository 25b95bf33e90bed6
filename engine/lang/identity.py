"""Words that name who a person is (race, body, gender, sexuality, religion, age, disability).

A generator that inserts one of them changes what the case is about: *the worst film a fat
man has made*, *the wisdom of its white subjects*. Careful readers judged such insertions off
their capability, and a test that gains a demographic attribute by chance measures a model's
bias by accident. Nationalities (``DEMONYMS``) count only before a person (*a french film*
keeps its sense, *a japanese man* does not); words that mostly describe things (*old*,
*young*, *short*, *straight*) are not listed.
"""

from __future__ import annotations

from functools import lru_cache

IDENTITY_WORDS = frozenset(
    {
        # race and colour of skin
        "white", "black", "brown", "asian", "african", "caucasian", "hispanic", "latino", "latina",
        "arab", "negro", "colored", "coloured", "ethnic", "racial", "aboriginal", "indigenous",
        # body
        "fat", "obese", "overweight", "skinny", "chubby", "plump", "ugly", "handsome", "bald",
        # gender and sexuality
        "male", "female", "masculine", "feminine", "gay", "lesbian", "bisexual", "queer",
        "transgender", "trans", "effeminate",
        # religion
        "jewish", "muslim", "christian", "catholic", "protestant", "hindu", "buddhist", "atheist",
        "islamic", "mormon",
        # age and disability
        "elderly", "teenage", "disabled", "handicapped", "crippled",
        "blind", "deaf", "dumb", "retarded", "autistic",
    }
)  # fmt: skip


def identity_word(word: str) -> bool:
    return word.lower() in IDENTITY_WORDS


# Nationalities and regions: harmless before a thing ("a french film"), an identity before
# a person ("a japanese man", "the british director dario argento").
DEMONYMS = frozenset(
    {
        "american", "british", "english", "scottish", "irish", "welsh", "canadian", "australian",
        "french", "german", "italian", "spanish", "portuguese", "dutch", "belgian", "swiss",
        "austrian", "swedish", "norwegian", "danish", "finnish", "icelandic", "polish", "czech",
        "hungarian", "romanian", "bulgarian", "greek", "turkish", "russian", "ukrainian",
        "serbian", "croatian", "european", "japanese", "chinese", "korean", "vietnamese", "thai",
        "indian", "pakistani", "iranian", "persian", "iraqi", "israeli", "egyptian", "moroccan",
        "nigerian", "kenyan", "ethiopian", "mexican", "cuban", "brazilian", "argentine",
        "argentinian", "chilean", "colombian", "peruvian", "venezuelan", "latin", "western",
        "eastern", "oriental", "foreign", "native", "filipino", "indonesian", "malaysian",
        "taiwanese", "tibetan", "afghan", "palestinian", "lebanese", "syrian", "saudi",
        "hollywood", "scandinavian", "caribbean", "jamaican", "haitian",
    }
)  # fmt: skip


# People WordNet files elsewhere: "person" is its top category (noun.Tops), a cast or a
# crew a group (noun.group). "the [japanese] cast" gives its actors a nationality too.
PEOPLE_NOUNS = frozenset(
    {"person", "persons", "people", "cast", "casts", "crew", "ensemble", "troupe", "family", "couple", "audience"}
)


@lru_cache(maxsize=4096)
def is_person_noun(word: str) -> bool:
    """A noun whose first WordNet senses name a person (man, director, brother, women), or
    one of ``PEOPLE_NOUNS``."""
    from checkray.engine.lang.wordnet import wordnet

    if word.lower() in PEOPLE_NOUNS:
        return True
    return any(s.lexname() == "noun.person" for s in wordnet().synsets(word.lower(), pos="n")[:2])


def nationality_reason(word: str, next_word: str | None) -> str | None:
    """Why inserting ``word`` before ``next_word`` gives a person a nationality (None: it
    does not). ``identity_word`` covers the words that are never inserted."""
    if word.lower() in DEMONYMS and next_word and is_person_noun(next_word):
        return f"'{word} {next_word}': a nationality the seed's person did not have"
    return None
