"""COSTELLO's mutation operators as CPU actors over Ray Data.

``MutationActor`` holds a spaCy pipeline (POS tags and lemmas; NER and, for matching
pairs only, the parser when the checked operators run),
the WordNet reader and the lexicons for its lifetime, and maps a batch of seeds
(``id``, ``text``, ``text_pair``) to one row per variant. ``mutate_corpus`` shards the
seeds over a pool of these actors (``checkray.actors.pool.map_with_actors``); a seed gives any
number of variants, so each variant row carries ``_row``, its seed's index in the batch,
by which the pool keeps the variants in seed order.
"""

from __future__ import annotations

from dataclasses import asdict

import pyarrow as pa

from checkray.actors.pool import ROW
from checkray.engine.costello.config import MutationSettings
from checkray.engine.costello.mutations import (
    Variant,
    dense_synonyms,
    gender_swap,
    inversion,
    read_inversions,
    shared_substitutions,
    substitutions,
    tokens_from_doc,
)

VARIANT_SCHEMA = pa.schema(
    [
        ("seed_id", pa.string()),
        ("op", pa.string()),
        ("text", pa.string()),
        ("text_pair", pa.string()),
        ("index", pa.int64()),
        ("word", pa.string()),
        ("replacement", pa.string()),
        ("checks", pa.string()),  # checks passed, comma-separated
        ("check", pa.string()),  # the check that rejected the variant (null: kept)
        ("reason", pa.string()),
    ]
)
ACTOR_SCHEMA = VARIANT_SCHEMA.append(pa.field(ROW, pa.int64()))  # what an actor returns


PAIR_WORDS = 8  # shared words tried per matching pair (CR4 needs one with a synonym AND an antonym)


def mutate_one(
    doc, pair_doc, text: str, inversions: dict[str, str] | None, settings: MutationSettings, ref=None
) -> list[Variant]:
    """Every operator on one seed (a single sentence, or a pair when ``pair_doc`` is given);
    ``inversions``: the table ``settings.inversions`` names, read. ``settings.dense_seed``:
    also the authors' dense synonym substitution (CR3's positive), only for seeds that the
    inversion table covers (no other CR uses it)."""
    if settings.context_checks and ref is not None:
        return _checked_one(doc, pair_doc, text, inversions, settings, ref)
    if pair_doc is not None:
        a, b = tokens_from_doc(doc), tokens_from_doc(pair_doc)
        return shared_substitutions(a, b, "synonym", PAIR_WORDS) + shared_substitutions(a, b, "antonym", PAIR_WORDS)
    tokens = tokens_from_doc(doc)
    words = dict(guard=settings.polarity_guard, per_word=settings.per_word)
    variants = substitutions(tokens, "synonym", **words) + substitutions(tokens, "antonym", **words)
    variants += gender_swap(tokens, settings.gender_pairs)
    if inversions:
        inverted = inversion(text, inversions, settings.inversion_unit)
        if inverted and settings.dense_seed is not None:
            variants += dense_synonyms(tokens, settings.dense_seed)
        variants += inverted
    return variants


def unparsed_seed(text: str) -> Variant | None:
    """The seed refused (``seed_grammar``) when Link Grammar cannot link every word of it."""
    from checkray.engine.lang.link_grammar import unlinked_words

    left_out = unlinked_words(text)
    if not left_out:
        return None
    words = ", ".join(repr(w) for w in left_out)
    reason = f"the seed as written has no parse that links every word (Link Grammar leaves out {words})"
    return Variant("seed", text, check="seed_grammar", reason=reason)


def _checked_one(doc, pair_doc, text, inversions, settings: MutationSettings, ref) -> list[Variant]:
    """The checked operators (engine/costello/checked.py): kept and rejected variants."""
    from checkray.engine.costello.checked import (
        checked_gender_swap,
        checked_shared_substitutions,
        checked_substitutions,
        profanity_checked,
    )
    from checkray.engine.costello.seed_slips import seed_slip

    if pair_doc is not None:
        a, b = tokens_from_doc(doc), tokens_from_doc(pair_doc)
        return checked_shared_substitutions(a, b, "synonym", ref, PAIR_WORDS) + checked_shared_substitutions(
            a, b, "antonym", ref, PAIR_WORDS
        )
    slip = seed_slip(text, ref)
    if slip:  # copied into every sentence of every triple: no triple of this seed is fluent
        return [Variant("seed", text, check="seed_slip", reason=f"the seed as written has a slip: {slip}")]
    if settings.seed_grammar:
        refused = unparsed_seed(text)
        if refused:
            return [refused]
    tokens = tokens_from_doc(doc)
    ents = [t.ent_type_ for t in doc]
    words = dict(
        ents=ents,
        guard=settings.polarity_guard,
        per_word=settings.per_word,
        wordnet_fallback=settings.substitutes == "table+wordnet",
    )
    senses: dict[int, int] = {}  # the sense each kept synonym found; antonyms oppose it
    variants = checked_substitutions(tokens, "synonym", ref, senses=senses, **words)
    variants += checked_substitutions(tokens, "antonym", ref, senses=senses, **words)
    variants += checked_gender_swap(tokens, ref, ents=ents, extra_pairs=settings.gender_pairs)
    if inversions:
        inverted = inversion(text, inversions, settings.inversion_unit)
        if inverted and settings.dense_seed is not None:
            variants += [profanity_checked(text, v) for v in dense_synonyms(tokens, settings.dense_seed)]
        variants += [profanity_checked(text, v) for v in inverted]
    return variants


