# All set-up lives here: a fresh machine needs only `make demo` or `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

define TORCHAO_CPU_ONLY
import importlib.util, pathlib, torch
spec = importlib.util.find_spec("torchao")
if spec and spec.origin and torch.version.cuda is None:
    for kernel in pathlib.Path(spec.origin).parent.glob("_C*.so"):
        kernel.unlink()
endef
export TORCHAO_CPU_ONLY

.PHONY: install lint test browser demo bench peers-serving clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: the CPU build of 2.13.0 is on disk; a bare requirement would pull CUDA wheels.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	# torchao's PyPI wheel carries CUDA-only kernels that no CPU build of torch can load, and logs "Failed to
	# load" for each on every `import transformers`: with a CPU torch they are removed (int8 on the CPU needs none).
	$(PY) -c "$$TORCHAO_CPU_ONLY"
	touch $(STAMP)

install: $(STAMP)

# Lint, format check and type check: each must report nothing (the tool versions are pinned in pyproject.toml).
lint: $(STAMP)
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy
	# The tests too: pytest passes fixtures by name, unannotated, so only their bodies are type-checked.
	$(VENV)/bin/mypy tests --allow-untyped-defs --allow-incomplete-defs

# One test process per core (pytest-xdist), each running whole files, so a module's fixtures are built once
# and its tests run in order; files are handed out in collection order (tests/conftest.py puts the slow first).
test: $(STAMP) browser lint
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder

# The web page test drives Debian's Chromium; it skips with a reason where Chromium cannot be installed.
browser:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
	  echo "chromium not installed: the browser test will be skipped"; }

demo: $(STAMP)
	$(VENV)/bin/bertkit demo --output runs/demo

bench: $(STAMP)
	$(PY) benchmarks/bench_tokenizer.py

# infinity-emb, the serving peer of benchmarks/bench_serve_engines.py, in a virtual environment of its own
# (never part of `install`: it pins its own fastapi, transformers and sentence-transformers).
INFINITY_VENV ?= .peers/infinity-venv
peers-serving:
	test -x $(INFINITY_VENV)/bin/python || $(PYTHON) -m venv $(INFINITY_VENV)
	$(INFINITY_VENV)/bin/pip install -q torch==2.13.0
	$(INFINITY_VENV)/bin/pip install -q "infinity-emb[server,torch]==0.0.78"

clean:
	rm -rf $(VENV) build dist src/*.egg-info
