"""The ``bertkit`` program: the root app the command groups join, ``main()``, and how a failure becomes an
exit code and one line on stderr.

Every ``BertkitError`` (bad input, missing files, invalid options) becomes one line on stderr and exit
code 2; typer's own usage errors also exit with 2; Ctrl-C exits with 130.
"""

from __future__ import annotations

import signal
import sys
from typing import NoReturn, Protocol

import typer

from bertkit.errors import BertkitError

app = typer.Typer(
    rich_markup_mode=None,
    name="bertkit",
    help="BERT from scratch: WordPiece, pre-training, fine-tuning, inference and Hugging Face interop.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def stopped_by_signal(signum: int | None, message: str) -> NoReturn:
    """A run a signal stopped (its checkpoint written): ``message`` on stderr and the exit code shells use for
    that signal, 128 + its number (130 for SIGINT, 143 for SIGTERM), so that a script never takes it for a
    finished run."""
    print(f"bertkit: {message}", file=sys.stderr)
    raise typer.Exit(128 + (signum or signal.SIGINT))


def fail(message: str) -> NoReturn:
    """Stop the command with one clear line and exit code 2."""
    raise BertkitError(message)


# Options whose --help welcomes globs: an unquoted `-i books/*.txt` reaches us as `-i a.txt b.txt c.txt`.
_PATH_LISTS = {
    ("prepare-data",): ("--input", "-i"),
    ("tokenizer", "train"): ("--input", "-i"),
    ("tokenizer", "extend"): ("--corpus",),
}


def spread_paths(argv: list[str]) -> list[str]:
    """``argv`` with the paths a shell expanded from one glob each given their own flag: ``-i a b`` ->
    ``-i a -i b``, for the commands of ``_PATH_LISTS`` (they take no positional arguments, so a bare word
    after their path option's value can only be one more path)."""
    for command, flags in _PATH_LISTS.items():
        if tuple(argv[: len(command)]) != command:
            continue
        out, flag = list(argv[: len(command)]), None
        for arg in argv[len(command) :]:
            if arg.startswith("-"):
                flag = arg if arg in flags else None
                out.append(arg)
            elif flag is not None and out[-1] != flag:
                out += [flag, arg]
            else:
                out.append(arg)
        return out
    return argv


NO_TORCH = (
    "bertkit: error: this command needs PyTorch, which is not installed; pip install 'bertkit[train]' "
    "(an export folder from `bertkit export onnx --output DIR` runs embed, classify, tag, answer and serve without it)"
)


def main(argv: list[str] | None = None) -> int:
    from bertkit.threads import passive_wait

    passive_wait()  # before torch loads OpenMP: idle threads sleep instead of spinning (bertkit.threads)
    from bertkit.notices import show_on_stderr

    show_on_stderr(warning_prefix="")  # the library logs; the command shows it as bertkit: lines
    try:
        # Outside standalone mode click returns a command's ``typer.Exit`` code instead of raising it.
        code = app(args=spread_paths(sys.argv[1:] if argv is None else list(argv)), standalone_mode=False)
    except BertkitError as exc:
        print(f"bertkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bertkit: interrupted", file=sys.stderr)
        return 130
    except ImportError as exc:  # torch is an extra (bertkit[train])
        if (exc.name or "").partition(".")[0] != "torch":
            raise
        print(NO_TORCH, file=sys.stderr)
        return 2
    except typer.Exit as exc:
        return exc.exit_code
    except OSError as exc:  # a file system problem (permissions, disk full) the command did not foresee
        print(f"bertkit: error: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""), file=sys.stderr)
        return 2
    except Exception as exc:  # click usage errors and friends
        usage, abort = _click_exceptions()
        if isinstance(exc, usage):
            exc.show()
            return 2
        if isinstance(exc, abort):
            return 1
        raise
    return code if isinstance(code, int) else 0


class _ShowsItself(Protocol):
    """A click usage error: ``show()`` prints it with the command's usage line."""

    def show(self) -> None: ...


def _click_exceptions() -> tuple[tuple[type[_ShowsItself], ...], tuple[type[Exception], ...]]:
    """(usage errors, aborts) of click and of the copy of click that typer >= 0.26 vendors (``typer._click``)."""
    import click

    usage: list[type[_ShowsItself]] = [click.exceptions.ClickException]
    abort: list[type[Exception]] = [click.exceptions.Abort]
    try:
        from typer._click import exceptions as vendored
    except ImportError:
        pass
    else:
        usage.append(vendored.ClickException)
        abort.extend(getattr(vendored, name) for name in ("Abort",) if hasattr(vendored, name))
    return tuple(usage), tuple(abort)
