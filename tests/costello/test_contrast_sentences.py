"""CR3 at sentence level: a contrast set's (review, edit) pairs cut into the sentences the
edit changed, each kept only as one clean inversion; the table read that way, and the job
publishing what the cut refused."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from checkray.engine.costello.contrast_sentences import (
    aligned_sentences,
    grammar_refusal,
    refusal,
    refused_table,
    sentence_inversions,
    split_sentences,
)
from checkray.engine.costello.fluency import FluencyCheck, apply_fluency
from checkray.engine.costello.mutations import inversion_sentences, normalize, read_inversions
from checkray.engine.lang import link_grammar

WRITTEN = (
    "A spoiler.<br /><br />The theme music is excellent! The plot is thin. "
    "The acting is bad and the plot is dull. I liked the ending."
)
EDITED = (
    "A spoiler.<br /><br />The theme music is dull! The plot is thin. "
    "The acting is good and the plot is fun. I hated the ending."
)


def test_reviews_split_at_line_breaks_and_sentence_ends():
    assert split_sentences("Great film.<br /><br />I loved it! The end came too soon.") == [
        "Great film.",
        "I loved it!",
        "The end came too soon.",
    ]


def test_only_the_sentences_the_edit_changed_are_paired_in_order():
    assert aligned_sentences(WRITTEN, EDITED) == [
        ("The theme music is excellent!", "The theme music is dull!"),
        ("The acting is bad and the plot is dull.", "The acting is good and the plot is fun."),
        ("I liked the ending.", "I hated the ending."),
    ]
    # sentences rewritten beyond recognition are not paired with anything
    assert aligned_sentences("It was bad. Truly.", "What a triumph of cinema from start to end.") == []


@pytest.mark.parametrize(
    ("sentence", "reversed_", "check", "reason"),
    [
        ("The theme music is excellent!", "The theme music is dull!", None, None),
        ("I was surprised at how good it was.", "I was surprised at how disappointing it was.", None, None),
        ("albeit a small one which proves useless.", "albeit a small one which proves useful.", "not_a_sentence", ""),
        (
            "Despite their young age, Huppert (as the title!)",
            "Despite their age, Huppert (as the lead!)",
            "not_a_sentence",
            "",
        ),
        ("It is bad.", "It is good.", "not_a_sentence", "4-40 words"),
        ("The acting is bad and the plot is dull.", "The acting is good and the plot is fun.", "edit_span", "2 places"),
        ("It is a truly great film to watch.", "It is a film to watch.", "edit_span", "only deletes 'truly great'"),
        ("The movie is great fun.", "The movie is a complete and utter waste of time.", "edit_span", "over 3 tokens"),
        ("The horror here is hilarious.", "The horror here is hilariously good.", "polarity_flip", "not reversed"),
        ("It shows glimpses of sad characters.", "It shows glimpses of the characters.", "edit_span", "(for 'the')"),
        (
            "I could not hide my response, BOREDOM.",
            "I could not hide my response, EXICTEMENT.",
            "unknown_word",
            "EXICTEMENT",
        ),
        ("She has loved the episodes she has seen.", "She has abhorred the episodes she has seen.", None, None),
        ("The Ladies Man is a funny movie.", "The Ladies Man is a awkward movie.", "edit_grammar", "'a awkward'"),
        ("This movie was so bad that my i.q.", "This movie was so good that my i.q.", "not_a_sentence", ""),
    ],
)
def test_a_pair_is_kept_only_as_one_clean_inversion(sentence, reversed_, check, reason):
    refused = refusal(sentence, reversed_)
    if check is None:
        assert refused is None
    else:
        assert refused is not None and refused[0] == check and reason in refused[1]


def test_every_edited_sentence_is_listed_kept_or_refused_with_its_review():
    pairs = sentence_inversions(
        [(WRITTEN, EDITED), ("It was fine. I loved every minute.", "It was fine. I hated every minute.")]
    )
    assert [(p.review, p.check) for p in pairs] == [(0, None), (0, "edit_span"), (0, None), (1, None)]
    refused = refused_table(pairs).to_pylist()
    assert [(r["sentence"], r["check"], r["review"]) for r in refused] == [
        ("The acting is bad and the plot is dull.", "edit_span", 0)
    ]


def _released(tmp_path) -> str:
    # the released file's CR3 seed is the contrast set's edit, its farther text the review as written
    path = tmp_path / "released.json"
    path.write_text(json.dumps({"synon_contr": [[EDITED, "unused closer", WRITTEN]]}))
    return str(path)


def test_the_table_read_by_sentence_seeds_the_sentence_as_written(tmp_path):
    path = _released(tmp_path)
    assert read_inversions(path, "sentence") == {
        "the theme music is excellent!": "The theme music is dull!",
        "i liked the ending.": "I hated the ending.",
    }
    assert inversion_sentences(path, "sentence") == ["The theme music is excellent!", "I liked the ending."]
    # whole texts, as the paper: the edit is the seed
    assert read_inversions(path) == {normalize(EDITED): WRITTEN}
    assert inversion_sentences(path) == [EDITED]


def test_jsonl_tables_keep_their_direction(tmp_path):
    path = tmp_path / "inv.jsonl"
    path.write_text(
        json.dumps({"sentence": "The film is truly great!", "reversed": "The film is truly dreadful!"}) + "\n"
    )
    assert read_inversions(path, "sentence") == {"the film is truly great!": "The film is truly dreadful!"}


def test_inversions_are_scored_with_a_limit_of_their_own():
    seeds = {"s": ("The theme music is excellent!", None)}
    rows = [
        dict(seed_id="s", op="inversion", text=t, text_pair=None, index=-1, word=None, replacement=None)
        | dict(checks="profanity", check=None, reason=None)
        for t in ("The theme music is dull!", "The theme music is thing!")
    ]
    scores = {
        "The theme music is excellent!": -20.0,
        "The theme music is dull!": -27.0,
        "The theme music is thing!": -33.0,
    }
    check = FluencyCheck(max_drop=5.0, operators=["inversion"], operator_max_drop={"inversion": 10.0})
    kept, refused = apply_fluency(rows, seeds, scores, check)
    assert kept["check"] is None and kept["checks"] == "profanity,fluency"
    assert refused["check"] == "fluency" and refused["reason"].startswith("the inversion costs the sentence 13.0 nats")
    assert "(limit 10)" in refused["reason"]


def test_limits_name_scorable_operators():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="cannot be scored"):
        FluencyCheck(operator_max_drop={"gender": 3.0})
    with pytest.raises(ValidationError, match="must be positive"):
        FluencyCheck(operator_max_drop={"inversion": 0.0})


@pytest.mark.ray
@pytest.mark.timeout(600)
def test_costello_job_builds_cr3_from_table_sentences_and_publishes_refused_pairs(
    ray_session, rt_corpus, tmp_path, capsys
):
    from tests.costello.test_costello_job import run_small_costello

    table = _released(tmp_path)
    code, out = run_small_costello(
        rt_corpus, tmp_path, f"  inversions: {table}\n  inversion_seeds: true\n  inversion_unit: sentence\n"
    )
    assert code == 0, capsys.readouterr()
    cases = pq.read_table(out / "triples.parquet").to_pylist()
    cr3 = {c["text"] for c in cases if c["capability"] == "CR3" and c["test_type"] == "MFT"}
    farther = {c["text"] for c in cases if c["capability"] == "CR3" and c["relation"] == "farther"}
    assert cr3 and cr3 <= {"The theme music is excellent!", "I liked the ending."}
    assert farther <= {"The theme music is dull!", "I hated the ending."}
    rejected = pq.read_table(out / "rejected.parquet").to_pylist()
    refused = [r for r in rejected if r["check"] == "edit_span"]
    assert [(r["capability"], r["source"]) for r in refused] == [("CR3", "The acting is bad and the plot is dull.")]


def test_cr3_takes_its_closer_at_the_word_the_edit_changed():
    from checkray.engine.costello.mutations import Variant, inversion
    from checkray.engine.costello.triples import Seed, combine, rejected_variants

    seed = Seed("inversion-0", "They all agreed that the film was great.")
    table = {normalize(seed.text): "They all agreed that the film was awful."}
    (inverted,) = inversion(seed.text, table, "sentence")
    assert (inverted.word, inverted.replacement) == ("great", "awful")
    assert inversion(seed.text, table)[0].word is None  # a whole text names no edit
    agreed = Variant("synonym", "They all fit that the film was great.", index=2, word="agreed", replacement="fit")
    great = Variant("synonym", "They all agreed that the film was excellent.", index=7, word="great")
    (triple,) = combine(seed, [agreed, great, inverted])
    assert triple.capability == "CR3" and triple.positive is great
    # no synonym of the edited word: no CR3 triple, and the inversion says why in rejected.parquet
    assert combine(seed, [agreed, inverted]) == []
    (row,) = rejected_variants([seed], {seed.id: [agreed, inverted]}, [], "s").to_pylist()
    assert row["check"] == "cr3_closer" and "edited words 'great'" in row["reason"]


@pytest.mark.parametrize(
    "text, slip",
    [
        ("MacDowell ... gives give a solid , anguished performance .", "'gives give' writes one verb twice"),
        ("The film sparkles with the the wisdom of its subjects .", "'the the' writes one word twice"),
        ("As plain and pedestrian as catsup --", "ends on a dash"),
        ("Each time I see it,I find it brilliant.", "no space after the comma"),
        ("It is the worst film i have ever seen.", None),  # casing, as the guide reads it
        ("He had had enough of the film .", None),
        ("You would have had enough of it by now .", None),
        ("i loved this movie , it was great .", None),  # a lower-cased corpus writes every word so
        ("A vibrant , colorful , semimusical rendition .", None),
        ("It 's a feel-bad ending -- and a dull one .", None),
        ("It differs in that it is does not rely on gags .", "'it is does' writes two finite verbs"),
        ("What it is does not matter .", None),
        ("Desperately unfunny when it tries to makes us laugh .", "'to makes' writes the infinitive inflected"),
        ("It tries to make us laugh and sends us to movies .", None),
        ("He goes to towns with them .", None),
        ("what the director can&#8217 ; t do is make it interesting .", "an HTML entity ('&#8217')"),
        ("Tom & Jerry ; a fine pair .", None),
        # user reviews: "its" for "it's", a backtick apostrophe, run-on sentences, glued quotes
        ("Peter Falk is one of the reasons its worth watching.", "'its worth' writes 'its' for \"it's\""),
        ("Its unfortunate that they made a sequel.", "'Its unfortunate' writes 'its'"),
        ("Its a shame.", "'Its a' writes 'its'"),
        ("The film proved its worth at the box office.", None),
        ("On its own , the film is fine .", None),
        ("All its odd , quirky charm is gone .", None),
        ("Its very existence is a miracle .", None),
        ("The design is excellent I`ll be surprised if it wins.", "a backtick for an apostrophe in 'I`l'"),
        ("Molly could not act AT ALL! she had no emotion.", "'ALL! she' starts a sentence in lower case"),
        ("It works, e.g. the acting is fine.", None),
        ("I loved it... and then it ended.", None),
        ("Griffin & Co. manage to be outrageous .", None),
        ("Ben Masters,(Kyd Thomas) plays a private eye.", "no space after the comma in 's,('"),
        ('He said "God works in mysterious ways," and left.', None),
        ("a drama that deserved better than a direct-to-video' release .", "a stray quote in 'video''"),
        ("the actors' work and todd solondz' script are fine .", None),
        ("rock 'n' roll and the ol' ball-and-chain , goin' home .", None),
        ("'barbershop \" is a good-hearted ensemble comedy .", "unbalanced double quotes"),
        ('" barbershop " is a good-hearted ensemble comedy .', None),
        ("the drama of cube ? s personal revelations .", "a question mark for an apostrophe"),
        ("to keep parents away from the concession stand . '", "a closing quote at the end that opens nowhere"),
        ("too hard a text to ` lick , '", None),
        ("is it good ? she asked .", None),
        (", The Sum of All Fears is simply a well-made thriller .", "opens with a comma"),
    ],
)
def test_a_slip_the_writer_left_is_named(text, slip):
    from checkray.engine.costello.seed_slips import seed_slip

    found = seed_slip(text)
    assert (found is None) if slip is None else (slip in found)


def test_a_misspelled_word_is_a_slip_where_the_reference_corpus_seldom_has_it():
    from checkray.engine.costello.context import build, from_arrays
    from checkray.engine.costello.seed_slips import seed_slip

    ref = from_arrays(build(["we rewatch it ."] * 5 + ["she had absolutey nothing ."]))
    assert "'absolutey' is misspelled" in seed_slip("She had absolutey nothing to do.", ref)
    assert seed_slip("I will rewatch it.", ref) is None  # a coined word in use
    assert seed_slip("She had absolutey nothing to do.") is None  # no reference corpus, no spelling check
    assert seed_slip("Kyd Thomaz plays a private eye.", ref) is None  # a capitalised word is a name


def test_a_contrast_pair_with_a_slip_is_refused():
    check, reason = refusal(
        "This is the the worst film I have ever seen.", "This is the the best film I have ever seen."
    )
    assert check == "seed_slip" and "the sentence as written" in reason


@pytest.mark.skipif(not link_grammar.available(), reason="Link Grammar not installed (make grammar)")
def test_the_grammar_check_refuses_a_writers_slip_and_a_broken_edit_only_when_asked():
    slip = ("The jokes and script was terrible!", "The jokes and script was wonderful!")
    assert refusal(*slip) is None  # no rule of seed_slips.py sees it
    check, reason = refusal(*slip, grammar=True)
    assert check == "grammar" and reason.startswith("the sentence as written has no parse")
    broken_edit = ("I loved this film.", "I loved this me film.")
    assert grammar_refusal(*broken_edit)[1].startswith("its edit has no parse")
    assert refusal("The theme music is excellent!", "The theme music is dull!", grammar=True) is None
    pairs = sentence_inversions(
        [("The jokes and script was terrible! I liked it.", "The jokes and script was wonderful! I liked it.")],
        grammar=True,
    )
    assert [(p.check, p.sentence) for p in pairs] == [("grammar", slip[0])]
