"""testaug reads a spec's integer labels through testaug.label_map or the corpus label map
(--labels); a label neither covers stops with one line showing the flag."""

import json

import pytest

from checkray.engine.errors import InputError
from checkray.engine.testaug.config import TestAugConfig as AugSection
from checkray.jobs.config import load_config
from checkray.jobs.testaug.job import load_descriptions, spec_labels

POOL = {"adj": ["good", "great"], "noun": ["flight", "seat"]}


def _spec(tmp_path, labels):
    path = tmp_path / "spec.jsonl"
    lines = [
        {
            "capability": "Vocabulary",
            "description": f"desc {label}",
            "template": "The {noun} was {adj}.",
            "label": label,
            "pool": POOL,
        }
        for label in labels
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def _conf(spec, **over):
    cfg = load_config(None, {"testaug.spec": spec, **over})
    return cfg, cfg.section(AugSection)


def test_corpus_labels_name_the_spec_labels(tmp_path):
    cfg, t = _conf(_spec(tmp_path, [0, 1, 2]), **{"corpus.labels": {"0": "negative", "1": "neutral", "2": "positive"}})
    descs = load_descriptions(spec_labels(t, cfg.corpus.labels), seed=0)
    assert [d.label for d in descs] == ["negative", "neutral", "positive"]


def test_testaug_label_map_wins_over_corpus_labels(tmp_path):
    cfg, t = _conf(
        _spec(tmp_path, [0, 1]),
        **{"corpus.labels": {"0": "x", "1": "y"}, "testaug.label_map": {"0": "negative", "1": "positive"}},
    )
    assert [d.label for d in load_descriptions(spec_labels(t, cfg.corpus.labels), seed=0)] == ["negative", "positive"]


def test_an_unmapped_label_stops_with_the_flag(tmp_path):
    cfg, t = _conf(_spec(tmp_path, [0, 1, 2]), **{"corpus.labels": {"0": "negative", "1": "positive"}})
    with pytest.raises(InputError) as err:
        load_descriptions(spec_labels(t, cfg.corpus.labels), seed=0)
    message = str(err.value)
    assert "\n" not in message and "spec.jsonl:3: label 2 is not in the label map" in message
    assert "--labels 0=negative,1=positive,2=..." in message


def test_numeric_labels_without_a_map_use_the_default_and_warn(tmp_path, capsys):
    cfg, t = _conf(_spec(tmp_path, [0, 1]))
    descs = load_descriptions(spec_labels(t, cfg.corpus.labels), seed=0)
    assert [d.label for d in descs] == ["negative", "positive"]
    assert "--labels" in capsys.readouterr().err
