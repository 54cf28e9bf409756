# Entry points. `make check` is the main job, `make test` runs every test kind (see README).
SHELL := /bin/bash
.DEFAULT_GOAL := check
VENV ?= .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/.tools/bin:$(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: venv validate-tools tools cluster-tools node-tools node-images engine hyperpod-sdk netpol checkov check test lint generate publish clean

$(VENV)/.installed: pyproject.toml tools/pytest-helm-unittest/pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e tools/pytest-helm-unittest -e '.[test]'
	touch $@

venv: $(VENV)/.installed

## what `kvtier validate` runs: Helm 3 and 4, LMCache's config loader, vllm-router, yamllint
validate-tools: venv
	PYTHON=$(PY) bash toolchain/install.sh validate

tools: venv
	PYTHON=$(PY) bash toolchain/install.sh

cluster-tools: venv
	PYTHON=$(PY) bash toolchain/install.sh cluster

## the real node too: kubelet, kube-proxy, CoreDNS (Go module proxy); containerd, runc, CNI plugins,
## iptables, mmdebstrap (Debian packages unpacked into the cache, nothing installed system-wide)
node-tools: venv
	PYTHON=$(PY) bash toolchain/install.sh node

## every image the real-node tests import (Debian bases, router, engine, Curvine's), built once into the
## cache before the tests; each is skipped with its reason where its inputs are absent
node-images: node-tools engine
	$(PY) -m kvtier.cluster.realnode.prebuild

## the real-engine rig (vLLM CPU build + vllm-router) in its own venv, .venv-engine/
engine:
	bash toolchain/engine.sh

## AWS's SageMaker HyperPod SDK in its own venv, .venv-hyperpod/ (validates the HyperPod target, derives
## the operator CRDs the tests install)
hyperpod-sdk:
	bash toolchain/side-venv.sh hyperpod-sdk

## IBM np-guard's network-config-analyzer in its own venv, .venv-netpol/ (what the NetworkPolicies allow)
netpol:
	bash toolchain/side-venv.sh netpol

## Bridgecrew's checkov in its own venv, .venv-checkov/ (the policy scan of every environment's render)
checkov:
	bash toolchain/side-venv.sh checkov

## main job: validate and render every environment in values/, every object dry-run on the local control
## plane (built by cluster-tools, started once and kept up 15 min idle), print a summary table
## (offline from the Hugging Face Hub: the models' facts come from the cache or the shipped facts)
check: cluster-tools hyperpod-sdk
	HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 $(VENV)/bin/kvtier validate values/

## regenerate the charts' values.schema.json, pod script copies and README tables (helm-docs)
generate: tools
	$(VENV)/bin/kvtier generate

## publish both charts: make publish REGISTRY=oci://HOST/PATH (credentials: `helm registry login`,
## or KVTIER_REGISTRY_USERNAME/KVTIER_REGISTRY_PASSWORD); see docs/publishing.md
publish: tools
	$(VENV)/bin/kvtier package --registry "$(REGISTRY)" $(PUBLISH_FLAGS)

lint: tools
	$(VENV)/bin/ruff check tools tests benchmarks
	$(VENV)/bin/ruff format --check tools tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/kvtier lint --ct

## every test kind: unit, charts, cluster, node, engine. The set-ups run side by side (the Go builds keep
## the cores busy while pip downloads), the real node's images last, and so do the tests, in three pytest
## runs (toolchain/tests.sh).
## Each phase logs its time (toolchain/phase.sh).
test:
	@bash toolchain/phase.sh venv $(MAKE) --no-print-directory venv
	@bash toolchain/phase.sh set-up $(MAKE) --no-print-directory -j3 node-tools engine hyperpod-sdk netpol checkov node-images
	@bash toolchain/phase.sh lint $(MAKE) --no-print-directory lint
	@VENV=$(VENV) bash toolchain/phase.sh tests bash toolchain/tests.sh

clean:
	rm -rf $(VENV) .venv-engine .venv-hyperpod .venv-netpol .venv-checkov .tools