class MutationActor:
    """Callable class for ``map_with_actors``: seeds in, variants out (ACTOR_SCHEMA)."""

    def __init__(self, settings: MutationSettings):
        from checkray.actors.spacy_nlp import load_spacy
        from checkray.engine.lang.wordnet import wordnet

        # NER stays on for the checked operators: names and titles are not edited; so does
        # the parser, which only matching pairs use (a CR4 verb's complement, ``verb_frame``).
        disable = () if settings.context_checks else ("parser", "ner")
        self.nlp = load_spacy(settings.pipeline, disable=disable)
        self.unparsed = [p for p in ("parser",) if p in self.nlp.pipe_names]
        wordnet()  # build/load once per actor, not on the first sentence
        self.ref = None
        if settings.context_checks:
            from checkray.engine.costello.context import reference_model

            self.ref = reference_model()
        self.inversions = (
            read_inversions(settings.inversions, settings.inversion_unit, settings.inversion_grammar)
            if settings.inversions
            else None
        )
        self.settings = settings

    def __call__(self, batch: pa.Table) -> pa.Table:
        ids = batch.column("id").to_pylist()
        texts = batch.column("text").to_pylist()
        pairs = batch.column("text_pair").to_pylist() if "text_pair" in batch.column_names else [None] * len(ids)
        paired = [i for i, p in enumerate(pairs) if p]
        single = [i for i, p in enumerate(pairs) if not p]
        docs: list = [None] * len(texts)
        for i, d in zip(single, self.nlp.pipe([texts[i] for i in single], disable=self.unparsed)):
            docs[i] = d
        for i, d in zip(paired, self.nlp.pipe([texts[i] for i in paired])):
            docs[i] = d
        pair_docs = dict(zip(paired, self.nlp.pipe([pairs[i] for i in paired])))
        rows = []
        for i, (seed_id, text, doc) in enumerate(zip(ids, texts, docs)):
            for v in mutate_one(doc, pair_docs.get(i), text, self.inversions, self.settings, self.ref):
                rows.append({"seed_id": seed_id, **asdict(v), ROW: i})
        return pa.Table.from_pylist(rows, schema=ACTOR_SCHEMA)


# Seeds few enough to mutate in the driver: each actor of a pool pays ~15-40 s to start
# (spaCy, WordNet, the n-gram reference) for work of ~15 ms a seed on one core, so below
# this a pool of two costs more than one mutator here (docs/performance.md).
MUTATE_IN_DRIVER_BELOW = 1_000


def mutate_corpus(
    seeds: pa.Table, settings: MutationSettings, *, backend: str = "cpu", batch_size: int = 64
) -> pa.Table:
    """Run the operators over ``seeds`` (id, text[, text_pair]) on a Ray Data actor pool, or
    in this process for a few seeds on a one-node CPU Ray (``MUTATE_IN_DRIVER_BELOW``,
    ``runtime.embed_in_driver_below: 0`` turns it off); variants in seed order (VARIANT_SCHEMA)."""
    from checkray.actors.embed_cache import small_work_plan
    from checkray.actors.pool import map_with_actors
    from checkray.engine.runtime import cluster_resources, plan_actor_pool

    device = "cpu" if backend == "auto" else backend
    plan = small_work_plan(plan_actor_pool(cluster_resources(), device), seeds.num_rows, MUTATE_IN_DRIVER_BELOW, device)
    return map_with_actors(
        seeds,
        MutationActor,
        dict(settings=settings),
        plan,
        batch_size=batch_size,
        schema=VARIANT_SCHEMA,
    )
