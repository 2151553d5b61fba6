"""The fine-tuning defaults section (bench_finetune_defaults.py: one JSON line per run): before against after,
set by set, then the searches."""

from __future__ import annotations

import json
import statistics
import textwrap

from results_render import machine, num, spread
from results_sources import result_path

DEFAULTS_FILE = "finetune_defaults.jsonl"
DEFAULTS_COMMAND = (
    "python benchmarks/bench_finetune_defaults.py --sets SET --recipes fixed,rule --seeds 1,2,3 --threads 1 "
    "--output benchmarks/results/finetune_defaults.jsonl"
)


DEFAULTS_SETS = {  # what the result rows name by a short key
    "rte": "RTE (2,490 examples)",
    "mrpc": "MRPC (3,668)",
    "stsb": "STS-B (5,749)",
    "conll": "CoNLL-2003 (14,041)",
    "sst2-1k": "SST-2, first 1,000",
    "sst2-3k": "SST-2, first 3,000",
    "conll-1k": "CoNLL-2003, first 1,000",
    "conll-3k": "CoNLL-2003, first 3,000",
}


def defaults_section() -> list[str]:
    """Before (batch 32, 3 epochs) against after (sized to the set), set by set; then the searches."""
    path = result_path(DEFAULTS_FILE)
    if not path.is_file():
        return []
    runs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = [
        "\n## Fine-tuning defaults\n",
        "all-MiniLM-L6-v2 fine-tuned with batch 32 for 3 epochs (the paper's recipe, and the defaults before the",
        "size rule) and with nothing given (batch and epochs sized to the set: [finetuning.md](finetuning.md)),",
        f"lr 5e-5, dev metric of the kept epoch, mean ± sd over seeds. Command: `{DEFAULTS_COMMAND}`",
        f"on {machine(runs[0]['machine'])}; raw result [{DEFAULTS_FILE}](../benchmarks/results/{DEFAULTS_FILE}).\n",
        "| training set | metric | batch 32, 3 epochs | sized to the set | after - before | seconds before / after |",
        "|---|---|---|---|---|---|",
    ]
    sets = list(dict.fromkeys(r["set"] for r in runs if r["recipe"] in ("fixed", "rule")))
    for name in sets:
        before = [r for r in runs if r["set"] == name and r["recipe"] == "fixed"]
        after = [r for r in runs if r["set"] == name and r["recipe"] == "rule"]
        if not before or not after:
            continue
        metric = {"ner": "entity F1", "regression": "Pearson"}.get(before[0]["task"], "accuracy")

        def cell(rows: list[dict]) -> str:
            return f"{spread([r['best'] for r in rows])}; batch {rows[0]['batch_size']}, {rows[0]['epochs']:g} epochs, {rows[0]['updates']:,} updates"

        seeds = sorted({r["seed"] for r in before} & {r["seed"] for r in after})
        paired = [
            next(a["best"] for a in after if a["seed"] == s) - next(b["best"] for b in before if b["seed"] == s)
            for s in seeds
        ]
        gain = f"{statistics.mean(paired):+.3f}" + (
            f" ({sum(d > 0 for d in paired)} of {len(paired)} seeds up)" if len(paired) > 1 else ""
        )
        seconds = f"{num(statistics.mean(r['seconds'] for r in before), 0)} / {num(statistics.mean(r['seconds'] for r in after), 0)}"
        out.append(
            f"| {DEFAULTS_SETS.get(name, name)} | {metric} | {cell(before)} | {cell(after)} | {gain} | {seconds} |"
        )
    paragraphs = [
        "CoNLL-2003 (14,041) and SST-2 (67,349) keep batch 32 and 3 epochs under the rule (1,317 and 6,315 updates;"
        " `tests/test_finetune_defaults.py`), so their runs are the ones in the table above. Seconds include loading"
        " and the dev evaluations; two runs shared the 2 cores, one thread each."
    ]
    for row in (r for r in runs if r["recipe"] == "search"):
        grid = ", ".join(f"{k} {'/'.join(f'{v:g}' for v in values)}" for k, values in row["grid"].items())
        tried = "; ".join(
            f"{run['name']} ({', '.join(f'{k} {v:g}' for k, v in run['params'].items())}): {run['metric']:.3f} in {run['seconds']:.0f} s"
            for run in row["runs"]
        )
        single = [r for r in runs if (r["set"], r["recipe"], r["seed"]) == (row["set"], "rule", row["seed"])]
        against = (
            f" One run with the defaults (batch {single[0]['batch_size']}, {single[0]['epochs']:g} epochs), same seed: "
            f"{single[0]['best']:.3f} in {single[0]['seconds']:.0f} s."
            if single
            else ""
        )
        paragraphs.append(
            f"Search on {DEFAULTS_SETS.get(row['set'], row['set'])} (seed {row['seed']}, grid {grid}, batch sized to the"
            f" set; `python benchmarks/bench_finetune_defaults.py --sets {row['set']} --recipes search --grid "
            f"'{json.dumps(row['grid'])}'`): {tried}. Winner {row['winner']}, dev {row['best']:.3f}, the whole search "
            f"{row['seconds']:.0f} s ({machine(row['machine'])}).{against}"
        )
    for paragraph in paragraphs:
        out.extend(["", *textwrap.wrap(paragraph, 116, break_long_words=False, break_on_hyphens=False)])
    return out
