"""``serve``: a model over HTTP, with its web page (the service is :mod:`bertkit.serve`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from bertkit.cli.options import config_options, lazy_command
from bertkit.cli.shared_options import EngineOptions, generated_command, only_fields, shared, threads_for

commands = typer.Typer(rich_markup_mode=None)


def _serve_function() -> Callable[..., None]:
    from bertkit.serve import ServeLimits
    from bertkit.serve.access import ServeAccess

    limits = config_options(
        [ServeLimits, ServeAccess],
        exclude=only_fields(ServeLimits, "batch_size", "max_batch_tokens", "max_items", "request_timeout_s"),
        flags={"request_timeout_s": ("--timeout",)},
    )
    return generated_command("serve", serve_command.__doc__, limits, ServeOptions, _run_serve)


@dataclass(kw_only=True)
class ServeOptions:
    """The options of ``serve`` besides its limits and access rules (``ServeLimits``, ``ServeAccess``)."""

    model: str = shared("model")
    host: str = "127.0.0.1"
    """Address to bind; the default serves this machine only."""
    port: int = 8000
    """TCP port."""
    engine: EngineOptions = field(default_factory=EngineOptions)


def _run_serve(o: ServeOptions, fields: dict[str, Any]) -> None:
    import dataclasses

    from bertkit.serve.address import listening_socket

    model = o.model
    sock = listening_socket(o.host, o.port)  # a bad port or address: one line, before torch is imported
    exported = threads_for(model, o.engine.threads)
    from bertkit.inference import load
    from bertkit.inference.encoder_outputs import embed_settings
    from bertkit.serve import ServeLimits
    from bertkit.serve.access import ServeAccess
    from bertkit.serve.app import serve_loading

    given = {k: v for k, v in fields.items() if v is not None}
    names = {f.name for f in dataclasses.fields(ServeAccess)}
    access = ServeAccess(**{k: v for k, v in given.items() if k in names})  # bad flags fail before the port opens
    limits = ServeLimits(**{k: v for k, v in given.items() if k not in names})
    if exported:  # an export folder: checked here, loaded by ONNX Runtime without torch
        from bertkit.inference.exported import check_engine_options, read_runtime

        check_engine_options(o.engine.loading(), read_runtime(Path(model))["quantize"])
    else:
        from bertkit.backends import choose_backend
        from bertkit.checkpoint_files.pretrained import check_pretrained

        choose_backend(o.engine.backend, o.engine.quantize)  # so do a wrong backend and a path that is no model
        check_pretrained(model)

    def load_model() -> Any:  # runs while the port answers 503 (bertkit.serve.loading_app)
        loaded = load(model, **o.engine.loading())
        if loaded.sentence_config is None or not loaded.sentence_config.unsupported:
            print(f"bertkit: embeddings default to {embed_settings(loaded).notice()}", file=sys.stderr)
        return loaded

    serve_loading(load_model, host=o.host, port=o.port, limits=limits, model_id=model, access=access, sock=sock)


@commands.command("serve", short_help="Serve a model over HTTP, with a web page.", cls=lazy_command(_serve_function))
def serve_command() -> None:
    """Serve the model over HTTP (JSON API with OpenAPI docs at /docs, web page at /, Prometheus metrics at
    /metrics, probes at /health/ready and /health/live). The port opens before the model loads: until it is
    loaded, /health/ready and every route answer 503, /health/live 200. SIGTERM drains requests in flight, then
    exits 0.

    \b
    Example:
      bertkit serve --model ./bert --port 8000  # then open http://127.0.0.1:8000/
    """
