"""docs/results.md is generated from benchmarks/results/*.json: the committed page must match its raw results."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_script():
    # The script imports its shared modules by name, as it does when run as `python benchmarks/results_page.py`.
    if str(ROOT / "benchmarks") not in sys.path:
        sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("results_page", ROOT / "benchmarks" / "results_page.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["results_page"] = module
    spec.loader.exec_module(module)
    return module


def shared(name: str):
    """A module the page is built from (loaded by ``load_script``), where a test patches or reads its names."""
    return importlib.import_module(name)


def test_committed_results_page_equals_what_the_script_writes():
    page = load_script()
    committed = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    assert committed == page.render(), "docs/results.md is out of date: run python benchmarks/results_page.py"
    assert page.main(["--check"]) == 0


def test_every_claim_links_an_existing_raw_result_and_reads_its_figures():
    page = load_script()
    text = page.render()
    for area, claims in page.CLAIMS:
        assert f"## {area}" in text
        assert len(set(claims)) == len(claims), f"{area}: a claim twice"
        for name, extract, index in claims:
            assert (ROOT / "benchmarks" / "results" / name).is_file(), name
            assert f"(../benchmarks/results/{name})" in text
            assert index < len(extract(name)), f"{name} has no row {index}"
    # A figure comes from its file: the train-step speed-up of the first size, as the JSON holds it.
    step = json.loads((ROOT / "benchmarks" / "results" / "train_step_cpu_quiet.json").read_text())
    assert f"AdamW**: {step['results'][0]['speedup']:.2f}x. bertkit: " in text


def test_the_page_reads_as_prose_a_screen_wide():
    lines = load_script().render().splitlines()
    assert not [line for line in lines if len(line) > 300]
    assert "load " not in " ".join(lines) and "commit " not in " ".join(lines)  # no load averages, no hashes


def test_gpu_claims_name_the_card_and_add_the_datasheet_share():
    page = load_script()
    text = " ".join(page.render().split())  # the claims wrap: compare with single spaces
    d = json.loads((ROOT / "benchmarks" / "results" / "train_step_gpu_bf16_base.json").read_text())
    r, ours = d["results"][0], d["results"][0]["bertkit"]
    assert f"AdamW**: {r['speedup']:.2f}x. bertkit: " in text
    assert f" on {d['machine']['gpu']}, torch {d['machine']['torch']}, measured bf16 matmul peak" in text
    assert (
        f"MFU {100 * ours['mfu']:.1f} % ({100 * ours['tokens_per_s'] * ours['flops_per_token'] / 989e12:.1f} %" in text
    )


def test_step_peak_labels_a_cpu_run_by_its_dtype_without_a_datasheet():
    load_script()
    cpu = {"machine": {"gpu": None}, "peak_dtype": "torch.bfloat16", "peak_flops": 2e11}
    assert shared("results_training").step_peak(cpu) == ("bf16 peak 200 GFLOP/s", None)


def test_check_fails_when_the_page_drifts(tmp_path, monkeypatch):
    page = load_script()
    stale = tmp_path / "results.md"
    stale.write_text(page.render().replace("2.89x", "3.50x", 1), encoding="utf-8")
    assert "2.89x" in page.render()
    monkeypatch.setattr(page, "PAGE", stale)
    assert page.main(["--check"]) == 1


def test_performance_page_is_generated_from_the_engines_file(tmp_path, monkeypatch):
    page = load_script()
    committed = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert page.engines_section() in committed, "docs/performance.md is out of date: run performance_page.py"
    features = "avx2, avx512_vnni; int8 kernels avx512-vnni"
    workloads = {"sst2_b1": {"sentences_per_s": 12.5, "p50_ms": 80.0, "p99_ms": 95.0, "calls": 4}}
    engines = {
        "transformers": {"first_call_s": 3.0, "peak_rss_mib": 500.0, "workloads": workloads},
        "bertkit_onnxruntime_int8": {
            "first_call_s": 9.0,
            "first_call_cached_s": 2.0,
            "peak_rss_mib": 400.0,
            "workloads": {"sst2_b1": {**workloads["sst2_b1"], "sentences_per_s": 25.0}},
            "cosine_vs_transformers": {"sst2": {"min": 0.99, "mean": 0.995}},
        },
        "st_onnx": {"error": "ImportError: boom"},
    }
    result = {
        "machine": {"cpu": "Test CPU", "cores": 2, "cpu_features": features},
        "threads": 2,
        "inputs": {"sst2": 4},
        "batches": [1],
        "max_length": 384,
        "skipped": {"st_openvino": "optimum.intel is not installed"},
        "models": {"tiny": engines},
    }
    (tmp_path / "engines.json").write_text(json.dumps(result), encoding="utf-8")
    monkeypatch.setattr(shared("results_sources"), "RESULTS", tmp_path)
    text = page.engines_section()
    assert "Test CPU" in text and features in text and "skipped st_openvino: optimum.intel" in text
    assert "| bertkit_onnxruntime_int8 | 25.0 /s, 80/95 ms | 9.0 s (2.0 s) | 400 MiB | sst2 0.9900/0.99500 |" in text
    assert "| st_onnx | failed: ImportError: boom |" in text
    ((what, row),) = shared("results_engines").engines_rows("engines.json")
    assert (
        what.startswith("tiny, sst2, batch 1 (4 texts)") and row[2] == "bertkit_onnxruntime_int8 / transformers: 2.00x"
    )
