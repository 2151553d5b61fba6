"""What the CPU offers at run time, as the matmul kernels see it: AVX2, AVX-512, the int8 dot-product
instructions (AVX512-VNNI, AVX-VNNI), AMX, and on ARM NEON, dot-product and i8mm.

The flags come from ``/proc/cpuinfo`` (``flags`` on x86, ``Features`` on ARM). Two environment variables hold
a process to less than its CPU has, and are honoured here, so that an Intel Xeon with VNNI can show what an
AVX2-only machine does: ``ATEN_CPU_CAPABILITY`` (PyTorch's kernels: ``default``, ``avx2``, ``avx512``) and
``ONEDNN_MAX_CPU_ISA`` (oneDNN's: ``AVX2``, ``AVX512_CORE_VNNI``, ``AVX512_CORE_AMX``...). Either one capped
at AVX2 reports an AVX2 machine.

``fast_torchao_int8``: whether torchao's int8 matmuls (compiled by Inductor) have fast kernels here. Inductor's
int8 GEMM template has micro-kernels for AMX and AVX512-VNNI only; elsewhere its reference loops are slower
than float32 (19x on a 2-core AMD EPYC with AVX2), so int8 inference takes another path there
(``bertkit.backends``). ``describe()`` is one line for benchmark files and ``bertkit --version``.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

ONEDNN_ORDER = (
    "SSE41",
    "AVX",
    "AVX2",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
)
"""oneDNN's ISA names, weakest first (``ONEDNN_MAX_CPU_ISA``; ``ALL`` or ``DEFAULT``: no cap)."""


@dataclass(frozen=True)
class CpuFeatures:
    """The instruction sets that matter to BERT inference, after any cap set in the environment."""

    model: str = ""
    """The CPU's model name (``lscpu``'s), empty when unknown."""
    arch: str = ""
    """``x86_64``, ``aarch64``...: ``platform.machine()``."""
    avx2: bool = False
    """AVX2 and FMA: PyTorch's and oneDNN's float32 kernels, ONNX Runtime's int8 ones."""
    avx512: bool = False
    """AVX-512 F, BW and VL together (what the AVX-512 kernels of PyTorch and oneDNN need)."""
    avx512_vnni: bool = False
    """AVX512-VNNI: 512-bit int8 dot products (Intel Cascade Lake on, AMD Zen 4 on)."""
    avx_vnni: bool = False
    """AVX-VNNI: the 256-bit int8 dot products of Intel Alder Lake on."""
    amx_tile: bool = False
    """AMX tiles (Intel Sapphire Rapids on)."""
    amx_int8: bool = False
    """AMX int8 matmuls."""
    amx_bf16: bool = False
    """AMX bfloat16 matmuls."""
    neon: bool = False
    """ARM NEON (Advanced SIMD; always there on aarch64)."""
    dotprod: bool = False
    """ARM int8 dot product (``asimddp``)."""
    i8mm: bool = False
    """ARM int8 matrix multiply."""
    capped_by: str = ""
    """The environment variable that held the process below its CPU (``ONEDNN_MAX_CPU_ISA=AVX2``...), if any."""

    @property
    def fast_torchao_int8(self) -> bool:
        """Whether torchao's int8 matmuls under Inductor beat float32 here: with AVX512-VNNI or AMX only."""
        return self.avx512_vnni or self.amx_int8

    @property
    def int8_kernels(self) -> str:
        """The best int8 dot-product instructions: ``amx``, ``avx512-vnni``, ``avx-vnni``, ``avx2``, ``i8mm``,
        ``dotprod``, ``neon`` or ``none``."""
        for name, present in (
            ("amx", self.amx_int8),
            ("avx512-vnni", self.avx512_vnni),
            ("avx-vnni", self.avx_vnni),
            ("avx2", self.avx2),
            ("i8mm", self.i8mm),
            ("dotprod", self.dotprod),
            ("neon", self.neon),
        ):
            if present:
                return name
        return "none"

    def flags(self) -> list[str]:
        """The features present, by field name."""
        names = ("avx2", "avx512", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "neon")
        return [n for n in (*names, "dotprod", "i8mm") if getattr(self, n)]

    def describe(self) -> str:
        """One line: model, architecture, features, the cap and the int8 kernels, e.g. ``AMD EPYC (x86_64):
        avx2; int8 kernels avx2``."""
        cap = f" (held by {self.capped_by})" if self.capped_by else ""
        features = ", ".join(self.flags()) or "no SIMD features known"
        return f"{self.model or 'unknown CPU'} ({self.arch or '?'}): {features}{cap}; int8 kernels {self.int8_kernels}"


