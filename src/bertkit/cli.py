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
