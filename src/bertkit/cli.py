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
