"""Config values YAML and pydantic would let through: a key given twice, a boolean where a
number is expected (``n_clusters: yes`` is 1 to pydantic), infinity and NaN. Checked for
every field of every section, not field by field."""

import math
import types
from typing import Annotated, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from checkray.engine.config import Section, read_yaml
from checkray.engine.errors import ConfigError
from checkray.jobs.config import CheckrayConfig, load_config
from checkray.jobs.registry import SECTIONS


def _options(annotation):
    origin = get_origin(annotation)
    if origin is Annotated:
        return _options(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [t for a in get_args(annotation) for t in _options(a)]
    return [annotation]


def _sections():
    """Every section class reachable from the config file: top level, job sections, nested."""
    seen, todo = {}, [CheckrayConfig] + [SECTIONS.get(name) for name in SECTIONS.names()]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen[cls] = None
        for field in cls.model_fields.values():
            todo += [t for t in _options(field.annotation) if isinstance(t, type) and issubclass(t, BaseModel)]
    return list(seen)


def _fields(kind):
    out = []
    for cls in _sections():
        for name, field in cls.model_fields.items():
            opts = _options(field.annotation)
            if kind in opts and bool not in opts:
                out.append(pytest.param(cls, name, id=f"{cls.__name__}.{name}"))
    return out


def test_every_section_is_a_section():
    # the checks below live on Section; a plain BaseModel in the config tree would skip them
    assert all(issubclass(cls, Section) for cls in _sections())
    assert len(_fields(int)) > 30 and len(_fields(float)) > 10


@pytest.mark.parametrize("cls, name", _fields(int) + _fields(float))
def test_a_boolean_is_not_a_number(cls, name):
    with pytest.raises(ValidationError, match="got the boolean true"):
        cls.model_validate({name: True})


@pytest.mark.parametrize("cls, name", _fields(float))
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "inf", "NaN"])
def test_infinity_and_nan_are_refused(cls, name, value):
    with pytest.raises(ValidationError, match="finite number"):
        cls.model_validate({name: value})


def test_booleans_in_number_lists_and_bool_fields(tmp_path):
    from pydantic import create_model

    model = create_model("M", __base__=Section, sizes=(list[int], [1]), weights=(dict[str, float], {}), on=(bool, 1))
    assert model.model_validate({"sizes": [1, 2], "weights": {"a": 0.5}, "on": False}).on is False
    with pytest.raises(ValidationError, match="item 1: expected an integer"):
        model.model_validate({"sizes": [1, True]})
    with pytest.raises(ValidationError, match="'a': expected a number"):
        model.model_validate({"weights": {"a": False}})
    with pytest.raises(ValidationError, match="finite number"):
        model.model_validate({"weights": {"a": math.inf}})


def _load(tmp_path, text):
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "c.yaml")
    assert "\n" not in str(err.value)
    return str(err.value)


def test_config_file_errors_are_one_line(tmp_path):
    msg = _load(tmp_path, "topics:\n  clusterer:\n    n_clusters: yes\n")
    assert msg.endswith(
        "topics.clusterer.n_clusters: expected an integer, got the boolean true (YAML reads yes/no/on/off as booleans)"
    )
    msg = _load(tmp_path, "llm:\n  timeout_s: .inf\n")
    assert msg.endswith("llm.timeout_s: Input should be a finite number")
    assert "runtime.gpu_wait_s" in _load(tmp_path, "runtime:\n  gpu_wait_s: .inf\n")
    assert "corpus.sample" in _load(tmp_path, "corpus:\n  sample: on\n")


def test_duplicate_yaml_keys(tmp_path):
    msg = _load(tmp_path, "seed: 1\ntopics:\n  clusterer:\n    n_clusters: 5\n    backend: cpu\n    n_clusters: 8\n")
    assert msg.endswith("bad YAML at line 6: duplicate key 'n_clusters' (first at line 4)")
    assert "duplicate key 'topics'" in _load(tmp_path, "topics: {}\nseed: 2\ntopics: {}\n")
    # a merge key may be overridden: that is what merges are for
    (tmp_path / "m.yaml").write_text("a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  x: 3\n")
    assert read_yaml(tmp_path / "m.yaml")["b"] == {"x": 3, "y": 2}
    # same key in different mappings is fine
    (tmp_path / "s.yaml").write_text("a: {x: 1}\nb: {x: 2}\n")
    assert read_yaml(tmp_path / "s.yaml") == {"a": {"x": 1}, "b": {"x": 2}}
