"""The engine tests' own probes (run by path in the engine venv) and the case builders that drive them."""
