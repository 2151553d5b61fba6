# All set-up lives here: a fresh machine needs only `make demo` or `make test`.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: install test test-all demo bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: the CPU build of 2.13.0 is on disk; a bare requirement would pull CUDA wheels.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(VENV)/bin/bertkit demo --output runs/demo

bench: $(STAMP)
	$(PY) benchmarks/bench_tokenizer.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
