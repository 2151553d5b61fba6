"""The engine behind a model's forward: ONNX Runtime and OpenVINO give PyTorch's answers (float32 to 1e-4, int8
within a cosine bound) in every pipeline and in the service; their graphs are cached and rebuilt when the
weights, the options or the versions change; the int8 rule by CPU; a missing package is one line and exit 2."""

from __future__ import annotations

import dataclasses
import itertools
import sys

import numpy as np
import pytest

pytest.importorskip("onnx", reason="the export extra (onnx) is not installed")
pytest.importorskip("onnxruntime", reason="the export extra (onnxruntime) is not installed")

from bertkit import backends, inference
from bertkit.backends import Choice, backend_of, choose_backend
from bertkit.backends import cache as backend_cache
from bertkit.backends import choice as backend_choice
from bertkit.cli import main
from bertkit.cpu_features import CpuFeatures, apply_caps, parse_cpuinfo
from bertkit.errors import BertkitError, ConfigError
from bertkit.models.bert import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from bertkit.quantize import is_quantized
from inference_helpers import save_model

ENGINES = [
    "onnxruntime",
    pytest.param(
        "openvino",
        marks=pytest.mark.skipif(not backends.openvino_installed("int8"), reason="openvino or nncf not installed"),
    ),
]
"""The engines that run an exported graph; OpenVINO's tests skip where its extra is not installed."""
AVX2 = CpuFeatures(model="AMD EPYC", arch="x86_64", avx2=True)
VNNI = CpuFeatures(model="Intel Xeon", arch="x86_64", avx2=True, avx512=True, avx512_vnni=True)
TEXTS = ["the cat sat on the mat .", "hello", "george washington lived in mount vernon , virginia ."]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERTKIT_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tokenizer, encoder_dir):
    root = tmp_path_factory.mktemp("models")
    return {
        "encoder": encoder_dir,
        "classifier": save_model(
            root / "cls", BertForSequenceClassification, tokenizer, id2label={0: "negative", 1: "positive"}
        ),
        "tagger": save_model(
            root / "ner", BertForTokenClassification, tokenizer, id2label={0: "O", 1: "B-PER", 2: "I-PER"}
        ),
        "qa": save_model(root / "qa", BertForQuestionAnswering, tokenizer),
    }


def assert_close(a, b, tol=1e-4):
    """Two pipeline results equal: the same strings and structure, numbers within ``tol``."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        a, b = dataclasses.asdict(a), dataclasses.asdict(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_close(a[key], b[key], tol)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_close(x, y, tol)
    elif isinstance(a, float):
        assert a == pytest.approx(b, abs=tol)
    else:
        assert a == b


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# ------------------------------------------------------------------------------------------ same answers
@pytest.mark.parametrize("engine", ENGINES)
def test_embed_float32_and_int8_match_torch(dirs, engine):
    torch_vectors = inference.embed(TEXTS, inference.load(dirs["encoder"], backend="torch"))
    graph = inference.load(dirs["encoder"], backend=engine)
    assert backend_of(graph.model) == (engine, None)
    np.testing.assert_allclose(inference.embed(TEXTS, graph), torch_vectors, atol=1e-4)
    int8 = inference.load(dirs["encoder"], backend=engine, quantize="int8")
    assert backend_of(int8.model) == (engine, "int8") and not is_quantized(int8.model)
    assert cosines(inference.embed(TEXTS, int8), torch_vectors).min() > 0.98


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("quantize", [None, "int8"])
def test_classify_tag_answer_match_torch(dirs, engine, quantize):
    """float32: the same labels, tags and spans, scores to 1e-4. int8: the same labels, tags and best span
    as PyTorch's float32 on these tiny models, scores within 0.05."""
    for name, run in (
        ("classifier", lambda m: inference.classify(TEXTS, m)),
        ("tagger", lambda m: inference.tag(TEXTS, m)),
        ("qa", lambda m: inference.answer(["who lived there ?"], [TEXTS[2]], m, top_k=1)),
    ):
        expected = run(inference.load(dirs[name], backend="torch"))
        assert_close(
            run(inference.load(dirs[name], backend=engine, quantize=quantize)), expected, 5e-2 if quantize else 1e-4
        )


