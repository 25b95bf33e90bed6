"""The ONNX Runtime path of the transformer encoders (engine/inference.py,
actors/onnx_export.py, actors/onnx_models.py): same vectors and logits as PyTorch within
float error, int8 close but never served for fp32, exports cached and reused."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from checkray.actors.onnx_models import UnsupportedPipeline, describe_pipeline, pool
from checkray.engine.errors import InputError
from checkray.engine.inference import ENCODER_ENV, inference_identity, resolve_encoder
from tests.fakes.tiny_hf import build_tiny_bert

TEXTS = [
    "a gripping , beautifully acted film .",
    "the plot is thin and the jokes fall flat .",
    "it is not bad at all",
    "one of the year's best",
    "dull",
    "an uneven but often very funny comedy that overstays its welcome by twenty minutes",
]


def test_auto_is_torch_on_gpu_bf16_on_native_bf16_cpus_else_onnx(monkeypatch):
    monkeypatch.delenv(ENCODER_ENV, raising=False)
    assert resolve_encoder(gpu=False, bf16=False) == "onnx"
    assert resolve_encoder(gpu=False, bf16=True) == "torch-bf16"
    assert resolve_encoder(gpu=True, bf16=True) == "torch"
    assert resolve_encoder("onnx-int8", gpu=True) == "onnx-int8"  # an explicit choice stands
    assert resolve_encoder("onnx", gpu=False, bf16=True) == "onnx"
    with pytest.raises(InputError, match="encoder 'fp16': unknown"):
        resolve_encoder("fp16", gpu=False)


def test_native_bf16_reads_the_cpu_flags_and_a_cluster_of_several_nodes_is_not_vouched_for(monkeypatch):
    import ray

    from checkray.engine import inference

    monkeypatch.setattr(inference, "cpu_native_bf16", lambda: False)
    assert inference.native_bf16() is False
    monkeypatch.setattr(inference, "cpu_native_bf16", lambda: True)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    assert inference.native_bf16() is True  # no Ray: this machine runs the encoders
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    node = {"Alive": True, "NodeManagerAddress": "10.0.0.1"}
    monkeypatch.setattr(ray, "nodes", lambda: [node, {**node, "NodeManagerAddress": "10.0.0.2"}])
    assert inference.native_bf16() is False  # workers elsewhere: their CPUs are unknown here
    monkeypatch.setattr(ray, "nodes", lambda: [node])
    monkeypatch.setattr("ray.util.get_node_ip_address", lambda: "10.0.0.9")
    assert inference.native_bf16() is False  # one node, but not this machine (a laptop driver)
    monkeypatch.setattr("ray.util.get_node_ip_address", lambda: "10.0.0.1")
    assert inference.native_bf16() is True


def test_native_bf16_flags_are_amx_only():
    from checkray.engine.inference import flags_native_bf16

    assert flags_native_bf16(["fpu", "avx512f", "amx_tile", "amx_bf16"])  # Sapphire Rapids
    assert not flags_native_bf16(["fpu", "avx512f", "avx512_bf16"])  # Zen 4: slow inside the demo
    assert not flags_native_bf16(["fpu", "avx2", "avx512f", "avx512_vnni", "avx_vnni"])  # no bf16 products
    assert not flags_native_bf16([])


def test_cache_keys_name_backend_and_precision(monkeypatch):
    from checkray.actors.benchmark.cached import prediction_identity
    from checkray.actors.embed_cache import embedding_identity
    from checkray.engine.benchmark.registry import ModelSpec

    keys = {}
    for setting in ("torch", "torch-bf16", "onnx", "onnx-int8"):
        monkeypatch.setenv(ENCODER_ENV, setting)
        keys[setting] = (
            embedding_identity("builtin:minilm", encoder="sentence-transformers"),
            prediction_identity(ModelSpec(name="m", family="st_head", path="head.joblib", labels=["a", "b"])),
            prediction_identity(ModelSpec(name="m", family="vader", labels=["a", "b"])),
        )
    assert inference_identity("onnx-int8")["precision"] == "int8"
    assert inference_identity("torch-bf16") == {"backend": "torch", "precision": "bf16"}
    assert len({repr(k[0]) for k in keys.values()}) == 4  # an int8 or bf16 vector is never found for fp32
    assert len({repr(k[1]) for k in keys.values()}) == 4  # nor an encoder head's predictions
    assert len({repr(k[2]) for k in keys.values()}) == 1  # a lexicon model runs no encoder


def test_pooling_matches_sentence_transformers():
    import torch

    try:
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:  # sentence-transformers < 5.4
        from sentence_transformers.models import Pooling
    rng = np.random.default_rng(0)
    states = rng.normal(size=(3, 5, 4)).astype(np.float32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    for mode in ("mean", "cls", "max"):
        features = {"token_embeddings": torch.tensor(states), "attention_mask": torch.tensor(mask)}
        want = Pooling(4, pooling_mode=mode)(features)["sentence_embedding"].numpy()
        np.testing.assert_allclose(pool(states, mask, [mode]), want, rtol=1e-5, atol=1e-6)
    both = pool(states, mask, ["cls", "mean"])
    np.testing.assert_allclose(both[:, :4], states[:, 0])


def test_a_pipeline_with_other_modules_stays_on_torch():
    class Transformer: ...

    class Dense: ...

    with pytest.raises(UnsupportedPipeline, match="Transformer > Dense"):
        describe_pipeline([Transformer(), Dense()])


@pytest.mark.slow
def test_minilm_onnx_matches_torch_and_int8_is_close(monkeypatch):
    from checkray.actors.embedder import load_sentence_transformer

    torch_model = load_sentence_transformer("builtin:minilm", device="cpu", backend="torch")
    fp32 = load_sentence_transformer("builtin:minilm", device="cpu", backend="onnx")
    int8 = load_sentence_transformer("builtin:minilm", device="cpu", backend="onnx-int8")
    assert type(fp32).__name__ == "OnnxSentenceEncoder" and fp32.get_embedding_dimension() == 384
    want = torch_model.encode(TEXTS, batch_size=4, normalize_embeddings=True)
    got = fp32.encode(TEXTS, batch_size=4, normalize_embeddings=True)
    np.testing.assert_allclose(got, want, atol=1e-5)
    cosine = (int8.encode(TEXTS, batch_size=4) * want).sum(1)
    assert cosine.min() > 0.95 and cosine.mean() > 0.98
    assert fp32.encode("dull").shape == (384,)  # one string in, one vector out, as encode does


@pytest.mark.slow
def test_minilm_bf16_autocast_is_within_its_stated_tolerance_of_fp32():
    """torch-bf16 (docs/performance.md): cosine to fp32 >= 0.999 on every sentence, float32
    out, and the module left as it was (the class, no autocast outside ``encode``)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from checkray.actors.embedder import load_sentence_transformer

    want = load_sentence_transformer("builtin:minilm", device="cpu", backend="torch").encode(
        TEXTS, batch_size=4, normalize_embeddings=True
    )
    bf16 = load_sentence_transformer("builtin:minilm", device="cpu", backend="torch-bf16")
    assert isinstance(bf16, SentenceTransformer)
    got = bf16.encode(TEXTS, batch_size=4, normalize_embeddings=True)
    assert got.dtype == np.float32 and not torch.is_autocast_cpu_enabled()
    assert (got * want).sum(1).min() > 0.999
    assert bf16.encode(TEXTS[:2], convert_to_tensor=True).dtype == torch.float32


