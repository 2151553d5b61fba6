"""Every benchmark script runs in its smoke mode (``--smoke``: tiny inputs, a few steps, the result in a
temporary folder), so that none can rot unnoticed: each test runs one script's ``main(argv)`` in this process
and checks the result it wrote."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
SUPPORT = {  # modules the scripts share, not scripts
    "harness", "loopback", "machine_info", "smoke_inputs", "distill_data", "distill_results",
    "time_to_quality_clock", "time_to_quality_downstream", "time_to_quality_results",
    "results_defaults", "results_engines", "results_inference", "results_render", "results_serving",
    "results_sources", "results_training",
}  # fmt: skip

Check = Callable[[Path, str], None]


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def check_unpad(out: Path, stdout: str) -> None:
    result = read(out)
    assert set(result["ms_per_step"]) == {"random, padded", "random, unpadded", "same tokens, no padding"}
    assert "random, unpadded:" in stdout


def check_modernbert(out: Path, stdout: str) -> None:
    result = read(out)
    (row,) = result["speed"]
    assert row["bertkit_inference_s"] > 0 and row["transformers_train_step_s"] > 0 and row["real_tokens"] > 0
    assert {(r["library"], r["task"]) for r in result["memory"]} == {
        (library, task) for library in ("bertkit", "transformers") for task in ("classification", "embedding")
    }
    assert all(set(r["peak_mib_above_model"]) == {"256", "512"} for r in result["memory"])
    assert "tiny: inference x" in stdout


def check_train_step(out: Path, stdout: str) -> None:
    (row,) = read(out)["results"]
    assert row["size"] == "tiny" and row["speedup"] > 0 and row["bertkit"]["mfu"] > 0
    assert "HF sdpa tok/s" in stdout


def check_profile_train(out: Path, stdout: str) -> None:
    runs = read(out)["runs"]
    assert [(r["task"], r["size"]) for r in runs] == [("pretrain", "tiny"), ("finetune", "tiny")]
    for run in runs:
        for side in ("bertkit", "transformers"):
            categories = run[side]["categories_ms"]
            # every operator falls in a category; the matmuls and the optimizer are always there
            assert categories["matmul"] > 0 and categories["optimizer"] > 0 and run[side]["step_ms"] > 0
            assert sum(categories.values()) >= 0.999 * run[side]["step_ms"]
    assert "unprofiled" in stdout


def check_performance_page(out: Path, stdout: str) -> None:
    assert out.read_text(encoding="utf-8") == (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")


def check_tokenizer(out: Path, stdout: str) -> None:
    result = read(out)
    assert {r["name"] for r in result["results"]} >= {"bertkit encode_batch", "transformers BertTokenizerFast"}
    assert all(r["tokens"] > 0 for r in result["results"]) and "BertTokenizerFast / bertkit" in stdout


def check_fuzz(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["failures"] == 0 and result["total_inputs"] > 0 and "tokenizer" in result["targets"]


def check_curve(out: Path, stdout: str) -> None:
    curves = read(out)["curves"]
    assert [p["step"] for p in curves["bertkit"]] == [p["step"] for p in curves["transformers"]] == [2, 4]


def check_heldout(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["updates"] == 4 and result["eval"] and result["best"]["loss"] > 0


def check_pretrain_quality(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["updates"] == 4 and result["final_eval"] is not None
    assert len(result["fill_mask"]) == 8 and all(len(f["top5"]) == 5 for f in result["fill_mask"])


def check_punctuation(out: Path, stdout: str) -> None:
    (record,) = lines(out)
    assert record["seed"] == 1 and len(record["f1_per_epoch"]) == 1 and "f1" in record


def check_probe(out: Path, stdout: str) -> None:
    results = read(out)["results"]
    assert {r["model"] for r in results} == {"a", "b"} and len(results) == 2 * 3 * 2
    assert all(0 <= r["dev_accuracy"] <= 1 for r in results)


def check_summary(out: Path, stdout: str) -> None:
    table = out.read_text(encoding="utf-8")
    assert "| rte | accuracy |" in table and "| stsb | spearman |" in table and table.strip() == stdout.strip()


def check_results_page(out: Path, stdout: str) -> None:
    assert out.read_text(encoding="utf-8") == (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def check_finetune(out: Path, stdout: str) -> None:
    (run,) = read(out)["runs"]
    assert run["task"] == "polarity" and run["bertkit"]["steps"] == run["peer"]["steps"] == 2
    assert run["bertkit_main"] is not None and run["peer_main"] is not None and run["speedup_per_step"] > 0


def check_distill(out: Path, stdout: str) -> None:
    result = read(out)
    assert set(result["families"]) == {"sst2", "conll", "squad_pairs"} and result["speed"]["speedup"] > 0
    assert [(row["student"], row["speedup"] > 0) for row in result["speed_per_student"]] == [
        ("1", True),
        ("tiny", True),
    ]
    for family in result["families"].values():
        models = family["models"]
        students = {"1-distilled", "1-direct", "tiny-distilled", "tiny-direct"}
        extra = {"1-distilled-unlabeled"} if family is not result["families"]["squad_pairs"] else set()
        assert set(models) == {"teacher", *students, *extra}
        assert all(m[p]["examples_per_second"] > 0 for m in models.values() for p in ("float32", "int8"))
    for name in ("sst2", "conll"):
        assert result["families"][name]["models"]["1-distilled-unlabeled"]["unlabeled_examples"] == 8
    assert out.with_suffix(".png").is_file()


def check_finetune_defaults(out: Path, stdout: str) -> None:
    rows = lines(out)
    assert [r["recipe"] for r in rows] == ["fixed", "rule", "search"] and all(r["updates"] > 0 for r in rows)


def check_process(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["lines"] == 40 and len(result["seconds"]["bertkit"]) == len(result["seconds"]["script"]) == 1
    assert result["script_over_bertkit"] > 0 and result["min_cosine_between_the_two"] > 0.99
    assert "cpu" in result["machine"] and "script/bertkit" in stdout
    # the slim runtime on the int8 export folder: the same vectors as bertkit's int8 on the checkpoint
    assert len(result["seconds"]["slim"]) == 1 and result["max_abs_difference_slim_vs_bertkit"] < 1e-5
    serve = result["serve"]
    assert set(serve["median_first_embed_seconds"]) == {"slim", "torch_onnxruntime"}
    for level in ("1", "4"):
        for side in serve["levels"][level].values():
            assert side["requests"] == 12 and side["errors"] == 0
    assert set(result["slim_over_torch_onnxruntime_throughput"]) == {"1", "4"} and "slim/script" in stdout


def check_inference(out: Path, stdout: str) -> None:
    result = read(out)
    assert {"transformers", "bertkit"} <= set(result["sides"]) and "bertkit_compiled" in result["skipped"]
    for workload in result["workloads"].values():
        assert workload["cosine_vs_transformers_min"]["bertkit"] > 0.999
    assert set(result["single_request_latency_ms"]) == set(result["sides"])


def check_engines(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["machine"]["cpu_features"] and set(result["batches"]) == {1, 8}
    engines = result["models"]["tiny"]
    assert {"transformers", "bertkit_onnxruntime_int8"} <= set(engines) | set(result["skipped"])
    for engine, figures in engines.items():
        assert "error" not in figures, (engine, figures)
        assert figures["peak_rss_mib"] > 0 and figures["first_call_s"] > 0
        assert set(figures["workloads"]) == {"sst2_b1", "sst2_b8", "squad_b1", "squad_b8"}
        assert figures["cosine_vs_transformers"]["sst2"]["min"] > 0.99
    assert "wrote" in stdout


def check_int8_quality(out: Path, stdout: str) -> None:
    result = read(out)
    assert set(result["tasks"]) == {"sst2"} and "int8_points" in result["tasks"]["sst2"]
    assert result["embed"]["sentences"]["cosine_min"] > 0.9


def check_embedding_eval(out: Path, stdout: str) -> None:
    result = read(out)
    for side in ("bertkit", "sentence_transformers"):
        assert -1 <= result["sts"][side]["spearman"] <= 1 and result["sts"][side]["seconds"] >= 0
        assert 0 <= result["retrieval"][side]["ndcg@10"] <= 1
    assert result["sts"]["pairs"] == 8 and "retrieval: sentence-transformers ndcg@10" in stdout


def check_prepare_data(out: Path, stdout: str) -> None:
    result = read(out)
    assert (
        result["bertkit"]["instances"] > 0 and result["peer"]["instances"] > 0 and result["ratio"]["tokens_per_s"] > 0
    )


def check_serve_load(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["sent"] == 40 and result["server_errors_5xx"] == 0 and result["dropped"] == 0
    assert result["statuses"].get("200", 0) > 0


def check_serve_embeddings(out: Path, stdout: str) -> None:
    result = read(out)
    assert set(result["levels"]) == {"1", "8", "32"}
    for routes in result["levels"].values():
        for route in ("/v1/embeddings", "/embed"):
            assert routes[route]["statuses"] == {"200": 12} and routes[route]["embeddings_per_s"] > 0


def check_serve_engines(out: Path, stdout: str) -> None:
    result = read(out)
    levels = result["engines"]["bertkit"]["levels"]
    assert set(levels) == {"1", "4"} and "| bertkit | 4 |" in stdout
    for level in levels.values():
        assert level["statuses"] == {"200": 12} and level["texts_per_s"] > 0 and level["peak_rss_mb"] > 0


def check_serve_abuse(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["alive_after"] and result["server_5xx"] == 0 and result["attack_requests"] > 0
    assert result["baseline"]["requests"] > 0


def check_embedding_train(out: Path, stdout: str) -> None:
    result = read(out)
    (run,) = result["runs"]
    assert run["bertkit"]["steps"] == run["peer"]["steps"] == result["recipe"]["steps"] == 2
    assert Path(run["bertkit"]["model"], "modules.json").is_file() and Path(run["peer"]["model"]).is_dir()
    assert run["speedup"] > 0 and "sentence-transformers" in stdout
    sides = result["gradcache"]["sides"]
    assert set(sides) == {"cached", "uncached"} and all(s["steps"] == 1 for s in sides.values())


def check_serve_soak(out: Path, stdout: str) -> None:
    result = read(out)
    assert result["capacity"]["good_per_s"] > 0 and result["rate"] > 0 and result["scheduled"] > 0
    assert result["alive_after"] and result["server_5xx"] == 0 and result["keys_in_server_log"] == 0
    statuses = result["statuses"]
    assert statuses["good"].get("200", 0) > 0 and "401" in statuses["bad_key"]
    assert set(statuses["bad_key"]) <= {"401", "429"}  # guesses are rate limited per address
    assert all(400 <= int(s) < 500 for s in statuses["malformed"]) and "429" in statuses["greedy"]
    assert result["windows"][0]["p99_ms"] is not None and result["windows"][0]["rss_mb"] > 0
    assert set(result["verdict"]) >= {"no_5xx", "rss_within_bound", "p99_stable", "passed"}
    assert "| window | from s |" in stdout


def check_serve_startup(out: Path, stdout: str) -> None:
    result = read(out)
    cases = {case["name"]: case for case in result["cases"]}
    assert set(cases) == {"torch, cold", "torch, warm", "onnxruntime int8, cold", "onnxruntime int8, warm"} or set(
        cases
    ) == {"torch, cold", "torch, warm"}
    for case in cases.values():
        assert 0 < case["live_s"] <= case["ready_s"] <= case["first_embed_s"], case
    assert "| case |" in stdout


def check_time_to_quality(out: Path, stdout: str) -> None:
    result = read(out)
    assert set(result["results"]) == {"bertkit-bert", "bertkit-modern", "hf-pretraining", "hf-mlm"}
    for (run,) in result["results"].values():
        accuracies = [point["mlm_acc"] for point in run["curve"]]
        assert run["steps"] > 0 and all(0 <= a <= 1 for a in accuracies) and run["final"] == accuracies[-1]
    assert result["heldout"]["masked"] > 0 and "machine" in result and result["command"].startswith("python")
    assert set(result["table"]["goals"]) == {"bertkit-modern vs hf-mlm", "bertkit-bert vs hf-pretraining"}
    assert out.with_suffix(".png").is_file()
    down = result["downstream"]  # every side's weights and the random start, fine-tuned on both demo tasks
    assert list(down["results"]) == [*result["results"], "random init"]
    for row in down["results"].values():
        assert set(row) == {"polarity", "punctuation"}
        for task in row.values():
            assert len(task["scores"]) == 1 and all(0 <= s <= 1 for s in task["scores"]) and task["sd"] == 0.0
    assert down["results"]["random init"]["polarity"]["train_examples"] == 32
    assert down["settings"]["punctuation"]["train_examples"] == 16
    section = load("bench_time_to_quality").render_section(None, None, result)
    assert "| random init | 0 |  |" in section and "| hf-mlm |" in section
    check_time_to_quality_merge(out, result)


def check_time_to_quality_merge(out: Path, result: dict) -> None:
    """Runs of other seeds (one per core or machine) merge into one result, the goals judged seed by seed."""
    module = load("bench_time_to_quality")
    other = json.loads(json.dumps(result))
    for runs in other["results"].values():
        runs[0]["seed"] = 2
    (second := out.with_name("seed2.json")).write_text(json.dumps(other), encoding="utf-8")
    merged = module.merge([out, second], out.with_name("merged.json"), ["--merge", "a", "b"])
    assert merged["settings"]["seeds"] == [1, 2] and all(len(runs) == 2 for runs in merged["results"].values())
    assert out.with_name("merged.png").is_file() and len(merged["merged"]) == 2
    for name, goal in merged["table"]["goals"].items():
        assert goal["ratios"] == [result["table"]["goals"][name]["ratio"]] * 2
    assert [row["seed"] for row in merged["table"]["hf-mlm"]["per_seed"]] == [1, 2]
    section = module.render_section(merged, None)
    assert "2 runs merged by `python benchmarks/bench_time_to_quality.py --merge a b`" in section
    with pytest.raises(SystemExit, match="repeat a seed"):
        module.merge([out, out], out.with_name("twice.json"), [])
    other["settings"]["budget"] += 1
    second.write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"differs from .* in budget"):
        module.merge([out, second], out.with_name("other.json"), [])


def check_reliability_tables(out: Path, stdout: str) -> None:
    page = out.read_text(encoding="utf-8")
    assert "<!-- table: soak -->" in page and "<!-- table: startup -->" in page and "| command |" in page


def check_threads(out: Path, stdout: str) -> None:
    runs = read(out)["runs"]
    assert [(r["job"], r["setting"]) for r in runs] == [
        (job, setting) for job in ("finetune", "pretrain") for setting in ("default", "torch default (spin)")
    ]
    assert all(r["wall_s"] > 0 and r["x_best"] >= 1 for r in runs)
    assert all(0 <= r["dev_accuracy"] <= 1 for r in runs if r["job"] == "finetune")
    assert all(r["steps_per_s"] > 0 for r in runs if r["job"] == "pretrain")
    assert '"setting": "default"' in stdout


CHECKS: dict[str, tuple[str, Check]] = {
    # script: (result file name, what its result must hold)
    "bench_embedding_eval": ("embedding_eval.json", check_embedding_eval),
    "bench_embedding_train": ("embedding_train.json", check_embedding_train),
    "bench_engines": ("engines.json", check_engines),
    "bench_distill": ("distill.json", check_distill),
    "bench_finetune": ("finetune.json", check_finetune),
    "bench_finetune_defaults": ("finetune_defaults.jsonl", check_finetune_defaults),
    "bench_inference": ("inference.json", check_inference),
    "bench_int8_quality": ("int8_quality.json", check_int8_quality),
    "bench_prepare_data": ("prepare_data.json", check_prepare_data),
    "bench_pretrain_quality": ("pretrain_quality.json", check_pretrain_quality),
    "bench_process": ("process.json", check_process),
    "bench_serve_abuse": ("serve_abuse.json", check_serve_abuse),
    "bench_serve_embeddings": ("serve_embeddings.json", check_serve_embeddings),
    "bench_serve_engines": ("serve_engines.json", check_serve_engines),
    "bench_serve_load": ("serve_load.json", check_serve_load),
    "bench_serve_soak": ("serve_soak.json", check_serve_soak),
    "bench_serve_startup": ("serve_startup.json", check_serve_startup),
    "bench_threads": ("threads.json", check_threads),
    "bench_tokenizer": ("tokenizer.json", check_tokenizer),
    "bench_time_to_quality": ("time_to_quality.json", check_time_to_quality),
    "performance_page": ("performance.md", check_performance_page),
    "profile_train": ("profile.json", check_profile_train),
    "bench_train_step": ("train_step.json", check_train_step),
    "bench_modernbert": ("modernbert.json", check_modernbert),
    "bench_unpad": ("unpad.json", check_unpad),
    "compare_pretraining_curve": ("curve.json", check_curve),
    "fuzz_inputs": ("fuzz.json", check_fuzz),
    "heldout_curve": ("heldout.json", check_heldout),
    "probe_features": ("probe.json", check_probe),
    "punctuation_finetune": ("punctuation.jsonl", check_punctuation),
    "reliability_tables": ("reliability.md", check_reliability_tables),
    "results_page": ("results.md", check_results_page),
    "summarize_finetune": ("summary.md", check_summary),
}


def scripts() -> list[str]:
    return sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in SUPPORT)


@pytest.fixture
def benchmarks_importable() -> Iterator[None]:
    """The scripts import their shared modules by name, as they do when run as ``python benchmarks/x.py``; the
    torch thread count a script sets is put back."""
    sys.path.insert(0, str(BENCHMARKS))
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        sys.path.remove(str(BENCHMARKS))
        torch.set_num_threads(threads)


def load(script: str) -> ModuleType:
    return importlib.import_module(script)


def test_every_script_has_a_smoke_test() -> None:
    assert sorted(CHECKS) == scripts()


@pytest.mark.parametrize("script", scripts())
def test_smoke(script: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], benchmarks_importable: None) -> None:
    if script not in CHECKS:
        pytest.fail(f"benchmarks/{script}.py has no smoke check in CHECKS")
    name, check = CHECKS[script]
    out = tmp_path / name
    assert load(script).main(["--smoke", "--output", str(out)]) in (0, None)
    check(out, capsys.readouterr().out)


def test_a_smoke_run_never_writes_into_the_results_folder(benchmarks_importable: None) -> None:
    harness = load("harness")
    args = harness.argparse.Namespace(smoke=True, output=str(harness.RESULTS / "x.json"))
    with pytest.raises(SystemExit, match="does not write into"):
        harness.output_path(args, harness.RESULTS / "x.json")
    args.output = None
    elsewhere = harness.output_path(args, harness.RESULTS / "x.json")
    elsewhere.parent.rmdir()
    assert elsewhere.name == "x.json" and not elsewhere.resolve().is_relative_to(harness.RESULTS)


def test_distill_models_picks_the_runs(benchmarks_importable: None) -> None:
    """``bench_distill --models``: only the runs named (a ``-unlabeled`` run on SST-2 and CoNLL alone); without
    it, every student distilled and direct and the first one distilled again with the unlabelled text."""
    bench = load("bench_distill")
    picked = bench.parse(["--models", "2-distilled-unlabeled,2-direct", "--unlabeled-examples", "5"])
    assert bench.model_names("sst2", picked) == ["2-distilled-unlabeled", "2-direct"]
    assert bench.model_names("conll", picked) == ["2-distilled-unlabeled", "2-direct"]
    assert bench.model_names("squad_pairs", picked) == ["2-direct"]
    default = bench.parse(["--students", "3,2", "--unlabeled-examples", "5"])
    assert bench.model_names("sst2", default) == [
        "3-distilled",
        "3-direct",
        "2-distilled",
        "2-direct",
        "3-distilled-unlabeled",
    ]


@pytest.mark.slow  # nine processes that each import torch (and most transformers): minutes on a busy CPU
def test_the_gpu_check_dry_run_runs_every_step(tmp_path: Path) -> None:
    """``benchmarks/gpu_check.sh --dry-run``: every step of the device check at smoke size on the CPU, each
    ending well, the three files in ``$OUT`` named after the device, every result inside the archive."""
    import os
    import subprocess
    import tarfile

    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        ["bash", str(BENCHMARKS / "gpu_check.sh"), "--dry-run"], env=env, capture_output=True, text=True, timeout=1800
    )
    summary = (tmp_path / "gpu_check_cpu-dry-run_summary.txt").read_text(encoding="utf-8")
    assert done.returncode == 0, summary + (tmp_path / "gpu_check_cpu-dry-run_log.txt").read_text(encoding="utf-8")
    steps = [line.split()[0] for line in summary.splitlines() if " rc=" in line]
    assert steps[:5] == [
        "device_tests",
        "train_step_128",
        "train_step_128_packed",
        "train_step_512_packed",
        "profile_base_128",
    ]
    assert {"finetune", "embedding_train"} <= set(steps) and "failed steps: 0" in summary
    with tarfile.open(tmp_path / "gpu_check_cpu-dry-run.tar.gz") as archive:
        files = {Path(member.name).name: member for member in archive.getmembers() if member.isfile()}
        assert {"train_step_cpu-dry-run_seq128_packed.json", "finetune_cpu-dry-run.json"} <= set(files)
        profile = archive.extractfile(files["train_step_cpu-dry-run_profile.json"])
        assert profile is not None
        (row,) = json.load(profile)["results"]
    assert row["packed"] and row["profile"]["side"] == "bertkit_packed" and row["profile"]["top_kernels"]