def test_requests_the_graph_lacks_run_on_the_torch_weights(dirs):
    ort = inference.load(dirs["encoder"], backend="onnxruntime")
    torch_model = inference.load(dirs["encoder"], backend="torch")
    np.testing.assert_allclose(  # hidden layers: not graph outputs, so the torch forward answers
        inference.embed(TEXTS, ort, layers="-2,-1"), inference.embed(TEXTS, torch_model, layers="-2,-1"), atol=1e-6
    )


def test_serve_answers_embed_and_classify_as_torch(dirs):
    import asyncio

    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    from bertkit.serve import create_app

    def post(app, path, body):
        async def go():
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
                return (await client.post(path, json=body)).json()

        return asyncio.run(go())

    engines = ["onnxruntime", *(["openvino"] if backends.openvino_installed() else [])]
    apps = {b: create_app(inference.load(dirs["classifier"], backend=b)) for b in ("torch", *engines)}
    for (path, body), engine in itertools.product(
        (("/embed", {"texts": TEXTS, "pooling": "mean"}), ("/classify", {"texts": TEXTS})), engines
    ):
        got, want = (post(apps[b], path, body) for b in (engine, "torch"))
        assert_close(
            got["results" if path == "/classify" else "embeddings"], want.get("results", want.get("embeddings"))
        )


# ------------------------------------------------------------------------------------------ precision
def compile_configs(monkeypatch) -> list[dict]:
    """The config of every ``openvino.Core.compile_model`` call from now on (the calls still run)."""
    import openvino

    seen: list[dict] = []
    real = openvino.Core.compile_model

    def spy(self, model, device=None, config=None):
        seen.append(dict(config or {}))
        return real(self, model, device, config or {})

    monkeypatch.setattr(openvino.Core, "compile_model", spy)
    return seen


@pytest.mark.parametrize("quantize", [None, "int8"])
def test_openvino_is_told_float32_and_says_what_ran(dirs, monkeypatch, capsys, quantize):
    """OpenVINO's CPU plugin picks bf16 by itself on AVX512_BF16/AMX CPUs: bertkit asks for float32, and its
    notice agrees with the compiled model's own property, whatever the engine chose on this CPU."""
    if not backends.openvino_installed(quantize):
        pytest.skip("openvino or nncf not installed")
    from bertkit.backends import ov
    from bertkit.weights import load_model

    monkeypatch.delenv(ov.PRECISION_ENV, raising=False)
    seen = compile_configs(monkeypatch)
    compiled = ov.compile_graph(load_model(dirs["encoder"]).eval(), quantize, threads=1)
    assert seen[-1]["INFERENCE_PRECISION_HINT"] == "f32"
    ran = ov.precision_name(compiled.get_property("INFERENCE_PRECISION_HINT"))
    assert ("compiled the model for" in capsys.readouterr().err) == (ran != "f32")


def test_openvino_bf16_is_asked_for_and_the_notice_says_what_ran(dirs, monkeypatch, capsys):
    """bf16 asked is passed to OpenVINO as bf16; whether the CPU plugin honours it is the engine's business, and
    bertkit's notice names the precision the compiled model reports."""
    if not backends.openvino_installed():
        pytest.skip("openvino not installed")
    from bertkit.backends import ov
    from bertkit.weights import load_model

    monkeypatch.setenv(ov.PRECISION_ENV, "bf16")
    seen = compile_configs(monkeypatch)
    compiled = ov.compile_graph(load_model(dirs["encoder"]).eval(), None, threads=1)
    assert seen[-1]["INFERENCE_PRECISION_HINT"] == "bf16"
    ran = ov.precision_name(compiled.get_property("INFERENCE_PRECISION_HINT"))
    err = capsys.readouterr().err
    if ran == "bf16":
        assert "compiled the model for" not in err
    else:
        assert f"compiled the model for {ran}; running {ran}" in err
    monkeypatch.setenv(ov.PRECISION_ENV, "fp16")
    with pytest.raises(ConfigError, match=r"BERTKIT_OPENVINO_PRECISION='fp16': use float32 or bf16"):
        ov.inference_precision()