@pytest.mark.slow
def test_export_is_cached_and_reused(tmp_path, monkeypatch):
    from checkray.actors.onnx_export import ROOT_ENV
    from checkray.actors.onnx_models import onnx_sentence_encoder

    monkeypatch.setenv(ROOT_ENV, str(tmp_path))
    from checkray.actors.embedder import _load_torch

    built = []

    def build():
        built.append(1)
        return _load_torch("builtin:minilm", "cpu", None)

    first = onnx_sentence_encoder({"model": "minilm-test"}, build)
    second = onnx_sentence_encoder({"model": "minilm-test"}, lambda: pytest.fail("exported twice"))
    assert built == [1]
    np.testing.assert_array_equal(first.encode(TEXTS[:2]), second.encode(TEXTS[:2]))
    files = sorted(p.name for p in next(tmp_path.iterdir()).iterdir())
    assert [f for f in files if not f.startswith("pipeline-")] == ["inputs.json", "model.onnx", "tokenizer"]
    assert len(files) == 4  # no temporary leftovers
    # a second use of the same weights (another pooling) reuses the graph, not a new export
    other = onnx_sentence_encoder({"model": "minilm-test", "poolings": ["cls"]}, build)
    assert built == [1, 1] and len(list(tmp_path.iterdir())) == 1
    assert other.encode(TEXTS[:1]).shape == (1, 384)


