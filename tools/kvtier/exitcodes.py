"""Exit codes shared by every kvtier command (DESIGN.md section 9)."""

OK = 0
FINDINGS = 1  # a check ran and failed
USAGE = 2  # unusable input or wrong invocation
