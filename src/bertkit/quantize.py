"""int8 inference: the encoder's linear layers with int8 weights (one scale per output channel) and int8
activations scaled per token at run time, through torchao (``Int8DynamicActivationInt8WeightConfig``).

Embeddings, LayerNorms, the pooler and every task head stay float32: they are a small share of the work, and
the heads turn a few hidden values into the answer, so rounding there moves predictions most. So does the
fused Q/K/V projection (``FLOAT32_LINEARS``): it reads the LayerNorm output, whose few outlier channels set
each token's int8 scale and leave the other channels coarse, and attention scores amplify the error. On
all-MiniLM-L6-v2 over the 872 SST-2 dev sentences, the lowest cosine of an int8 embedding with its float32
one is 0.983 with Q/K/V in int8 and 0.992 without, for 12 % less speed (``benchmarks/results/int8_quality.json``
holds the measurement of what is shipped).

An int8 model is for inference only: ``refuse_training`` stops a trainer from updating one. It is saved as
safetensors like any model: each quantized weight under its Hugging Face name as int8, its per-channel scales
beside it (``<name>_scale``, float32), and ``config.json`` says so (``bertkit_quantization``); ``load_model``
rebuilds the same int8 weights, bit for bit. torchao's int8 matmuls pay once the graph is compiled (they
fuse the activation rounding into the neighbouring kernels), so int8 inference compiles by default.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Any, cast

import torch
from torch import Tensor, nn

from bertkit.checkpoint_files.pretrained import QUANTIZATION_KEY
from bertkit.config import BertConfig
from bertkit.errors import BertkitError, ConfigError
from bertkit.notices import quiet_libraries

SCHEMES = ("int8",)
CONFIG_KEY = QUANTIZATION_KEY
"""``config.json`` key of a quantized checkpoint: ``{"scheme": "int8", ...}``."""
SCALE_SUFFIX = "_scale"
TORCHAO_LOGGERS = ("torchao", "torch.utils._pytree")
"""Loggers quieted while torchao loads and quantizes (``bertkit.notices.quiet_libraries``): torchao warns of
each optional CUDA kernel library it cannot load (``Failed to load ..._C_mxfp8...so``), and torch of a
deprecated way torchao registers its enums. Neither concerns a user of int8 inference."""
FLOAT32_LINEARS = ("attention.qkv",)
"""Encoder linears kept in float32 (see the module docstring), by the end of their module name."""

_QUANTIZED_NAME = re.compile(r"^(bert\.)?encoder\.layer\.\d+\.(?!.*LayerNorm)(?!attention\.self\.).*\.weight$")
"""Hugging Face names of the int8 weights: the encoder layers' linears but their LayerNorms and Q/K/V."""


def check_scheme(scheme: str | None) -> str | None:
    """``scheme`` itself when bertkit knows it (``None``: no quantization); else a one-line ``ConfigError``."""
    if scheme is not None and scheme not in SCHEMES:
        raise ConfigError(f"unknown quantization {scheme!r}; use --quantize {' or '.join(SCHEMES)}")
    return scheme


def _torchao() -> Any:
    try:
        with quiet_libraries(*TORCHAO_LOGGERS):
            import torchao.quantization  # an optional extra: imported when used
    except ImportError:
        raise BertkitError("int8 quantization needs torchao; pip install 'bertkit[int8]'") from None
    return torchao.quantization


def is_quantized(model: nn.Module) -> bool:
    """Whether any weight of ``model`` is a torchao int8 tensor."""
    if "torchao" not in sys.modules:  # nothing can be quantized before torchao is imported
        return False
    kind = _torchao().Int8Tensor
    return any(isinstance(p, kind) for p in model.parameters())


def refuse_training(model: nn.Module) -> None:
    """A one-line ``ConfigError`` for a quantized model: int8 weights have no gradients to train."""
    if is_quantized(model):
        raise ConfigError(
            "this model is int8-quantized, which is for inference only; train the float32 checkpoint "
            "(without --quantize) and quantize the result"
        )


def _encoder_linears(model: nn.Module) -> Iterator[tuple[str, nn.Linear]]:
    """The encoder layers' linears that become int8, by module name (``bert.encoder.layers.0.ffn_in``)."""
    for name, module in model.named_modules():
        if (
            isinstance(module, nn.Linear)
            and ".layers." in f".{name}"
            and "encoder." in f".{name}"
            and not name.endswith(FLOAT32_LINEARS)
        ):
            yield name, module