@pytest.mark.slow
def test_hf_classifier_logits_match_torch(tmp_path, monkeypatch):
    from checkray.actors.models.hf_model import load_hf
    from checkray.engine.benchmark.registry import ModelSpec

    path = build_tiny_bert(tmp_path / "bert", TEXTS, id2label={0: "negative", 1: "positive"}, initializer_range=0.5)
    spec = ModelSpec(name="tiny", family="hf", path=str(path), labels=["negative", "positive"])
    monkeypatch.setenv(ENCODER_ENV, "torch")
    reference = load_hf(spec)
    assert reference.onnx is None
    monkeypatch.setenv(ENCODER_ENV, "onnx")
    onnx = load_hf(spec)
    assert onnx.onnx is not None
    pairs = [None, "a second text", None, "dull", None, "x"]
    np.testing.assert_allclose(onnx.predict_proba(TEXTS, pairs), reference.predict_proba(TEXTS, pairs), atol=1e-5)
    monkeypatch.setenv(ENCODER_ENV, "torch-bf16")
    bf16 = load_hf(spec)
    assert bf16.onnx is None and bf16.backend == "torch-bf16"
    np.testing.assert_allclose(bf16.predict_proba(TEXTS, pairs), reference.predict_proba(TEXTS, pairs), atol=0.02)


def test_warmup_reports_each_step_and_a_failed_step_does_not_fail_setup(monkeypatch, capsys):
    from checkray.jobs import warmup

    def broken():
        raise OSError("disk full")

    monkeypatch.setattr(warmup, "STEPS", [("fine", lambda: None), ("broken", broken), ("moot", lambda: "not needed")])
    assert warmup.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("warm-up: fine: ") and out[0].endswith(" s")
    assert out[1] == "warm-up: broken: skipped (OSError: disk full)"
    assert out[2] == "warm-up: moot: not needed"
    monkeypatch.setattr(warmup, "BYTECODE", ("bytecode", lambda: "only this"))
    assert warmup.main(["--bytecode"]) == 0  # the install step's: the bytecode alone
    assert capsys.readouterr().out.splitlines() == ["warm-up: bytecode: only this"]
    monkeypatch.setattr(warmup, "STEPS", [warmup.BYTECODE, ("fine", lambda: "done")])
    assert warmup.main(["--no-bytecode"]) == 0  # make's warm-up, after the install step compiled
    assert capsys.readouterr().out.splitlines() == ["warm-up: fine: done"]
    assert warmup.main(["--fast"]) == 2


def test_warmup_converts_the_fluency_lm_once(tmp_path, monkeypatch):
    """The fluency checks' packaged GGUF is dequantized at set-up, not by the first job."""
    from checkray.actors.llm import local_transformers, packaged
    from checkray.jobs import warmup

    gguf = tmp_path / "lm.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(packaged, "resolve_llm", lambda name: str(gguf))
    converted = []

    def convert(path):
        converted.append(path)
        (tmp_path / "lm-hf").mkdir()
        (tmp_path / "lm-hf" / "config.json").write_text("{}")
        return tmp_path / "lm-hf"

    monkeypatch.setattr(local_transformers, "convert_gguf", convert)
    assert warmup.warm_fluency_lm() is None and converted == [gguf]
    assert warmup.warm_fluency_lm() == "already converted" and converted == [gguf]
    assert any(step is warmup.warm_fluency_lm for _, step in warmup.STEPS)


