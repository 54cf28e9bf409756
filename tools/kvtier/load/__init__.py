"""Load benchmark: a multi-tenant mix (workload), replayed by vLLM's `vllm bench serve` (driver) through the
router replicas of each routing configuration (routing), summarized side by side (summary)."""
