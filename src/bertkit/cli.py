"""The ``bertkit`` command. Thin: parse arguments, call the library, print. No logic a Python user lacks.

Every ``BertkitError`` (bad input, missing files, invalid options) becomes one line on stderr and exit
code 2; typer's own usage errors also exit with 2.
"""

from __future__ import annotations

import sys

import typer

from bertkit.errors import BertkitError

app = typer.Typer(
    name="bertkit",
    help="BERT from scratch: WordPiece, pre-training, fine-tuning, inference and Hugging Face interop.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def fail(message: str) -> None:
    """Stop the command with one clear line and exit code 2."""
    raise BertkitError(message)


def main(argv: list[str] | None = None) -> int:
    try:
        app(args=argv, standalone_mode=False)
    except BertkitError as exc:
        print(f"bertkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bertkit: interrupted", file=sys.stderr)
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # click usage errors and friends
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            return 2
        if isinstance(exc, click.exceptions.Abort):
            return 1
        raise
    return 0


# ------------------------------------------------------------------------------------------ commands
# Subcommands are registered below, one block per library area, each calling the library.


# ---------------------------------------------------------------------------------------- inference
def read_lines(path: str) -> list[str]:
    """Non-empty lines of a UTF-8 text file, or of stdin when ``path`` is ``-``."""
    from pathlib import Path

    if path == "-":
        return [line.rstrip("\r\n") for line in sys.stdin if line.strip()]
    file = Path(path)
    if not file.exists():
        fail(f"input file {path} does not exist")
    if not file.is_file():
        fail(f"input {path} is a directory, not a file; give a text file with one input per line")
    try:
        lines = [line.rstrip("\r\n") for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as exc:
        fail(f"{path} is not UTF-8 text (byte {exc.start}); convert it to UTF-8 first")
    if not lines:
        fail(f"{path} is empty: give one input per line")
    return lines


@app.command("embed")
def embed_command(
    model: str = typer.Option(..., "--model", "-m", help="Model directory (Hugging Face layout)."),
    input: str = typer.Option(..., "--input", "-i", help="Text file, one text (or TAB-separated pair) per line; - for stdin."),
    output: str = typer.Option(..., "--output", "-o", help="Where to write the embeddings (.npy, float32, one row per line)."),
    pooling: str = typer.Option("cls", help="cls | mean: how token vectors become one vector per line."),
    layers: str = typer.Option("-1", help="Comma-separated hidden layers to concatenate, -1 = last."),
    batch_size: int = typer.Option(32, help="Texts per forward pass."),
    max_length: int = typer.Option(None, help="Truncate inputs to this many tokens (default: the model's maximum)."),
    normalize: bool = typer.Option(False, help="L2-normalise every vector."),
) -> None:
    """Extract contextual embeddings (feature extraction) for one text per line into a .npy file.

    Example: bertkit embed --model ./minilm --input sentences.txt --output vectors.npy --pooling mean --layers -1,-2
    """
    import numpy as np

    from bertkit.inference import embed, load
    from bertkit.io import atomic_path

    if not output.endswith(".npy"):
        fail(f"--output must end with .npy, got {output}")
    if pooling not in ("cls", "mean"):
        fail(f"--pooling must be cls or mean, got {pooling}")
    lines = read_lines(input)
    texts = [tuple(line.split("\t", 1)) if "\t" in line else line for line in lines]
    loaded = load(model, head="BertModel")
    vectors = embed(texts, loaded, pooling=pooling, layers=layers, batch_size=batch_size,
                    max_length=max_length, normalize=normalize, progress=True)
    with atomic_path(output) as tmp:
        np.save(tmp, vectors.astype(np.float32))
    print(f"wrote {vectors.shape[0]} x {vectors.shape[1]} embeddings to {output}", file=sys.stderr)


# ---------------------------------------------------------------------------------------- pretrain (training)
@app.command("pretrain")
def pretrain_command(
    config: str = typer.Option(None, "--config", "-c", help="TOML/YAML file with any of these options (flags win)."),
    data: str = typer.Option(None, "--data", help="Prepared dataset directory (bertkit prepare-data)."),
    model_config: str = typer.Option(None, "--model-config", help="Preset tiny|mini|small|medium|base|large or a config.json [mini]."),
    output: str = typer.Option(None, "--output", "-o", help="Run directory: checkpoints, metrics, final/ model."),
    init_from: str = typer.Option(None, "--init-from", help="Start from these weights (phase 2 / continued pre-training)."),
    micro_batch_size: int = typer.Option(None, help="Sequences per forward/backward pass per process [32]."),
    global_batch_size: int = typer.Option(None, help="Sequences per update over all processes; accumulation is derived."),
    grad_accum_steps: int = typer.Option(None, help="Micro-batches per update (instead of --global-batch-size)."),
    lr: float = typer.Option(None, help="Peak learning rate [1e-4]."),
    warmup_steps: int = typer.Option(None, help="Linear warmup updates."),
    warmup_ratio: float = typer.Option(None, help="Warmup as a fraction of --max-steps."),
    max_steps: int = typer.Option(None, help="Optimizer updates to run."),
    max_time: str = typer.Option(None, help="Wall-clock budget over all resumed runs: 3600, 90m, 8h, 1d."),
    optimizer: str = typer.Option(None, help="adamw | lamb [adamw]."),
    schedule: str = typer.Option(None, help="linear | poly | cosine | constant [linear]."),
    weight_decay: float = typer.Option(None, help="Decoupled weight decay (not on biases/LayerNorm) [0.01]."),
    clip_grad_norm: float = typer.Option(None, help="Global gradient-norm clip, 0 = off [1.0]."),
    precision: str = typer.Option(None, help="auto | fp32 | bf16 | fp16 [auto: bf16 on GPU, fp32 on CPU]."),
    seed: int = typer.Option(None, help="Seed of init, dropout and data order [42]."),
    eval_every: int = typer.Option(None, help="Evaluate on the held-out split every N updates."),
    eval_batches: int = typer.Option(None, help="Held-out batches per evaluation [50]."),
    save_every: int = typer.Option(None, help="Checkpoint every N updates (also at the end and on SIGTERM/SIGINT)."),
    keep_last: int = typer.Option(None, help="Checkpoints kept [3]."),
    log_every: int = typer.Option(None, help="Log metrics every N updates [10]."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest valid checkpoint in --output."),
    resume_from: str = typer.Option(None, "--resume-from", help="Continue from this checkpoint directory."),
    device: str = typer.Option(None, help="cpu | cuda | cuda:N [this process's GPU, else CPU]."),
    num_workers: int = typer.Option(None, help="Data-loader workers per process [0]."),
    attn_implementation: str = typer.Option(None, help="sdpa | eager attention [sdpa]."),
    progress: bool = typer.Option(True, help="Show a progress bar."),
) -> None:
    """Pre-train BERT (masked LM + next sentence) on a prepared dataset; resumable, multi-process with torchrun.

    Example: bertkit pretrain --data data/wiki128 --model-config mini --output runs/mini --global-batch-size 256
    --micro-batch-size 64 --lr 1e-4 --warmup-steps 1000 --max-steps 20000 --save-every 1000 --eval-every 1000
    """
    from bertkit.training.pretrain import build_config, pretrain, read_config_file

    options = read_config_file(config) if config else {}
    flags = dict(data=data, model_config=model_config, output=output, init_from=init_from,
                 micro_batch_size=micro_batch_size, global_batch_size=global_batch_size,
                 grad_accum_steps=grad_accum_steps, lr=lr, warmup_steps=warmup_steps, warmup_ratio=warmup_ratio,
                 max_steps=max_steps, max_time=max_time, optimizer=optimizer, schedule=schedule,
                 weight_decay=weight_decay, clip_grad_norm=clip_grad_norm, precision=precision, seed=seed,
                 eval_every=eval_every, eval_batches=eval_batches, save_every=save_every, keep_last=keep_last,
                 log_every=log_every, device=device, num_workers=num_workers,
                 attn_implementation=attn_implementation)
    options.update({k: v for k, v in flags.items() if v is not None})
    if resume and resume_from:
        fail("give --resume or --resume-from, not both")
    if resume or resume_from:
        options["resume"] = resume_from or "auto"
    if not progress:
        options["progress"] = False
    result = pretrain(build_config(options))
    if result.stop_reason == "signal":
        print(f"bertkit: stopped by a signal at step {result.step}; checkpoint {result.checkpoint}. "
              "Continue with the same command plus --resume.", file=sys.stderr)
        raise typer.Exit(130)


# --------------------------------------------------------------------------------------------- data
@app.command("prepare-data")
def prepare_data_command(
    input: list[str] = typer.Option(..., "--input", "-i", help="Files, directories or globs (repeatable)."),
    tokenizer: str = typer.Option(..., "--tokenizer", "-t", help="Tokenizer directory, vocab.txt or tokenizer.json."),
    output: str = typer.Option(..., "--output", "-o", help="Dataset directory to write."),
    max_seq_length: int = typer.Option(128, help="Longest instance, special tokens included."),
    dupe_factor: int = typer.Option(10, help="Passes over the corpus, each with new pairs and masks."),
    short_seq_prob: float = typer.Option(0.1, help="Probability of a short target length per document and pass."),
    masked_lm_prob: float = typer.Option(0.15, help="Fraction of tokens to predict."),
    max_predictions_per_seq: int = typer.Option(None, help="Cap per instance (default round(max_seq_length * masked_lm_prob))."),
    masking: str = typer.Option("static", help="static: masks stored in the shards (BERT); dynamic: drawn per epoch (RoBERTa)."),
    whole_word_mask: bool = typer.Option(False, "--whole-word-mask", help="Mask all pieces of a word together."),
    seed: int = typer.Option(12345, help="Seed of every random choice."),
    workers: int = typer.Option(None, help="Worker processes (default: all cores)."),
    eval_fraction: float = typer.Option(0.01, help="Share of documents held out as the eval split."),
    format: str = typer.Option("auto", help="auto | lines (a sentence per line, blank line between documents) | prose | jsonl."),
    text_field: str = typer.Option("text", help="JSONL key holding the text."),
    keep_gutenberg_boilerplate: bool = typer.Option(False, help="Do not strip Project Gutenberg headers/footers."),
    block_mb: float = typer.Option(4.0, help="MB of text per block (unit of parallelism and of random-next sampling)."),
    shard_index: int = typer.Option(0, help="This job's index when several independent jobs share the corpus."),
    num_shards: int = typer.Option(1, help="Number of independent jobs writing into the same --output."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Turn a raw corpus into sharded, memory-mapped MLM+NSP pre-training data (BERT's algorithm, all cores).

    Example: bertkit prepare-data --input ../shared/data/gutenberg/books --tokenizer ./tok --output ./data128
    --max-seq-length 128 --dupe-factor 5 --masking static --seed 1 --workers 8
    """
    import logging

    from bertkit.data import CorpusOptions, PrepareConfig, prepare_dataset

    logging.basicConfig(format="bertkit: warning: %(message)s", level=logging.WARNING)
    config = PrepareConfig(
        inputs=input, output=output, tokenizer=tokenizer, max_seq_length=max_seq_length, dupe_factor=dupe_factor,
        short_seq_prob=short_seq_prob, masked_lm_prob=masked_lm_prob, max_predictions_per_seq=max_predictions_per_seq,
        masking=masking, whole_word_mask=whole_word_mask, seed=seed, workers=workers, eval_fraction=eval_fraction,
        block_bytes=max(1, int(block_mb * (1 << 20))), shard_index=shard_index, num_shards=num_shards,
        corpus=CorpusOptions(format=format, text_field=text_field, strip_gutenberg=not keep_gutenberg_boilerplate),
    )
    meta = prepare_dataset(config, progress=not quiet)
    train, held = meta["splits"]["train"], meta["splits"]["eval"]
    state = "complete" if meta["complete"] else f"{len(meta['blocks'])} of {meta['expected_blocks']} blocks so far"
    print(f"wrote {train['num_instances']} train + {held['num_instances']} eval instances "
          f"({train['num_tokens'] + held['num_tokens']} tokens) to {output} ({state})", file=sys.stderr)
