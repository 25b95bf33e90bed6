"""Parser actor: sentences -> spaCy tokens + a Penn-Treebank constituency tree.

benepar (the Berkeley Neural Parser, which S²LCT uses) runs when the package and its
``benepar_en3`` model load. Offline that model does not exist, so the fallback converts
spaCy's dependency parse into a PTB-labelled constituency tree (``dep_to_const``): each
head projects a phrase named from its tag (NN*/PRP/CD -> NP, JJ* -> ADJP, RB* -> ADVP,
IN/TO with an object -> PP, VB*/MD -> VP inside S/SQ/SINV, a clause with a ``mark`` ->
SBAR, a verbless sentence -> FRAG); single-word modifiers (det, amod, aux, neg, ...) stay
bare preterminals as in the Treebank. Which parser ran is returned per row and recorded
in the cases' provenance (``benepar`` or ``spacy-dep2const``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from checkray.engine.errors import InputError
from checkray.engine.s2lct.search import CorpusSearch

DEP2CONST = "spacy-dep2const"
BENEPAR = "benepar"

SUBJECTS = {"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"}
# Dependents that stay bare preterminals when they have no dependents of their own.
BARE_RELATIONS = {
    "det",
    "predet",
    "amod",
    "compound",
    "nummod",
    "poss",
    "aux",
    "auxpass",
    "neg",
    "cc",
    "punct",
    "mark",
    "case",
    "preconj",
    "quantmod",
    "nn",
    "conj",
    "dep",
    "meta",
    "prt",
}
NOMINAL_TAGS = {"NN", "NNS", "NNP", "NNPS", "PRP", "EX", "CD", "DT", "PDT", "WP", "WDT", "FW", "$", "PRP$", "WP$"}
VERBAL_TAGS = {"VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "MD"}
AUX_RELATIONS = {"aux", "auxpass"}
NP_POST_MODIFIERS = {"prep", "relcl", "acl", "appos", "advcl"}

Node = tuple  # (label, [children]); a child is a Node or an int (token index -> preterminal)


def category(tok: Mapping[str, Any]) -> str:
    """Phrase label a head projects, from its Penn tag."""
    tag = tok["tag"]
    if tag in VERBAL_TAGS:
        return "VP"
    if tag in ("WP", "WDT"):
        return "WHNP"
    if tag in NOMINAL_TAGS or tag.startswith("NN"):
        return "NP"
    if tag.startswith("JJ"):
        return "ADJP"
    if tag == "WRB":
        return "WHADVP"
    if tag.startswith("RB"):
        return "ADVP"
    if tag in ("IN", "TO"):
        return "PP"
    if tag == "RP":
        return "PRT"
    if tag == "UH":
        return "INTJ"
    return "X"


class _Converter:
    def __init__(self, tokens: Sequence[Mapping[str, Any]], start: int, end: int):
        self.tokens = tokens
        self.deps: dict[int, list[int]] = {i: [] for i in range(start, end)}
        self.root = start
        for i in range(start, end):
            head = tokens[i]["head"]
            if head == i or not start <= head < end:
                self.root = i
            else:
                self.deps[head].append(i)

    def child(self, i: int, parent: str) -> Node | int:
        tok = self.tokens[i]
        kind = category(tok)
        if not self.deps[i]:
            # Auxiliaries are bare (VP (MD would) (RB n't) (VB say)); a coordinated verb
            # still heads its own VP.
            if tok["dep"] in AUX_RELATIONS or (tok["dep"] in BARE_RELATIONS and kind != "VP") or kind == "X":
                return i
            if tok["dep"] == "advmod" and parent in ("NP", "ADJP", "ADVP", "WHADVP", "QP"):
                return i
        return self.phrase(i)

    def phrase(self, h: int) -> Node:
        kind = category(self.tokens[h])
        if kind == "VP":
            return self.clause(h)
        deps = self.deps[h]
        if kind in ("NP", "WHNP"):
            post = [d for d in deps if d > h and self.tokens[d]["dep"] in NP_POST_MODIFIERS]
            if post:  # (NP (NP the film) (PP about ...)), as the Treebank attaches post-modifiers
                first = min(post)
                base = [d for d in deps if d < first]
                inner = (
                    kind,
                    [self.child(d, kind) for d in base if d < h] + [h] + [self.child(d, kind) for d in base if d > h],
                )
                return (kind, [inner] + [self.child(d, kind) for d in deps if d >= first])
        return (kind, [self.child(d, kind) for d in deps if d < h] + [h] + [self.child(d, kind) for d in deps if d > h])

    def clause(self, h: int) -> Node:
        """A verb's clause: S -> (pre-subject) NP VP (final punct); SQ when an auxiliary
        precedes the subject; SINV when the subject follows the verb; SBAR with a mark."""
        deps = self.deps[h]
        marks = [d for d in deps if self.tokens[d]["dep"] == "mark" and d < h and d == deps[0]]
        deps = [d for d in deps if d not in marks]
        subjects = [d for d in deps if self.tokens[d]["dep"] in SUBJECTS]
        trailing: list[int] = []
        for d in reversed(deps):
            if d > h and self.tokens[d]["dep"] == "punct":
                trailing.insert(0, d)
            else:
                break
        rest = [d for d in deps if d not in trailing]
        if not subjects:
            vp = (
                "VP",
                [self.child(d, "VP") for d in rest if d < h] + [h] + [self.child(d, "VP") for d in rest if d > h],
            )
            core = vp if not trailing and self.tokens[h]["dep"] != "ROOT" else ("S", [vp] + trailing)
        elif subjects[0] > h:
            core = (
                "SINV",
                [self.child(d, "S") for d in rest if d < h]
                + [h]
                + [self.child(d, "S") for d in rest if d > h]
                + trailing,
            )
        else:
            s = subjects[0]
            before = [d for d in rest if d < s]
            label = "SQ" if any(self.tokens[d]["dep"] in AUX_RELATIONS for d in before) else "S"
            vp_deps = [d for d in rest if d > s]
            vp = (
                "VP",
                [self.child(d, "VP") for d in vp_deps if d < h] + [h] + [self.child(d, "VP") for d in vp_deps if d > h],
            )
            # A subject is a phrase even when it is one word: (NP (PRP it)).
            core = (label, [self.child(d, label) for d in before] + [self.phrase(s), vp] + trailing)
        if marks:
            return ("SBAR", marks + [core])
        if self.tokens[h]["dep"] in ("relcl",):
            return ("SBAR", [core])
        return core

    def sentence(self) -> Node:
        r = self.root
        if category(self.tokens[r]) == "VP":
            node = self.clause(r)
            return node if node[0] != "VP" else ("S", [node])
        # A verbless sentence: punctuation, coordinators and interjections of the root sit
        # on FRAG (FRAG -> CC NP . for "Or both."), the rest forms the root's phrase.
        edge = ("punct", "cc", "intj", "discourse")
        deps = self.deps[r]
        top: list[int] = []
        for d in deps:  # leading edge dependents
            if d < r and self.tokens[d]["dep"] in edge:
                top.append(d)
            else:
                break
        for d in reversed(deps):  # trailing ones
            if d > r and self.tokens[d]["dep"] in edge and d not in top:
                top.append(d)
            else:
                break
        inner_deps = [d for d in deps if d not in top]
        saved = self.deps[r]
        self.deps[r] = inner_deps
        core = self.child(r, "FRAG") if inner_deps else self.phrase(r)
        self.deps[r] = saved
        return ("FRAG", sorted([*top, core], key=_first_leaf))


def _first_leaf(node: Node | int) -> int:
    while not isinstance(node, int):
        node = node[1][0]
    return node


def _leaves(node: Node | int) -> list[int]:
    if isinstance(node, int):
        return [node]
    return [i for child in node[1] for i in _leaves(child)]


def escape_word(word: str) -> str:
    word = word.replace("(", "-LRB-").replace(")", "-RRB-").strip()
    return word or "_"


def _to_ptb(node: Node | int, tokens: Sequence[Mapping[str, Any]]) -> str:
    if isinstance(node, int):
        tag = tokens[node]["tag"] or "XX"
        return f"({escape_word(tag)} {escape_word(tokens[node]['t'])})"
    return f"({node[0]} " + " ".join(_to_ptb(c, tokens) for c in node[1]) + ")"


def dep_to_const(tokens: Sequence[Mapping[str, Any]], sentences: Sequence[tuple[int, int]] | None = None) -> str:
    """A PTB bracketed tree over every token, in order, from a dependency parse.

    ``tokens`` carry ``t``, ``tag``, ``dep`` and ``head`` (document-level index; a root is
    its own head); ``sentences`` are (start, end) spans (default: one sentence). Several
    sentences are joined under ROOT (not counted in a grammar). A non-projective parse, whose phrases would not be
    contiguous, falls back to a flat FRAG over the preterminals so leaves stay in order.
    """
    if not tokens:
        raise InputError("cannot parse an empty sentence")
    trees = []
    for start, end in sentences or [(0, len(tokens))]:
        node = _Converter(tokens, start, end).sentence()
        if _leaves(node) != list(range(start, end)):
            node = ("FRAG", list(range(start, end)))
        trees.append(node)
    top = trees[0] if len(trees) == 1 else ("ROOT", trees)
    return _to_ptb(top, tokens)


def token_dicts(doc) -> list[dict[str, Any]]:
    return [
        {
            "t": t.text,
            "ws": t.whitespace_,
            "tag": t.tag_,
            "pos": t.pos_,
            "lemma": t.lemma_,
            "dep": t.dep_,
            "head": t.head.i,
        }
        for t in doc
    ]


def load_benepar(nlp) -> bool:
    """Add benepar to ``nlp`` when the package and its model are installed."""
    try:
        import benepar  # noqa: F401

        nlp.add_pipe("benepar", config={"model": "benepar_en3"})
        return True
    except Exception:  # not installed, or the model is missing (LookupError offline)
        return False


def benepar_tree(doc) -> str:
    trees = [sent._.parse_string for sent in doc.sents]
    return trees[0] if len(trees) == 1 else "(ROOT " + " ".join(trees) + ")"


class ParserActor:
    """Callable class for ``Dataset.map_batches``: a ``text`` column in; ``tokens`` (JSON),
    ``tree`` (PTB brackets) and ``parser`` out, with the ``keep`` columns. Given a
    ``search`` (S²LCT's capability rules) it also runs the rules on each sentence of role
    ``search`` (with its ``label``) and adds ``matches``: JSON ``{capability id: [rule names]}``."""

    def __init__(
        self,
        pipeline: str = "builtin:sm",
        parser: str = "auto",
        *,
        batch_size: int = 128,
        keep: tuple[str, ...] = (),
        search: CorpusSearch | None = None,
    ):
        import spacy

        from checkray.actors.spacy_nlp import resolve_pipeline

        # A pipeline of its own (not the per-process cache): benepar may be added to it.
        self.nlp = spacy.load(resolve_pipeline(pipeline), disable=["ner"])
        self.parser = BENEPAR if parser in ("auto", BENEPAR) and load_benepar(self.nlp) else DEP2CONST
        if parser == BENEPAR and self.parser != BENEPAR:
            raise InputError("parser 'benepar' was requested but benepar or its model benepar_en3 is not installed")
        self.batch_size = batch_size
        self.keep = keep
        self.search = search

    def parse(self, texts: list[str]) -> tuple[list[list[dict]], list[str]]:
        tokens_out, trees = [], []
        for doc in self.nlp.pipe(texts, batch_size=self.batch_size):
            toks = token_dicts(doc)
            tokens_out.append(toks)
            if not toks:
                trees.append("(FRAG)")
            elif self.parser == BENEPAR:
                trees.append(benepar_tree(doc))
            else:
                trees.append(dep_to_const(toks, [(s.start, s.end) for s in doc.sents]))
        return tokens_out, trees

    def __call__(self, batch: pa.Table) -> pa.Table:
        tokens, trees = self.parse([str(t) for t in batch.column("text").to_pylist()])
        cols = {name: batch.column(name) for name in self.keep}
        cols["tokens"] = pa.array([json.dumps(t, ensure_ascii=False) for t in tokens], pa.string())
        cols["tree"] = pa.array(trees, pa.string())
        cols["parser"] = pa.array([self.parser] * len(trees), pa.string())
        if self.search is not None and self.search.specs:
            # rows with a ``role`` other than "search" (reference texts) are not searched
            labels = batch.column("label").to_pylist()
            roles = batch.column("role").to_pylist() if "role" in batch.column_names else ["search"] * len(labels)
            cols["matches"] = pa.array(
                [
                    json.dumps(self.search.matches(t, lab)) if role == "search" else "{}"
                    for t, lab, role in zip(tokens, labels, roles)
                ],
                pa.string(),
            )
        return pa.table(cols)
