"""The ``bertkit`` command: thin, it parses arguments, calls the library and prints. One module per command group:

- ``program``: the root app, ``main()``, and how errors become exit codes and one-line messages
- ``tokenizer``: ``tokenize``, ``tokenizer train``, ``tokenizer extend``
- ``inference``: ``embed``, ``fill-mask``, ``next-sentence``, ``classify``, ``tag``, ``answer``, ``attention``
- ``serve``; ``convert``; ``export_onnx`` (``export onnx``)
- ``pretrain``; ``finetune`` (``finetune``, ``evaluate``, ``predict``); ``distill``; ``prepare_data``; ``demo``
- ``retrieval``: ``retrieval from-squad``, ``retrieval mine-negatives``

Options: ``options`` generates them from the config dataclasses, so that a field is declared once;
``shared_options`` declares those several commands share; ``console`` reads inputs and prints results.
"""

from bertkit.cli import (
    convert,
    demo,
    distill,
    export_onnx,
    finetune,
    inference,
    prepare_data,
    pretrain,
    retrieval,
    serve,
    tokenizer,
)
from bertkit.cli.program import app, main

# In this order in `bertkit --help`.
for _group in (
    tokenizer,
    inference,
    serve,
    convert,
    export_onnx,
    pretrain,
    finetune,
    distill,
    retrieval,
    prepare_data,
    demo,
):
    app.add_typer(_group.commands)

__all__ = ["app", "main"]
