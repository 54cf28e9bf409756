"""The KWOK flavour: a real control plane on 127.0.0.1 under kwokctl's binary runtime, with fake nodes
shaped like the targets (`kvtier cluster up`); one cluster shared by every pytest session that asks."""