def quantize_model(model: nn.Module, scheme: str = "int8") -> nn.Module:
    """Quantize ``model`` (any bertkit class) in place for inference: the encoder layers' linears but Q/K/V int8
    (per output channel), activations quantized per token at run time; the rest float32. Returns it, in eval
    mode."""
    check_scheme(scheme)
    if is_quantized(model):
        return model
    ao = _torchao()
    targets = {id(module) for _, module in _encoder_linears(model)}
    model.eval().requires_grad_(False)
    with quiet_libraries(*TORCHAO_LOGGERS):
        ao.quantize_(
            model,
            ao.Int8DynamicActivationInt8WeightConfig(),
            filter_fn=lambda module, _name: id(module) in targets,
        )
    config = cast(BertConfig, model.config)
    config.extra[CONFIG_KEY] = {
        "scheme": scheme,
        "layers": "encoder linears but Q/K/V: int8 weights per output channel, int8 activations per token",
        "float32": "embeddings, LayerNorms, Q/K/V projections, pooler, task heads",
        "library": "torchao",
    }
    return model


# ------------------------------------------------------------------------------------------ files
# The weight-name table lives in bertkit.weights and maps whole tensors along dim 0 (the fused Q/K/V splits
# in three). Per-channel scales split the same way, so each quantized weight travels through that table as
# one float tensor [out, in + 1]: its int8 values (exact in float32) with its scales as the last column.


def pack(weight: Any) -> Tensor:
    """A quantized weight (torchao ``Int8Tensor``) as ``[out, in + 1]`` float32: the int8 values, then the
    per-channel scale."""
    return torch.cat([weight.qdata.float(), weight.scale.reshape(-1, 1).float()], dim=1)


def packed_parameters(model: nn.Module) -> dict[str, Tensor]:
    """``model``'s parameters by name, each quantized weight packed (``pack``), for the name table."""
    params: dict[str, Tensor] = dict(model.named_parameters(remove_duplicate=False))
    for name, module in _encoder_linears(model):
        params[f"{name}.weight"] = pack(module.weight)
    return params


def is_quantized_name(name: str) -> bool:
    """Whether a Hugging Face tensor name is one of the weights a quantized checkpoint stores int8."""
    return bool(_QUANTIZED_NAME.match(name))


def split_packed(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    """Hugging Face-named tensors with each packed weight split into int8 values and ``<name>_scale``."""
    out: dict[str, Tensor] = {}
    for name, tensor in tensors.items():
        if is_quantized_name(name):
            out[name] = tensor[:, :-1].round().to(torch.int8).contiguous()
            out[name + SCALE_SUFFIX] = tensor[:, -1].contiguous()
        else:
            out[name] = tensor
    return out


def join_packed(state: dict[str, Tensor], source: str) -> dict[str, Tensor]:
    """The inverse of ``split_packed``: each int8 weight and its scales as one packed float tensor."""
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        if is_quantized_name(name):
            scale = state.get(name + SCALE_SUFFIX)
            if tensor.dtype != torch.int8 or scale is None or scale.shape != tensor.shape[:1]:
                raise BertkitError(f"{source}: {name} is not an int8 weight with per-channel scales")
            tensor = torch.cat([tensor.float(), scale.float().reshape(-1, 1)], dim=1)
        out[name] = tensor
    return out


def prepare_packed(model: nn.Module) -> None:
    """Give each encoder linear of a float32 ``model`` a packed-shape weight ``[out, in + 1]`` to load into."""
    for _, module in _encoder_linears(model):
        out_features, in_features = module.weight.shape
        module.weight = nn.Parameter(module.weight.new_zeros(out_features, in_features + 1), requires_grad=False)


def finish_packed(model: nn.Module, scheme: str) -> nn.Module:
    """After loading packed weights (``prepare_packed``): quantize ``model`` and set every int8 weight and
    scale to exactly the loaded ones (requantizing the dequantized values would round the scales again)."""
    loaded = {}
    for name, module in _encoder_linears(model):
        packed = module.weight.detach()
        values, scale = packed[:, :-1].to(torch.int8), packed[:, -1:].clone()
        loaded[name] = (values, scale)
        module.weight = nn.Parameter(values.float() * scale, requires_grad=False)
    quantize_model(model, scheme)
    for name, module in _encoder_linears(model):
        values, scale = loaded[name]
        weight: Any = module.weight  # a torchao Int8Tensor
        with torch.no_grad():
            weight.qdata.copy_(values)
            weight.scale.copy_(scale.reshape(weight.scale.shape))
    return model
