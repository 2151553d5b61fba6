"""``bench_time_to_quality``'s results turned into the docs: the table and summary of the curves, the plot,
the recipes section of docs/pretraining.md (``--doc``) and runs of other seeds merged (``--merge``)."""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
from pathlib import Path
from typing import Any

from harness import RESULTS, ROOT, write_json
from time_to_quality_downstream import TASKS


def time_to(curve: list[dict[str, float]], target: float) -> float | None:
    """Seconds at which the curve first reaches ``target`` (linear between points); None if never."""
    previous = None
    for point in curve:
        if point["mlm_acc"] >= target:
            if previous is None or point["mlm_acc"] == previous["mlm_acc"]:
                return point["seconds"]
            share = (target - previous["mlm_acc"]) / (point["mlm_acc"] - previous["mlm_acc"])
            return round(previous["seconds"] + share * (point["seconds"] - previous["seconds"]), 2)
        previous = point
    return None


def table(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Time of each side to reach the final accuracy of each transformers run, and the two goals, seed by seed:
    the i-th run of a side against the i-th run of the peer. ``seconds`` holds the first seed's times; a goal is
    met when every seed meets it, and its ``ratio`` is the mean over seeds."""
    out: dict[str, Any] = {}
    for reference in ("hf-mlm", "hf-pretraining"):
        if reference not in results:
            continue
        per_seed = [
            {
                "seed": peer_run["seed"],
                "target_mlm_acc": peer_run["final"],
                "seconds": {
                    side: time_to(runs[i]["curve"], peer_run["final"])
                    for side, runs in results.items()
                    if i < len(runs)
                },
            }
            for i, peer_run in enumerate(results[reference])
        ]
        first = per_seed[0]
        out[reference] = {"target_mlm_acc": first["target_mlm_acc"], "seconds": first["seconds"], "per_seed": per_seed}
    goals = {}
    for mine, peer, share in (("bertkit-modern", "hf-mlm", 1 / 4), ("bertkit-bert", "hf-pretraining", 1 / 3)):
        if mine in results and peer in out:
            ratios = [_ratio(row["seconds"].get(mine), row["seconds"][peer]) for row in out[peer]["per_seed"]]
            known = [r for r in ratios if r is not None]
            ratio = statistics.mean(known) if ratios and len(known) == len(ratios) else None
            met = ratio is not None and max(known) <= share
            goals[f"{mine} vs {peer}"] = {"ratio": ratio, "ratios": ratios, "goal": share, "met": met}
    out["goals"] = goals
    return out


def _ratio(own: float | None, theirs: float | None) -> float | None:
    return own / theirs if own is not None and theirs else None


def summary(results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Mean and sd over seeds of the final accuracy, and the mean curve, per variant."""
    out = {}
    for side, runs in results.items():
        finals = [r["final"] for r in runs]
        out[side] = {
            "final_mean": round(statistics.mean(finals), 5),
            "final_sd": round(statistics.stdev(finals), 5) if len(finals) > 1 else 0.0,
            "steps_mean": round(statistics.mean(r["steps"] for r in runs), 1),
        }
    return out


def plot(results: dict[str, list[dict[str, Any]]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for side, runs in results.items():
        for i, run in enumerate(runs):
            xs = [p["seconds"] for p in run["curve"]]
            ys = [p["mlm_acc"] for p in run["curve"]]
            ax.plot(xs, ys, marker=".", label=side if i == 0 else None, color=f"C{list(results).index(side)}")
    ax.set_xlabel("seconds of training")
    ax.set_ylabel("held-out MLM accuracy (15 % masked)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------ the docs section
DOC = ROOT / "docs" / "pretraining.md"
DOWNSTREAM = "time_to_quality_downstream"
"""The result file of a run with ``--downstream`` whose fine-tuning scores the section shows."""
BEGIN, END = "<!-- recipes: begin (python benchmarks/bench_time_to_quality.py --doc) -->", "<!-- recipes: end -->"


def _seconds(value: float | None) -> str:
    return "not reached" if value is None else f"{value:.0f} s"


def _where(result: dict[str, Any]) -> str:
    if "merged" in result:
        parts = "; ".join(_where(part) for part in result["merged"])
        return f"{len(result['merged'])} runs merged by `{result['command']}`: {parts}"
    info = result["machine"]
    load = ", ".join(f"{x:.1f}" for x in info.get("load_average") or [])
    return f"`{result['command']}` on {info['cpu']} ({info['cpu_features']}), load average {load} at the end; {result['note']}"


def downstream_lines(result: dict[str, Any]) -> list[str]:
    """The fine-tuning scores of a ``--downstream`` result: a row per side, mean ± sample sd over seeds."""
    down = result["downstream"]
    settings = down["settings"]
    tasks = []
    if "polarity" in settings:
        pol = settings["polarity"]
        sentences = next(r["polarity"]["train_examples"] for r in down["results"].values() if "polarity" in r)
        tasks.append(
            f"sentence polarity on {sentences:,} sentences of `{pol['train']}`, {pol['epochs']:g} epochs at "
            f"{pol['lr']:g}, accuracy on {pol['dev_examples']:,} dev sentences"
        )
    if "punctuation" in settings:
        punc = settings["punctuation"]
        tasks.append(
            f"punctuation restoration on {punc['train_examples']:,} windows of `{punc['text']}`, {punc['epochs']:g} "
            f"epochs at {punc['lr']:g}, F1 of the marks on {punc['dev_examples']:,} dev windows"
        )
    lines = [
        f"Each side's final weights from a run of {result['settings']['budget']:g} s a side, and the same network "
        f"at random initialisation, fine-tuned the way the demo fine-tunes (`bertkit.demo.finetuning`, batch "
        f"{settings['batch']}, {settings['max_seq_length']} tokens): {'; '.join(tasks)}. Each score is the dev "
        f"score after the last epoch, mean ± sample sd over seeds {', '.join(map(str, settings['seeds']))}. "
        f"Pre-training measured with {_where(result)}; fine-tuning with "
        f"{'; '.join(_where(run) for run in down['runs'])}.",
        "",
        "| side | pre-training updates | held-out MLM accuracy | polarity accuracy | punctuation F1 |",
        "|---|---|---|---|---|",
    ]
    for side, row in down["results"].items():
        run = result["results"][side][0] if side in result["results"] else None
        updates, mlm = (str(run["steps"]), f"{run['final']:.4f}") if run else ("0", "")
        scores = [_scores(row.get(task), len(settings["seeds"])) for task in TASKS]
        lines.append(f"| {side} | {updates} | {mlm} | {' | '.join(scores)} |")
    return [*lines, ""]


def _scores(row: dict[str, Any] | None, seeds: int) -> str:
    if row is None:
        return "not run"
    cell = f"{row['mean']:.4f} ± {row['sd']:.4f}"
    return cell if len(row["seeds"]) == seeds else f"{cell} (seeds {', '.join(map(str, row['seeds']))})"


def _updates(runs: list[dict[str, Any]]) -> str:
    return ", ".join(str(run["steps"]) for run in runs)


def _finals(runs: list[dict[str, Any]]) -> str:
    finals = [run["final"] for run in runs]
    return f"{finals[0]:.4f}" if len(finals) == 1 else f"{statistics.mean(finals):.4f} ± {statistics.stdev(finals):.4f}"


def _times(reference: dict[str, Any] | None, side: str) -> str:
    """The seconds ``side`` took to reach the peer's final accuracy, seed by seed."""
    if reference is None:
        return "not run"
    return " / ".join(_seconds(row["seconds"].get(side)) for row in reference["per_seed"])


def _goal_line(name: str, goal: dict[str, Any]) -> str:
    verdict = "met" if goal["met"] else "missed"
    ratios = goal["ratios"]
    if goal["ratio"] is None:
        ratio = "never reached" if len(ratios) == 1 else "not reached on every seed"
    elif len(ratios) == 1:
        ratio = f"{goal['ratio']:.2f} of the peer's time"
    else:
        each = ", ".join(f"{r:.2f}" for r in ratios)
        ratio = f"{goal['ratio']:.2f} of the peer's time, the mean of seeds at {each}"
        verdict = f"{verdict} on every seed" if goal["met"] else f"{verdict} on at least one seed"
    return f"- {name}: {ratio} (goal at most {goal['goal']:.2f}): {verdict}."


def render_section(
    ttq: dict[str, Any] | None, ablation: dict[str, Any] | None, downstream: dict[str, Any] | None = None
) -> str:
    """The recipes section of docs/pretraining.md, from the result files."""
    lines = [BEGIN, ""]
    if ttq is not None:
        table_ = ttq["table"]
        lines += [
            f"Held-out MLM accuracy against seconds of training, every side with the same corpus, vocabulary, "
            f"`{ttq['settings']['model']}` model, seed, {ttq['settings']['threads']} thread(s) and a budget of "
            f"{ttq['settings']['budget']:g} s ({ttq['heldout']['masked']} masked positions of one held-out book). "
            f"Measured with {_where(ttq)}.",
            "",
            "| side | updates | final accuracy | time to the transformers MLM run's final | "
            "time to BertForPreTraining's final |",
            "|---|---|---|---|---|",
        ]
        for side, runs in ttq["results"].items():
            times = [_times(table_.get(peer), side) for peer in ("hf-mlm", "hf-pretraining")]
            lines.append(f"| {side} | {_updates(runs)} | {_finals(runs)} | {' | '.join(times)} |")
        lines.append("")
        lines += [_goal_line(name, goal) for name, goal in table_["goals"].items()]
        lines += ["", "![time to quality](../benchmarks/results/time_to_quality.png)", ""]
    if downstream is not None and "downstream" in downstream:
        lines += downstream_lines(downstream)
    if ablation is not None:
        summary_ = ablation["summary"]
        base = summary_.get("bert (paper)")
        lines += [
            f"Each option alone on top of the paper's recipe, {ablation['settings']['budget']:g} s a run, seeds "
            f"{', '.join(map(str, ablation['settings']['seeds']))}: final held-out MLM accuracy, mean ± sd. Measured "
            f"with {_where(ablation)}.",
            "",
            "| recipe | updates (mean) | final accuracy | vs the paper's recipe |",
            "|---|---|---|---|",
        ]
        for side, row in summary_.items():
            delta = "" if base is None or side == "bert (paper)" else f"{row['final_mean'] - base['final_mean']:+.4f}"
            lines.append(
                f"| {side} | {row['steps_mean']:g} | {row['final_mean']:.4f} ± {row['final_sd']:.4f} | {delta} |"
            )
        lines += ["", "![recipe ablation](../benchmarks/results/recipe_ablation.png)", ""]
    return "\n".join([*lines, END])


def write_doc(check: bool) -> int:
    """Put the section between its markers in docs/pretraining.md (``check``: exit 1 if it differs)."""
    results = [RESULTS / f"{name}.json" for name in ("time_to_quality", "recipe_ablation", DOWNSTREAM)]
    ttq, ablation, downstream = (json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None for p in results)
    text = DOC.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = head + render_section(ttq, ablation, downstream) + tail
    if check:
        return int(new != text)
    DOC.write_text(new, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


SAME_SETTINGS = ("ablation", "budget", "calibrate", "model", "seq", "batch", "lr", "vocab_size", "dupe_factor",
                 "heldout_book", "heldout_blocks", "threads", "clock", "seed")  # fmt: skip
"""The settings runs must share to be merged: everything but the training seeds and the note."""


def merge(paths: list[Path], output: Path, argv: list[str]) -> dict[str, Any]:
    """One result from the runs of ``paths`` (the same settings, other seeds: one run per core or machine), with
    the summary, table and curves computed over all their seeds."""
    parts = [json.loads(path.read_text(encoding="utf-8")) for path in paths]
    first = parts[0]
    for path, part in zip(paths[1:], parts[1:], strict=True):
        differ = [k for k in SAME_SETTINGS if part["settings"].get(k) != first["settings"].get(k)]
        if differ or list(part["results"]) != list(first["results"]):
            what = ", ".join(differ) or "sides"
            raise SystemExit(f"--merge: {path} differs from {paths[0]} in {what}; merge runs of the same settings only")
    results = {side: [run for part in parts for run in part["results"][side]] for side in first["results"]}
    seeds = [run["seed"] for run in next(iter(results.values()))]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"--merge: the files repeat a seed ({seeds}); merge runs of other seeds")
    ablation = first["settings"]["ablation"]
    payload = {
        "command": "python benchmarks/bench_time_to_quality.py " + shlex.join(argv),
        "merged": [{key: part[key] for key in ("command", "machine", "note")} for part in parts],
        "machine": first["machine"],
        "note": "; ".join(part["note"] for part in parts),
        "settings": {**first["settings"], "seeds": seeds},
        "heldout": first["heldout"],
        "pace_updates_per_s": [part["pace_updates_per_s"] for part in parts],
        "summary": summary(results),
        "table": None if ablation else table(results),
        "results": results,
    }
    write_json(output, payload)
    settings = first["settings"]
    plot(results, output.with_suffix(".png"), f"{settings['model']}, {settings['threads']} thread(s), "
         f"{settings['budget']:g} s a side, seeds {', '.join(map(str, seeds))}")  # fmt: skip
    return payload


def print_merged(payload: dict[str, Any]) -> int:
    print(json.dumps(payload["table"] or payload["summary"], indent=1))
    return 0


def result_file_options(parser: argparse.ArgumentParser) -> None:
    """What is done with result files instead of a run: the docs section, and merging runs of other seeds."""
    parser.add_argument("--doc", action="store_true", help="write the recipes section of docs/pretraining.md")
    parser.add_argument("--check", action="store_true", help="with --doc: exit 1 if the section is out of date")
    parser.add_argument(
        "--merge", nargs="+", type=Path, default=None, help="result files of other seeds to merge into --output"
    )
