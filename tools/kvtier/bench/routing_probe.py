"""Routing trials (kvtier.bench.routing) as a process of its own, so a benchmark can run them where the
addresses are: inside a real-node cluster's network namespace, against the router's Service and the
engine pods. Prints the result as one JSON object.

    python -m kvtier.bench.routing_probe --router URL --replica URL --replica URL --strategy S
        --model M [--trials 10] [--tokens 1000]
"""

from __future__ import annotations

import argparse
import json
import sys

from kvtier.bench import methodology, prompts, routing
from kvtier.podscripts import kvcheck


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--router", required=True, help="router URL")
    parser.add_argument("--replica", action="append", required=True, help="an engine URL (its /metrics)")
    parser.add_argument("--strategy", required=True, help="the router's strategy, for the record")
    parser.add_argument("--model", required=True)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=1000)
    args = parser.parse_args(argv)
    replicas = methodology.replicas_for(args.replica)
    try:
        count = prompts.tokenize_counter(args.replica[0], args.model)
        result = routing.routing_trials(
            args.router, args.strategy, replicas, args.model, args.trials, args.tokens, count, lambda _s: None
        )
    except kvcheck.CheckError as error:
        print(json.dumps({"error": str(error)}))
        return 1
    print(json.dumps(result.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
