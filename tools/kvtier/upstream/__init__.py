"""Facts about the upstream components the bundle configures, each checked against its source.

- lmcache_config: a rendered LMCache config through LMCache's own loader (no unknown keys);
- curvine_config: the TOML keys Curvine v0.4.1 reads, and checks of a rendered curvine-cluster.toml;
- hyperpod_fields: the HyperPod Inference Operator CRD fields the bundle's endpoints write;
- vllm_args: `vllm serve` arguments as vLLM's parser reads them (spellings, prefixes, dotted keys).
"""
