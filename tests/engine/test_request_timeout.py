"""vllm bench serve's requests are bounded when KVTIER_REQUEST_TIMEOUT_S is set (engine_rig/vllm_cli.py): its
HTTP session would otherwise wait six hours on a server that never answers, as the soak found one request
through the router wait after its engine was killed. Checked in the engine venv, with its own aiohttp and
the session arguments vLLM's benchmark passes (a six-hour total), against a socket that accepts and never
answers."""

from __future__ import annotations

import socket
import subprocess
import textwrap

from kvtier.engine_rig import rendered
from kvtier.engine_rig.rig import engine_python

PROBE = textwrap.dedent(
    """
    import asyncio, importlib.util, sys, time
    spec = importlib.util.spec_from_file_location("vllm_cli", sys.argv[1])
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    cli._bound_requests(float(sys.argv[3]))
    import aiohttp

    async def main():
        timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)  # what vllm bench serve opens its session with
        async with aiohttp.ClientSession(timeout=timeout) as session:
            started = time.monotonic()
            try:
                async with session.post(sys.argv[2], json={}) as response:
                    await response.read()
                print("answered")
            except Exception as error:
                print(type(error).__name__, round(time.monotonic() - started, 1))

    asyncio.run(main())
    """
)


def test_a_request_nobody_answers_fails_after_the_bound() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/v1/completions"
        done = subprocess.run(
            [str(engine_python()), "-c", PROBE, str(rendered.VLLM_CLI), url, "2"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    kind, seconds = done.stdout.split()
    assert kind == "TimeoutError" and 1.5 <= float(seconds) < 20, done.stdout
