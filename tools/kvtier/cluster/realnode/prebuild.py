"""Builds every image the real-node tests import, once, before the tests start (`make node-images`).

A cold test run otherwise builds them inside the node tests (the Debian bases with mmdebstrap, the router
from PyPI, Curvine's images from its binaries, the 7 GB engine image), which made that pytest run the
last of three to finish by about 20 minutes (docs/ci-times.md). Built here, in the set-up, they run while
the other set-ups finish; the tests then find them cached (images keys their inputs, so nothing is built
twice and a changed input is built again by whoever needs it first).

Nothing here is required: where this machine cannot run a real node, or the engine venv or the Curvine
binaries are absent, it says so in one line and builds the rest; the tests decide what that means (under
CI a missing part fails there, with its reason).

    python -m kvtier.cluster.realnode.prebuild
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from kvtier.cluster.realnode import curvine_binaries, curvine_images, images, nodebins
from kvtier.cluster.realnode import lifecycle as realnode
from kvtier.engine_rig import rig
from kvtier.engine_rig.errors import RigError
from kvtier.errors import UserError


def _say(message: str) -> None:
    print(f"[node-images] {message}", flush=True)


def _engine() -> str:
    try:
        venv = rig.engine_python().parent.parent.resolve()
    except RigError as error:
        return f"engine image skipped: {error}"
    return images.engine(_say, venv).ref


def _cluster_and_curvine() -> str:
    built = [image.ref for image in images.all_images(_say)]
    reason = curvine_binaries.missing()
    if reason:
        return f"{', '.join(built)}; Curvine images skipped: {reason}"
    return ", ".join(built + [image.ref for image in curvine_images.all_images(_say)])


def main() -> int:
    reasons = realnode.preconditions()
    absent = nodebins.missing()
    if absent:
        reasons.append(f"real-node programs not built ({', '.join(absent)}): run `make node-tools`")
    if reasons:
        _say("skipped, this machine cannot run the real-node tier: " + "; ".join(reasons))
        return 0
    started = time.monotonic()
    # Two at once: the engine image is mostly one long tar write, the others mostly mmdebstrap and pip.
    jobs: list[Callable[[], str]] = [_engine, _cluster_and_curvine]
    failed = False
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        for future in [pool.submit(job) for job in jobs]:
            try:
                _say(future.result())
            except (UserError, OSError) as error:
                _say(f"FAILED: {error}")
                failed = True
    _say(f"done in {time.monotonic() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
