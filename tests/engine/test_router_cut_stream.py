"""What a client receives through the real vllm-router when the engine serving its stream dies (SIGKILL)
after the first chunks (issue 65): the status, the events, the last finish_reason, [DONE] or not, and how
the bytes ended, read off the socket (kvtier.engine_rig.raw_stream). A careful client must be able to tell
the answer is incomplete; the soak counts such an answer as a failed request (kvtier.load.soak.cut_short).
The recorded stream is printed for docs/reliability.md.
"""

from __future__ import annotations

import json

from kvtier.engine_rig import raw_stream
from kvtier.engine_rig import rig as engine_rig
from kvtier.podscripts import kvcheck

MAX_TOKENS = 1500  # far more than the stream gets through before the kill (seconds on the rig)
RUNNING = "vllm:num_requests_running"


def test_a_stream_whose_engine_dies_is_not_a_finished_answer(engines: engine_rig.EngineRig) -> None:
    payload = {
        "model": engine_rig.MODEL_NAME, "prompt": kvcheck.long_prompt(60, nonce="cut-stream"),
        "max_tokens": MAX_TOKENS, "ignore_eos": True, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True},  # as vllm bench serve asks
    }  # fmt: skip
    killed: list[int] = []

    def kill_the_serving_engine() -> None:
        running = [kvcheck.read_metrics(kvcheck.metrics_url(url)).get(RUNNING, 0.0) for url in engines.urls]
        serving = [index for index, count in enumerate(running) if count > 0]
        assert len(serving) == 1, f"expected one engine serving the stream: {RUNNING} {running}"
        engines.kill(serving[0])
        killed.append(serving[0])

    try:
        with engines.router("roundrobin") as url:
            recorded = raw_stream.stream(url, payload, after_events=3, then=kill_the_serving_engine)
    finally:
        for index in killed:  # the session's rig serves the next test whole
            engines.restart(index)
    report = recorded.as_dict()
    report["text"] = f"{len(recorded.text)} characters"
    print(f"[cut-stream] {json.dumps(report)}")
    assert killed, "the stream never got its first events"
    assert recorded.text_events >= 3 and recorded.last_finish_reason is None, report
    assert not recorded.finished(), f"a stream cut by a dead engine looked finished: {report}"
