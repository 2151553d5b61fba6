"""``bench_distill``'s results: the plot, the table and runs merged from several result files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness import ROOT, output_path, write_json


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = results["families"]
    figure, axes = plt.subplots(1, len(families), figsize=(5 * len(families), 4), squeeze=False)
    for axis, (family, entry) in zip(axes[0], families.items()):
        metric = entry["metric"]
        for name, row in entry["models"].items():
            for precision, marker in (("float32", "o"), ("int8", "^")):
                point = row[precision]
                score = point["metrics"].get(metric)
                if score is None:
                    continue
                colour = "black" if name == "teacher" else ("tab:blue" if "distilled" in name else "tab:orange")
                axis.scatter(point["examples_per_second"], score, marker=marker, color=colour)
                if precision == "float32":
                    axis.annotate(name, (point["examples_per_second"], score), fontsize=7)
        axis.set_title(f"{family} ({metric})")
        axis.set_xlabel("dev examples per second (ONNX Runtime; o float32, ^ int8)")
        axis.set_ylabel(metric)
        axis.set_xscale("log")
    figure.suptitle("Distilled (blue) and directly fine-tuned (orange) students of all-MiniLM-L6-v2 (black)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def table(results: dict[str, Any]) -> str:
    """Markdown: per family and model, the dev score against the teacher's and against the same student
    fine-tuned directly, and the throughput against the teacher's in float32 (float32 and int8, ONNX Runtime,
    end to end and the model alone)."""
    lines = []
    for family, entry in results["families"].items():
        metric, models = entry["metric"], entry["models"]
        teacher = models["teacher"]["float32"]
        lines += [
            f"**{family}** ({entry['train_examples']} training examples, {entry['epochs']} epoch(s); dev "
            f"{metric} on {teacher['examples']} examples)",
            "",
            f"| model | {metric} | of teacher | vs direct (points) | ex/s float32 | ÷ teacher float32 | ex/s int8 | "
            "÷ teacher float32 | model alone: float32, int8 ÷ teacher float32 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [_table_row(name, models, metric, teacher) for name in models]
        lines.append("")
    for speed in results.get("speed_per_student") or ([results["speed"]] if results.get("speed") else []):
        lines.append(
            f"Speed per epoch ({speed['examples']} SST-2 examples, student {speed['student']}): bertkit "
            f"{speed['bertkit_seconds']} s, the transformers loop {speed['transformers_seconds']} s "
            f"({speed['speedup']}x)."
        )
    return "\n".join(lines) + "\n"


def _table_row(name: str, models: dict[str, Any], metric: str, teacher: dict[str, Any]) -> str:
    row = models[name]
    score = row["float32"]["metrics"][metric]
    base = teacher["metrics"][metric]
    direct = models.get(name.split("-")[0] + "-direct")
    gain = f"{100 * (score - direct['float32']['metrics'][metric]):+.1f}" if "distilled" in name and direct else ""
    fp32, int8 = row["float32"], row["int8"]

    def ratio(point: dict[str, Any], key: str = "examples_per_second") -> str:
        return f"{point[key] / teacher[key]:.2f}x" if point.get(key) and teacher.get(key) else ""

    alone = f"{ratio(fp32, 'model_examples_per_second')}, {ratio(int8, 'model_examples_per_second')}"
    return (
        f"| {name} | {score:.3f} | {score / base if base else float('nan'):.1%} | {gain} | "
        f"{fp32['examples_per_second']} | {ratio(fp32)} | {int8['examples_per_second']} | {ratio(int8)} | "
        f"{alone if fp32.get('model_examples_per_second') else ''} |"
    )


def merge_and_plot(args: argparse.Namespace) -> int:
    """``--plot-only``: the families of ``--merge`` added to ``--output``'s result, and the plot of them all."""
    out = output_path(args, Path(ROOT / "benchmarks" / "results" / "distill.json"))
    results = json.loads(out.read_text(encoding="utf-8"))
    if args.merge:
        other = json.loads(Path(args.merge).read_text(encoding="utf-8"))
        for family, entry in other["families"].items():
            results["families"][family] = {**entry, "machine": other["machine"]}
        write_json(out, results)
    plot(results, Path(args.plot))
    print(table(results), end="")
    return 0
