"""Pre-training data preparation: bertkit vs Hugging Face, same corpus and vocabulary, in one run.

bertkit: ``prepare_dataset`` on the whole shared Gutenberg corpus (max_seq_length 128, dupe_factor 5,
static masks, all cores). Peer: transformers' ``TextDatasetForNextSentencePrediction`` (one pass, it has
no dupe factor) followed by ``DataCollatorForLanguageModeling`` over every example, fed the SAME cleaned,
sentence-split text in BERT's line format (bertkit's reader + BlingFire), with ``BertTokenizerFast`` on
the same ``vocab.txt``. Each side runs in its own subprocess; peak RSS is the sum over the process tree,
sampled every 0.1 s. Throughputs are per second of wall time, so one peer pass compares with five of ours.

    .venv/bin/python benchmarks/bench_prepare_data.py [--peer-books N] [--times 10]

Writes ``benchmarks/results/prepare_data.json`` (``--output`` to choose). ``--smoke``: a slice of a shipped book,
twice, on one worker, both sides in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import smoke_inputs
from harness import RESULTS, ROOT, SHARED, add_options, output_path, smoke_folder, write_json
from machine_info import record

BOOKS = SHARED / "gutenberg" / "books"
VOCAB = SHARED / "bert_vocab"


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, stack = 0, [pid]
    while stack:
        p = stack.pop()
        total += rss.get(p, 0)
        stack.extend(children.get(p, []))
    return total


def run_measured(code: str, fresh: bool = True) -> tuple[dict, int]:
    """Run ``code`` in a fresh interpreter; returns its JSON line and the peak RSS of its process tree.
    ``fresh=False`` (a smoke run) runs it in this process, where the RSS says nothing: a fresh interpreter's
    start-up, transformers' above all, would cost more than the smoke run itself."""
    if not fresh:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, {})
        return json.loads(printed.getvalue().strip().splitlines()[-1]), tree_rss(os.getpid())
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=ROOT)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.1)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    done.set()
    thread.join()
    if proc.returncode:
        raise SystemExit(f"benchmark child failed with {proc.returncode}")
    return json.loads(out.decode().strip().splitlines()[-1]), peak


BERTKIT = """
import json, time
from bertkit.data import PrepareConfig, prepare_dataset
t = time.perf_counter()
m = prepare_dataset(PrepareConfig(inputs={inputs!r}, output={output!r}, tokenizer={vocab!r}, max_seq_length=128,
                                  dupe_factor=5, seed=1, eval_fraction=0.0, workers={workers}), progress=False)
dt = time.perf_counter() - t
s = m["splits"]["train"]
print(json.dumps({{"seconds": dt, "instances": s["num_instances"], "tokens": s["num_tokens"],
                  "random_next": m["instance_stats"]["train_random_next"] / max(1, s["num_instances"]),
                  "corpus_stats": {{k: v for k, v in m["corpus_stats"].items() if k != "skipped"}}}}))
"""

PEER = """
import json, time, warnings
warnings.filterwarnings("ignore")
from transformers import BertTokenizerFast, DataCollatorForLanguageModeling, TextDatasetForNextSentencePrediction
from transformers.utils import logging
logging.set_verbosity_error()
tok = BertTokenizerFast({vocab_file!r}, do_lower_case=True)
t = time.perf_counter()
ds = TextDatasetForNextSentencePrediction(tokenizer=tok, file_path={path!r}, block_size=128, overwrite_cache=True,
                                          short_seq_probability=0.1, nsp_probability=0.5)
collator = DataCollatorForLanguageModeling(tok, mlm=True, mlm_probability=0.15)
tokens = 0
for i in range(0, len(ds), 256):
    batch = collator([ds[j] for j in range(i, min(i + 256, len(ds)))])
    tokens += int(batch["attention_mask"].sum())
dt = time.perf_counter() - t
print(json.dumps({{"seconds": dt, "instances": len(ds), "tokens": tokens}}))
"""


def segmenter_throughput(books: list[Path]) -> dict:
    """BlingFire's sentence splitting alone, in MB/s, on the paragraphs of the first ten books."""
    import blingfire

    from bertkit.data.corpus import CorpusOptions, CorpusStats, read_documents

    docs = list(read_documents(books[:10], CorpusOptions(format="prose"), CorpusStats()))
    paragraphs = [p for d in docs for p in d.texts]
    nbytes = sum(len(p.encode()) for p in paragraphs)
    t = time.perf_counter()
    n = sum(len(blingfire.text_to_sentences(p).split("\n")) for p in paragraphs)
    dt = time.perf_counter() - t
    return {
        "segmenter": f"blingfire {blingfire.__version__ if hasattr(blingfire, '__version__') else '0.1.8'}",
        "MB_per_s": nbytes / dt / 1e6,
        "sentences": n,
        "bytes": nbytes,
    }


