"""Every file a user hands checkray is read strictly, not only the config: model
registries, template specs and CheckList mappings refuse duplicate keys, booleans for
numbers and infinities with one-line errors."""

from __future__ import annotations

import pytest

from checkray.engine.errors import CheckrayError


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    "body, expected",
    [
        ("models:\n  - {name: m, family: vader, max_cases: yes}\n", "boolean"),
        ("models:\n  - {name: m, family: vader, accuracy: .inf}\n", "finite"),
        ("models:\n  - name: m\n    family: vader\n    family: sklearn\n", "duplicate key 'family'"),
    ],
)
def test_model_registry_is_strict(tmp_path, body, expected):
    from checkray.engine.benchmark.registry import read_registry

    path = tmp_path / "zoo.yaml"
    path.write_text(body)
    with pytest.raises(CheckrayError) as err:
        read_registry(path)
    assert expected in _one_line(err)


def test_template_spec_refuses_duplicate_keys_and_bools(tmp_path):
    from checkray.engine.templates.expand import read_spec

    dup = tmp_path / "dup.yaml"
    dup.write_text("- template: 'a {x}'\n  template: 'b {x}'\n  label: 1\n")
    with pytest.raises(CheckrayError) as err:
        read_spec(dup)
    assert "duplicate key 'template'" in _one_line(err)


def test_checklist_mapping_refuses_duplicate_keys_and_inf(tmp_path):
    from checkray.engine.benchmark.checklist.mapping import load_mapping

    dup = tmp_path / "m.yaml"
    dup.write_text("tests:\n  'a*': {type: INV}\n  'a*': {type: MFT}\n")
    with pytest.raises(CheckrayError) as err:
        load_mapping(dup)
    assert "duplicate key" in _one_line(err)
    inf = tmp_path / "inf.yaml"
    inf.write_text("tests:\n  'a*': {type: INV, tolerance: .inf}\n")
    with pytest.raises(CheckrayError) as err:
        load_mapping(inf)
    assert "finite" in _one_line(err)
