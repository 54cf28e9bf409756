"""Subcommands of `kvtier`; each module with a `register(subparsers)` function adds one."""
