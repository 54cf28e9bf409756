"""What a client receives through the real vllm-router when the engine serving its stream dies after the
first chunks (issue 65): SIGKILL of its processes (a crash, as the rig's soak kills), and SIGTERM of its
server process with 2 s before SIGKILL (a forced pod delete: the kubelet's minimum grace). Recorded off
the socket (kvtier.engine_rig.raw_stream): the status, the events, the last finish_reason, [DONE] or not,
the body's framing and how the bytes ended. A careful client must be able to tell the answer is
incomplete; the soak counts one that vllm bench serve took as a success as a failed request
(kvtier.load.soak.cut_short). The records are printed for docs/reliability.md.
"""

from __future__ import annotations

import json

import pytest

from kvtier.engine_rig import raw_stream
from kvtier.engine_rig import rig as engine_rig
from kvtier.podscripts import kvcheck

MAX_TOKENS = 1500  # far more than the stream gets through before the kill (seconds on the rig)
RUNNING = "vllm:num_requests_running"
POD_DELETE_GRACE_S = 2.0  # the kubelet's floor (minimumGracePeriodInSeconds), a forced delete's grace


@pytest.mark.parametrize("graceful", [False, True], ids=["SIGKILL", "SIGTERM"])
def test_a_stream_whose_engine_dies_is_not_a_finished_answer(
    engines: engine_rig.EngineRig, graceful: bool
) -> None:
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
        engines.kill(serving[0], POD_DELETE_GRACE_S if graceful else None)
        killed.append(serving[0])

    try:
        with engines.router("roundrobin") as url:
            recorded = raw_stream.stream(url, payload, after_events=3, then=kill_the_serving_engine)
    finally:
        for index in killed:  # the session's rig serves the next test whole
            engines.restart(index)
    report = {**recorded.as_dict(), "text": f"{len(recorded.text)} characters"}
    report |= {"finished": recorded.finished(), "clean_end": recorded.clean_end()}
    print(f"[cut-stream] {'SIGTERM' if graceful else 'SIGKILL'}: {json.dumps(report)}")
    assert killed and recorded.text_events >= 3, f"the stream never got its first events: {report}"
    assert not recorded.finished(), f"a careful client took a stream its engine died in as finished: {report}"
    # Either the stream breaks (no last chunk: every client fails it), or vLLM's shutdown aborts the request
    # and ends the stream in good order with finish_reason "abort" and [DONE], which the router passes on;
    # both were seen under SIGTERM. Never a clean end that does not say it stopped short.
    said = recorded.last_finish_reason in ("abort", "error")
    assert not recorded.clean_end() or said, f"an incomplete stream ended as a finished one does: {report}"
    if not graceful:  # a crash: the engine's connection closes mid-body, so the router's body stops too
        assert not recorded.terminated and not recorded.done, report
