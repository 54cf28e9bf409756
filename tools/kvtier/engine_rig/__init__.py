"""The real-engine rig: vLLM's CPU build serving a tiny generated model, two replicas, vllm-router.

- tinymodel: generates the model and tokenizer (runs in .venv-engine);
- router_flags: the router flags the umbrella chart renders for a strategy;
- processes: starts, waits for and stops engine and router processes;
- rig: the whole rig as a context manager (used by tests/engine/ and benchmarks/).
"""
