"""The proving harness: code only the tests run (cluster inventories and storage, a local OCI registry,
promtool and Grafana's dashboard schema, the HyperPod patch's reader). It lives beside the tests, not in the
kvtier package users install; pytest puts tests/ on the path (pyproject.toml, `pythonpath`)."""
