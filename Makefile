# Entry points. `make check` is the main job, `make test` runs every test kind (see README).
SHELL := /bin/bash
.DEFAULT_GOAL := check
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/.tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: venv tools cluster-tools engine check test lint generate clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

tools: venv
	PYTHON=$(PY) bash toolchain/install.sh

cluster-tools: venv
	PYTHON=$(PY) bash toolchain/install.sh cluster

## the real-engine rig (vLLM CPU build + vllm-router) in its own venv, .venv-engine/
engine:
	bash toolchain/engine.sh

## main job: validate and render every environment in values/ offline, print a summary table
check: tools
	$(VENV)/bin/kvtier validate values/

generate: venv
	$(VENV)/bin/kvtier generate

lint: tools
	$(VENV)/bin/ruff check tools tests bench
	$(VENV)/bin/ruff format --check tools tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/kvtier lint --ct

## every test kind: unit, charts, cluster, engine
test: cluster-tools engine lint
	$(VENV)/bin/pytest tests

clean:
	rm -rf $(VENV) .venv-engine .tools