def parse_cpuinfo(text: str, arch: str = "") -> CpuFeatures:
    """The features in the text of ``/proc/cpuinfo`` (its first processor), before any cap."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        key = key.strip().lower()
        if colon and key not in fields:
            fields[key] = value.strip()
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    model = fields.get("model name") or fields.get("cpu model") or fields.get("hardware", "")
    is_arm = arch.startswith(("aarch64", "arm")) or "asimd" in flags
    return CpuFeatures(
        model=model,
        arch=arch,
        avx2="avx2" in flags and "fma" in flags,
        avx512={"avx512f", "avx512bw", "avx512vl"} <= flags,
        avx512_vnni="avx512_vnni" in flags or "avx512vnni" in flags,
        avx_vnni="avx_vnni" in flags,
        amx_tile="amx_tile" in flags,
        amx_int8="amx_int8" in flags,
        amx_bf16="amx_bf16" in flags,
        neon=is_arm and ("asimd" in flags or "neon" in flags or arch == "aarch64"),
        dotprod="asimddp" in flags,
        i8mm="i8mm" in flags,
    )


def apply_caps(features: CpuFeatures, environ: dict[str, str] | os._Environ[str] | None = None) -> CpuFeatures:
    """``features`` as a process held by ``ATEN_CPU_CAPABILITY`` / ``ONEDNN_MAX_CPU_ISA`` sees them."""
    environ = os.environ if environ is None else environ
    aten = environ.get("ATEN_CPU_CAPABILITY", "").strip().lower()
    onednn = environ.get("ONEDNN_MAX_CPU_ISA", environ.get("DNNL_MAX_CPU_ISA", "")).strip().upper()
    level = len(ONEDNN_ORDER)  # no cap
    capped_by = ""
    if aten in ("default", "avx2"):
        level, capped_by = ONEDNN_ORDER.index("AVX2" if aten == "avx2" else "SSE41"), f"ATEN_CPU_CAPABILITY={aten}"
    if onednn in ONEDNN_ORDER and ONEDNN_ORDER.index(onednn) < level:
        level, capped_by = ONEDNN_ORDER.index(onednn), f"ONEDNN_MAX_CPU_ISA={onednn}"
    if level == len(ONEDNN_ORDER):
        return features
    allowed = ONEDNN_ORDER[: level + 1]
    capped = replace(
        features,
        avx2=features.avx2 and "AVX2" in allowed,
        avx_vnni=features.avx_vnni and "AVX2_VNNI" in allowed,
        avx512=features.avx512 and "AVX512_CORE" in allowed,
        avx512_vnni=features.avx512_vnni and "AVX512_CORE_VNNI" in allowed,
        amx_tile=features.amx_tile and "AVX512_CORE_AMX" in allowed,
        amx_int8=features.amx_int8 and "AVX512_CORE_AMX" in allowed,
        amx_bf16=features.amx_bf16 and "AVX512_CORE_AMX" in allowed,
    )
    return replace(capped, capped_by=capped_by) if capped != features else features


@cache
def _host() -> CpuFeatures:
    arch = platform.machine().lower()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:  # not Linux: the architecture alone
        return CpuFeatures(model=platform.processor(), arch=arch, neon=arch in ("arm64", "aarch64"))
    return parse_cpuinfo(text, arch)


def detect() -> CpuFeatures:
    """This machine's CPU features, with the environment's caps applied (read anew on each call)."""
    return apply_caps(_host())


def describe() -> str:
    """``detect().describe()``: one line for benchmark JSON and version output."""
    return detect().describe()
