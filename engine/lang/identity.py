"""Words that name who a person is (race, body, gender, sexuality, religion, age, disability).

A generator that inserts one of them changes what the case is about: *the worst film a fat
man has made*, *the wisdom of its white subjects*. Careful readers judged such insertions off
their capability, and a test that gains a demographic attribute by chance measures a model's
bias by accident. Nationalities are not listed (*a french film* keeps its sense), nor words that mostly
describe things (*old*, *young*, *short*, *straight*).
"""

from __future__ import annotations

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
