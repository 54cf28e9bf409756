"""Scripts that run inside the bundle's pods (helm test hooks, L2 eviction).

Standard library only (they run on the vLLM image's Python, >= 3.9). The charts carry copies
under files/podscripts/, written by `kvtier generate`; a test fails when a copy drifts.
"""