def write_peer_corpus(books: list[Path], path: Path) -> int:
    """The corpus as bertkit reads it, in BERT's line format: a sentence per line, a blank line per book."""
    from bertkit.data.corpus import CorpusOptions, CorpusStats, document_sentences, read_documents

    size = 0
    with open(path, "w", encoding="utf-8") as f:
        for i, doc in enumerate(read_documents(books, CorpusOptions(format="prose"), CorpusStats())):
            # No trailing blank line: the peer would open an empty last document and crash drawing from it.
            text = ("\n\n" if i else "") + "\n".join(document_sentences(doc))
            size += len(text.encode())
            f.write(text)
    return size


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer-books", type=int, default=0, help="Run the peer on the first N books only (0 = all).")
    parser.add_argument("--times", type=int, default=1, help="Corpus copies for bertkit (10 = the 10x memory check).")
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--skip-peer", action="store_true")
    add_options(parser, "result file [benchmarks/results/prepare_data.json, prepare_data_x<times>.json]")
    args = parser.parse_args(argv)
    args.books, args.vocab = BOOKS, VOCAB
    if args.smoke:  # a slice of a shipped book, both sides
        args.books = smoke_inputs.corpus_slice(smoke_folder() / "books", characters=20_000)
        args.vocab, args.workers, args.times = smoke_inputs.vocab_file().parent, 1, 2
    return args


def run_ours(args: argparse.Namespace, books: list[Path], tmp: str) -> dict:
    """bertkit's ``prepare_dataset`` in a fresh process on ``--times`` copies of the books."""
    inputs = [str(args.books)]
    if args.times > 1:
        for k in range(args.times):
            copy = Path(tmp, "corpus", f"copy{k}")
            copy.mkdir(parents=True)
            for b in books:
                (copy / b.name).symlink_to(b)
        inputs = [str(Path(tmp, "corpus"))]
    code = BERTKIT.format(inputs=inputs, output=str(Path(tmp, "out")), vocab=str(args.vocab), workers=args.workers)
    ours, rss = run_measured(code, fresh=not args.smoke)
    ours.update(
        peak_rss_MB=rss / 2**20,
        instances_per_s=ours["instances"] / ours["seconds"],
        tokens_per_s=ours["tokens"] / ours["seconds"],
        corpus_MB=sum(b.stat().st_size for b in books) * args.times / 1e6,
    )
    print(
        f"bertkit: {ours['instances']} instances, {ours['tokens']} tokens in {ours['seconds']:.1f} s "
        f"({ours['instances_per_s']:.0f} inst/s, {ours['tokens_per_s'] / 1e3:.0f} k tok/s), peak RSS "
        f"{ours['peak_rss_MB']:.0f} MB",
        flush=True,
    )
    return ours


def run_peer(args: argparse.Namespace, books: list[Path], tmp: str) -> dict:
    """transformers' NSP dataset and MLM collator in a fresh process, on the same sentences."""
    peer_books = books[: args.peer_books] if args.peer_books else books
    path = Path(tmp, "peer.txt")
    size = write_peer_corpus(peer_books, path)
    peer, rss = run_measured(PEER.format(vocab_file=str(args.vocab / "vocab.txt"), path=str(path)), not args.smoke)
    peer.update(
        peak_rss_MB=rss / 2**20,
        instances_per_s=peer["instances"] / peer["seconds"],
        tokens_per_s=peer["tokens"] / peer["seconds"],
        books=len(peer_books),
        input_MB=size / 1e6,
        what="transformers 4.57 TextDatasetForNextSentencePrediction (1 pass, BertTokenizerFast) "
        "+ DataCollatorForLanguageModeling over all examples, batches of 256",
    )
    print(
        f"peer:    {peer['instances']} instances, {peer['tokens']} tokens in {peer['seconds']:.1f} s "
        f"({peer['instances_per_s']:.0f} inst/s, {peer['tokens_per_s'] / 1e3:.0f} k tok/s), peak RSS "
        f"{peer['peak_rss_MB']:.0f} MB",
        flush=True,
    )
    return peer


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not args.books.is_dir():
        raise SystemExit(f"shared data not found at {args.books}")
    books = sorted(args.books.glob("*.txt"))
    result: dict = {
        "machine": record(),
        "settings": {"max_seq_length": 128, "dupe_factor_bertkit": 5, "peer_passes": 1, "workers": args.workers},
        "segmenter": segmenter_throughput(books),
    }
    result["commit"] = result["machine"]["commit"]
    with tempfile.TemporaryDirectory() as tmp:
        ours = result["bertkit"] = run_ours(args, books, tmp)
        if not args.skip_peer:
            peer = result["peer"] = run_peer(args, books, tmp)
            result["ratio"] = {
                "instances_per_s": ours["instances_per_s"] / peer["instances_per_s"],
                "tokens_per_s": ours["tokens_per_s"] / peer["tokens_per_s"],
                "peak_rss": ours["peak_rss_MB"] / peer["peak_rss_MB"],
            }
            print(
                f"ratio:   {result['ratio']['tokens_per_s']:.1f}x tokens/s, {result['ratio']['peak_rss']:.2f}x memory",
                flush=True,
            )
    name = "prepare_data.json" if args.times == 1 else f"prepare_data_x{args.times}.json"
    print(f"wrote {write_json(output_path(args, RESULTS / name), result, indent=2)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