def test_openvino_precision_notice_names_what_ran():
    """The notice's text, for each pair of asked and ran, without any engine: silent when they agree."""
    from bertkit.backends import ov

    assert ov.precision_notice("bf16", "bf16") is None
    assert ov.precision_notice("f32", "f32") is None
    assert ov.precision_notice("bf16", "f32") == (
        "OpenVINO was asked for bf16 (BERTKIT_OPENVINO_PRECISION) and compiled the model for f32; running f32"
    )
    assert "compiled the model for bf16" in (ov.precision_notice("f32", "bf16") or "")
    assert ov.precision_name("<Type: 'bfloat16'>") == "bf16"
    assert ov.precision_name("f16") == "f16"


AVX2_ONLY = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
"""The environment that holds torch's and oneDNN's kernels to AVX2, whatever the CPU offers."""


def test_every_engine_gives_torchs_float32_answers_when_held_to_avx2(dirs, tmp_path):
    """In a process held to AVX2 kernels, torch's float32 matmuls stay at full precision and every engine gives
    the float32 vectors of this process's torch (a CPU with AVX-512 or AMX runs its own kernels out here)."""
    import os
    import subprocess

    engines = ["torch", "onnxruntime", *(["openvino"] if backends.openvino_installed() else [])]
    out = tmp_path / "vectors.npz"
    code = (
        "import sys, numpy as np, torch\n"
        "from bertkit import inference\n"
        "assert torch.get_float32_matmul_precision() == 'highest', torch.get_float32_matmul_precision()\n"
        "out, model, engines, texts = sys.argv[1], sys.argv[2], sys.argv[3].split(','), sys.argv[4:]\n"
        "np.savez(out, **{e: inference.embed(texts, inference.load(model, backend=e)) for e in engines})\n"
    )
    env = {**os.environ, **AVX2_ONLY, "BERTKIT_CACHE": str(tmp_path / "cache")}
    env.pop("BERTKIT_OPENVINO_PRECISION", None)
    got = subprocess.run(
        [sys.executable, "-c", code, str(out), str(dirs["encoder"]), ",".join(engines), *TEXTS],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    expected = inference.embed(TEXTS, inference.load(dirs["encoder"], backend="torch"))
    with np.load(out) as vectors:
        assert sorted(vectors.files) == sorted(engines)
        for engine in engines:
            np.testing.assert_allclose(vectors[engine], expected, atol=1e-4, err_msg=engine)


# ------------------------------------------------------------------------------------------ the cache
def test_export_is_cached_and_rebuilt_when_weights_options_or_versions_change(tmp_path, tokenizer, monkeypatch):
    exports = []
    real = backend_cache.export_onnx

    def counting(*args, **kwargs):
        exports.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(backend_cache, "export_onnx", counting)
    labels = {0: "negative", 1: "positive"}
    directory = save_model(tmp_path / "model", BertForSequenceClassification, tokenizer, id2label=labels)

    def run(**options):
        return inference.classify(TEXTS[:1], inference.load(directory, backend="onnxruntime", **options))[0].score

    first = run()
    assert run() == first and len(exports) == 1  # reused, by this and by a new load
    run(quantize="int8")
    assert len(exports) == 2
    save_model(
        directory, BertForSequenceClassification, tokenizer, seed=1, id2label=labels
    )  # new weights in the same place
    assert run() != first and len(exports) == 3
    versions = backends.versions()
    monkeypatch.setattr(backend_cache, "versions", lambda engine: {**versions, "onnxruntime": "0.0.1"})
    run()
    assert len(exports) == 4


def test_openvino_leaves_the_threads_signal_stack_as_it_was(dirs):
    """OpenVINO's CPU plugin swaps the thread's alternate signal stack for its own and frees it when
    destroyed; two models freed in the order they were made used to leave the thread on freed memory, and
    the next Ctrl-C or SIGTERM crashed the process. Built, run and freed in that order, the stack is unchanged."""
    if not backends.openvino_installed("int8"):
        pytest.skip("openvino or nncf not installed")
    import gc

    from bertkit.backends.signal_stack import current_signal_stack

    before = current_signal_stack()
    if before is None:
        pytest.skip("sigaltstack is read only on Linux")
    first = inference.load(dirs["encoder"], backend="openvino")
    second = inference.load(dirs["encoder"], backend="openvino", quantize="int8")
    for loaded in (first, second):
        inference.embed(TEXTS[:1], loaded)
        assert current_signal_stack() == before
    del first
    gc.collect()
    del second
    gc.collect()
    assert current_signal_stack() == before


def test_openvino_int8_graph_is_cached_and_rebuilt_when_weights_or_versions_change(
    tmp_path, tokenizer, cache, monkeypatch
):
    if not backends.openvino_installed("int8"):
        pytest.skip("openvino or nncf not installed")
    labels = {0: "negative", 1: "positive"}
    directory = save_model(tmp_path / "model", BertForSequenceClassification, tokenizer, id2label=labels)

    def graphs():
        return sorted(p.name for p in (cache / "openvino").iterdir() if p.name != "compiled")

    def run():
        loaded = inference.load(directory, backend="openvino", quantize="int8")
        return inference.classify(TEXTS[:1], loaded)[0].score

    first = run()
    assert run() == first and len(graphs()) == 1  # reused by a new load
    (folder,) = graphs()
    assert sorted(p.name for p in (cache / "openvino" / folder).iterdir()) == ["about.json", "model.bin", "model.xml"]
    assert any((cache / "openvino" / "compiled").iterdir())  # OpenVINO's own compiled blobs
    save_model(directory, BertForSequenceClassification, tokenizer, seed=1, id2label=labels)
    assert run() != first and len(graphs()) == 2
    versions = backend_cache.versions("openvino")
    monkeypatch.setattr(backend_cache, "versions", lambda engine: {**versions, "openvino": "0.0.1"})
    run()
    assert len(graphs()) == 3


def test_first_export_says_where_it_is_cached(dirs, cache, capsys):
    model = inference.load(dirs["encoder"], backend="onnxruntime")
    inference.embed(TEXTS, model)
    assert f"exporting to ONNX (once, cached in {cache / 'onnx'}" in capsys.readouterr().err
    inference.embed(TEXTS, inference.load(dirs["encoder"], backend="onnxruntime"))
    assert "exporting" not in capsys.readouterr().err
    (folder,) = (cache / "onnx").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["about.json", "model.onnx"]  # no temporary left


# ------------------------------------------------------------------------------------------ the CPU rule
def test_int8_rule_by_cpu(monkeypatch):
    for cpu in (AVX2, VNNI):  # ONNX Runtime's int8 wherever it is installed: fast on both, built once
        chosen = choose_backend(None, "int8", cpu=cpu)
        assert (chosen.backend, chosen.quantize) == ("onnxruntime", "int8") and "ONNX Runtime" in (chosen.note or "")
    assert choose_backend("torch", "int8", cpu=AVX2) == Choice("torch", "int8")  # asked for: obeyed
    assert choose_backend(None, None, cpu=AVX2) == Choice("torch", None)
    monkeypatch.setattr(backend_choice, "onnxruntime_installed", lambda: False)
    chosen = choose_backend(None, "int8", cpu=VNNI)  # torchao has fast int8 kernels there
    assert (chosen.backend, chosen.quantize) == ("torch", "int8") and "onnxruntime is not installed" in (
        chosen.note or ""
    )
    monkeypatch.setattr(backend_choice, "openvino_installed", lambda quantize=None: True)
    chosen = choose_backend("auto", "int8", cpu=AVX2)
    assert (chosen.backend, chosen.quantize) == ("openvino", "int8") and "OpenVINO" in (chosen.note or "")
    monkeypatch.setattr(backend_choice, "openvino_installed", lambda quantize=None: False)
    chosen = choose_backend("auto", "int8", cpu=AVX2)
    assert (chosen.backend, chosen.quantize) == ("torch", None) and "running float32" in (chosen.note or "")
    with pytest.raises(ConfigError, match="--backend"):
        choose_backend("tensorrt", None)
    with pytest.raises(ConfigError, match="--device cpu"):
        choose_backend("onnxruntime", None, "cuda")


def test_int8_on_a_slow_cpu_falls_back_with_one_line(dirs, monkeypatch, capsys):
    monkeypatch.setattr(backend_choice, "detect", lambda: AVX2)
    loaded = inference.load(dirs["encoder"], quantize="int8")
    assert backend_of(loaded.model) == ("onnxruntime", "int8")
    assert capsys.readouterr().err.count("\n") == 1
    monkeypatch.setattr(backend_choice, "onnxruntime_installed", lambda: False)
    monkeypatch.setattr(backend_choice, "openvino_installed", lambda quantize=None: False)
    loaded = inference.load(dirs["encoder"], quantize="int8")
    assert backend_of(loaded.model) == ("torch", None) and not is_quantized(loaded.model)
    (line,) = capsys.readouterr().err.splitlines()
    assert "slower than float32" in line and "running float32" in line


def test_cpu_features_from_cpuinfo_and_caps():
    epyc = parse_cpuinfo("model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx fma avx2 f16c\n", "x86_64")
    assert (epyc.avx2, epyc.avx512, epyc.fast_torchao_int8, epyc.int8_kernels) == (True, False, False, "avx2")
    xeon = parse_cpuinfo(
        "model name : Intel Xeon\nflags : avx2 fma avx512f avx512bw avx512vl avx512_vnni amx_tile amx_int8\n", "x86_64"
    )
    assert xeon.fast_torchao_int8 and xeon.int8_kernels == "amx"
    for env in ({"ONEDNN_MAX_CPU_ISA": "AVX2"}, {"ATEN_CPU_CAPABILITY": "avx2"}):
        capped = apply_caps(xeon, env)
        assert capped.avx2 and not capped.fast_torchao_int8 and capped.int8_kernels == "avx2"
        assert capped.capped_by and capped.capped_by in capped.describe()
    assert apply_caps(xeon, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"}).int8_kernels == "avx512-vnni"
    assert apply_caps(xeon, {"ONEDNN_MAX_CPU_ISA": "ALL"}) == xeon
    arm = parse_cpuinfo("Features\t: fp asimd asimddp i8mm\n", "aarch64")
    assert (arm.neon, arm.dotprod, arm.i8mm, arm.fast_torchao_int8) == (True, True, True, False)
    assert "\n" not in arm.describe()


# ------------------------------------------------------------------------------------------ errors
def test_missing_onnxruntime_is_one_line_and_exit_2(dirs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(BertkitError, match=r"pip install 'bertkit\[export\]'"):
        inference.load(dirs["encoder"], backend="onnxruntime")
    texts = tmp_path / "in.txt"
    texts.write_text("hello\n")
    args = ["embed", "-m", str(dirs["encoder"]), "-i", str(texts), "-o", str(tmp_path / "x.npy")]
    assert main([*args, "--backend", "onnxruntime"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "bertkit[export]" in line


def test_missing_openvino_or_nncf_is_one_line_naming_the_extra(dirs, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "nncf", None)
    if backends.openvino_installed():
        with pytest.raises(BertkitError, match=r"needs the nncf package; pip install 'bertkit\[openvino\]'"):
            inference.load(dirs["encoder"], backend="openvino", quantize="int8")
    monkeypatch.setitem(sys.modules, "openvino", None)
    with pytest.raises(BertkitError, match=r"pip install 'bertkit\[openvino\]'"):
        inference.load(dirs["encoder"], backend="openvino")
    texts = tmp_path / "in.txt"
    texts.write_text("hello\n")
    args = ["embed", "-m", str(dirs["encoder"]), "-i", str(texts), "-o", str(tmp_path / "x.npy")]
    assert main([*args, "--backend", "openvino"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "bertkit[openvino]" in line