def test_bytecode_is_written_where_the_environment_forbids_writing_it(tmp_path, monkeypatch):
    # PYTHONDONTWRITEBYTECODE stops imports from writing .pyc files, not compileall
    import sysconfig

    from checkray.jobs import warmup

    package = tmp_path / "site" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("VALUE = 1\n")
    (package / "newer.py").write_text("def f[T](a): return a\n")  # another Python's syntax
    monkeypatch.setattr(
        sysconfig, "get_paths", lambda: {"purelib": str(tmp_path / "site"), "platlib": str(tmp_path / "site")}
    )
    monkeypatch.setattr(warmup, "OWN_LAYERS", ())
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert warmup.compile_bytecode() is None
    assert [p.name.split(".")[0] for p in (package / "__pycache__").glob("*.pyc")] == ["mod"]


def test_warmup_exports_only_where_the_encoders_run_on_onnx(monkeypatch):
    from checkray.engine import inference
    from checkray.jobs import warmup

    monkeypatch.delenv(ENCODER_ENV, raising=False)
    monkeypatch.setattr(inference, "native_bf16", lambda: True)
    assert warmup.warm_encoder("builtin:minilm")() == "not needed: the encoders run on torch-bf16 on this CPU"


def test_an_unknown_encoder_flag_is_one_line(monkeypatch):
    from typer.testing import CliRunner

    from checkray.jobs.cli import app

    monkeypatch.delenv(ENCODER_ENV, raising=False)
    result = CliRunner().invoke(app, ["--encoder", "fp16", "cache", "--help"])
    assert result.exit_code != 0
    assert "encoder 'fp16': unknown (have: auto, torch, torch-bf16, onnx, onnx-int8)" in str(
        result.exception or result.output
    )


def test_two_classifiers_named_by_one_path_never_share_a_graph(tmp_path, monkeypatch):
    """A model handed over in memory (the zoo's fine-tune names its place relative to the
    zoo directory, not a file here) is keyed by its weights: a second model under the same
    name gets its own graph, not the first one's logits."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from checkray.actors.models.hf_model import HFSequenceClassifier
    from checkray.actors.onnx_export import ROOT_ENV
    from checkray.engine.benchmark.registry import ModelSpec

    monkeypatch.setenv(ROOT_ENV, str(tmp_path / "onnx"))
    spec = ModelSpec(name="ft", family="hf", path="stages/model-ft/model", labels=["negative", "positive"])
    probs = {}
    for seed in (0, 1):
        path = build_tiny_bert(tmp_path / f"bert{seed}", TEXTS, seed=seed, initializer_range=0.5)
        model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        monkeypatch.setenv(ENCODER_ENV, "torch")
        reference = HFSequenceClassifier(spec, model, tokenizer).predict_proba(TEXTS)
        monkeypatch.setenv(ENCODER_ENV, "onnx")
        onnx = HFSequenceClassifier(spec, model, tokenizer)
        assert onnx.onnx is not None
        probs[seed] = onnx.predict_proba(TEXTS)
        np.testing.assert_allclose(probs[seed], reference, atol=1e-5)
    assert not np.allclose(probs[0], probs[1], atol=1e-3)
    assert len(list((tmp_path / "onnx").iterdir())) == 2


def test_warmup_counts_costellos_reference_ngrams_once(monkeypatch, tmp_path):
    from checkray.engine.costello import context
    from checkray.jobs import warmup

    target = tmp_path / "reference-ngrams.npz"
    built = []
    monkeypatch.setattr(context, "cache_file", lambda: target)
    monkeypatch.setattr(context, "reference_model", lambda: built.append(target.write_bytes(b"x")))
    assert warmup.warm_reference_ngrams() is None and built
    assert warmup.warm_reference_ngrams() == "already counted" and len(built) == 1
