"""Write docs/results.md from the raw benchmark results in benchmarks/results/*.json.

    python benchmarks/results_page.py            # rewrite docs/results.md
    python benchmarks/results_page.py --check    # exit 1 if either differs from what this writes
    python benchmarks/results_page.py --smoke    # write the page to a temporary folder

Every figure in the page's tables is read from a result file; this script only holds what those files
lack (a row's description, and the command where the file does not record it), keyed by file name.
"""

from __future__ import annotations

import textwrap

from harness import page_main
from results_defaults import defaults_section
from results_engines import ENGINES_FILE, engines_rows
from results_engines import engines_section as engines_section  # performance_page.py writes it
from results_inference import inference_rows, int8_quality_rows
from results_render import Extractor
from results_render import machine as machine  # reliability_tables.py names its machines with it
from results_serving import abuse_rows, fuzz_rows, serve_engines_rows, serve_load_rows
from results_sources import ROOT
from results_training import (
    curve_rows,
    finetune_rows,
    prepare_rows,
    pretrain_metrics_rows,
    pretrain_quality_rows,
    probe_rows,
    tokenizer_rows,
    train_step_rows,
)

PAGE = ROOT / "docs" / "results.md"

# The current claims, area by area: (result file, how its rows are read, which row). One row a claim, the
# newest measurement of it; older files and the experiments that led here are in git's history.
CLAIMS: list[tuple[str, list[tuple[str, Extractor, int]]]] = [
    (
        "Pre-training step",
        [("train_step_cpu_quiet.json", train_step_rows, 0), ("train_step_cpu_quiet.json", train_step_rows, 2)],
    ),
    (
        "Pre-training on a GPU",
        [
            ("train_step_gpu_bf16_base.json", train_step_rows, 0),
            ("train_step_gpu_bf16_large.json", train_step_rows, 0),
            ("pretrain_gpu_small_bf16_metrics.jsonl", pretrain_metrics_rows, 0),
        ],
    ),
    ("Data preparation", [("prepare_data.json", prepare_rows, 0), ("prepare_data_x10.json", prepare_rows, 0)]),
    ("Tokenizer", [("tokenizer.json", tokenizer_rows, 0)]),
    (
        "Fine-tuning speed and quality",
        [
            ("finetune_full_sst2.json", finetune_rows, 0),
            ("finetune_full_mrpc.json", finetune_rows, 0),
            ("finetune_full_rte.json", finetune_rows, 0),
            ("finetune_stsb_unpadded.json", finetune_rows, 0),
            ("finetune_full_conll.json", finetune_rows, 0),
            ("finetune_full_squad_parity.json", finetune_rows, 0),
        ],
    ),
    (
        "Inference",
        [
            ("inference.json", inference_rows, 0),
            (ENGINES_FILE, engines_rows, 2),
            (ENGINES_FILE, engines_rows, 5),
            ("int8_quality.json", int8_quality_rows, 3),
            ("int8_quality_onnxruntime.json", int8_quality_rows, 0),
        ],
    ),
    (
        "Serving",
        [
            ("serve_engines.json", serve_engines_rows, 0),
            ("serve_engines.json", serve_engines_rows, 3),
            ("serve_load.json", serve_load_rows, 0),
        ],
    ),
    ("Reliability", [("reliability_serve_abuse.json", abuse_rows, 0), ("reliability_fuzz.json", fuzz_rows, 0)]),
    (
        "Pre-training quality",
        [
            ("pretrain_quality.json", pretrain_quality_rows, 0),
            ("pretraining_curve.json", curve_rows, 0),
            ("probe_demo_reviews.json", probe_rows, 0),
        ],
    ),
]

INTRO = """\
# Measured results

The current claims, area by area, one each: the newest measurement, with its command, its machine and the raw
result file it is read from. `python benchmarks/results_page.py` writes this page from `benchmarks/results/`, and
`make test` checks that it matches them; older measurements are in git's history, the experiments that chose
the defaults in [experiments.md](experiments.md), where a training step's time goes in
[performance.md](performance.md).

CPU runs are on 2 cores of an AMD EPYC (AVX2, no AVX-512), torch 2.13.0 CPU, fp32, unless the row says otherwise;
GPU runs on one NVIDIA H200 (`benchmarks/GPU.md`). Each benchmark runs bertkit and its peer in the same run on
the same inputs; the machine was shared with other jobs, so the same-run ratios are the figures to read. The peer
for fine-tuning is a plain PyTorch loop over `transformers` with the same recipe, for the pre-training step
`transformers.BertForPreTraining`; MFU is against the matmul peak measured in the same run (GPU rows add the
share of the datasheet peak, 989 TFLOP/s bf16). Fine-tuning rows pool a file's seeds: mean ± sample standard
deviation of the dev metric the kept checkpoint scored.

Correctness is tested rather than measured here: token ids identical to `transformers.BertTokenizer`
(`tests/test_tokenizer_parity.py`), all-MiniLM-L6-v2 outputs within 2.4e-6 of `transformers.BertModel`
(`tests/test_parity_hf.py`), Google's TensorFlow checkpoints read tensor for tensor (`tests/test_weights_tf.py`),
a run killed with SIGKILL and resumed ending with bit-identical weights (`tests/test_training_resume.py`).
"""


def claim(name: str, extract: Extractor, index: int) -> list[str]:
    """One claim as a list item: what, the ratio, both sides, the command, the machine and the raw file."""
    what_and_command, (ours, peer, ratio, where) = extract(name)[index]
    what, _, command = what_and_command.rpartition(" | `")
    text = f"- **{what}**" + (f": {ratio}" if ratio else "") + f". bertkit: {ours}"
    text += (f"; peer: {peer}" if peer else "") + f". `{command} on {where}"
    text += f"; raw result [{name}](../benchmarks/results/{name})."
    return textwrap.wrap(text, 116, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def render() -> str:
    out = [INTRO]
    for area, claims in CLAIMS:
        out.append(f"\n## {area}\n")
        for name, extract, index in claims:
            out.extend(claim(name, extract, index))
        if area == "Fine-tuning speed and quality":
            out.extend(defaults_section())
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    return page_main(argv, __doc__, PAGE, render, "results_page.py")


if __name__ == "__main__":
    raise SystemExit(main())
