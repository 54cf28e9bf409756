"""A model's config.json (and model.safetensors.index.json, where the repository has one) read from the
Hugging Face Hub at the revision the values pin, the way vLLM's loader fetches them: through huggingface_hub.

huggingface_hub honours HF_ENDPOINT (a mirror or a stand-in), HF_TOKEN (or its stored token) and the cache
(HF_HUB_CACHE, else HF_HOME/hub), and keeps what it read there by commit, so a later offline run finds it
(kvtier.validate.model_facts reads that cache). Nothing is asked when HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE)
is set. Every request has a short timeout (HF_HUB_ETAG_TIMEOUT, else ETAG_TIMEOUT_S), and a whole look-up a
deadline, so an unreachable or slow Hub costs seconds, never a hang; once the Hub failed to answer, the rest
of the run does not ask it again. Every failure is an Answer saying what the Hub said, never an exception.
"""

from __future__ import annotations

import errno
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
ETAG_TIMEOUT_S = 4.0  # per request, where HF_HUB_ETAG_TIMEOUT does not say; huggingface_hub's own is 10 s
DEADLINE_REQUESTS = 5  # a look-up's deadline in request timeouts: config and index, each a HEAD and a GET,
# and one HEAD without the token
OFFLINE_TRUE = ("1", "ON", "YES", "TRUE")  # huggingface_hub's constants.ENV_VARS_TRUE_VALUES
# A file system's refusals while keeping a download: the cache, not the Hub, is at fault.
CACHE_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.ENOTDIR)

Outcome = Literal[
    "read",  # the Hub served config.json at the revision
    "offline",  # HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE: not asked
    "not-a-repo-id",  # the model is no Hub repository id (a path, a malformed id): not asked
    "gated",  # 401/403 GatedRepo: the licence gate, and validate's token (if any) has no access
    "no-repo",  # RepoNotFound: no such repository, or a private one the token cannot see
    "no-revision",  # RevisionNotFound: the pinned revision does not exist in the repository
    "no-config",  # EntryNotFound: the repository has no config.json at that revision
    "unreachable",  # no answer in time, a connection refused, a proxy error, a 5xx
    "refused",  # any other refusal (an HTTP status without a Hub error code, a response without a commit)
    "no-cache",  # the Hub answered, and the cache could not keep the file (read-only, full)
]


@dataclass(frozen=True)
class Answer:
    outcome: Outcome
    repo_id: str
    endpoint: str  # the Hub asked (HF_ENDPOINT, else huggingface_hub's default)
    revision: str  # as asked: the values' pin, else main
    with_token: bool  # whether validate sent a token (HF_TOKEN, or huggingface_hub's stored one)
    folder: Path | None = None  # the cache's snapshot holding config.json (and the index, if any)
    commit: str = ""  # the commit the revision resolved to
    detail: str = ""  # the Hub's or the connection's words, one line
    # Read with a token: what the Hub answered the same request without one (the engine's download when the
    # values name no tokenSecret): "" (not asked, or no clear answer), "ok" or "401 GatedRepo".
    anonymous: str = ""

    @property
    def url(self) -> str:
        """Where the config.json read came from, pinned to its commit."""
        return f"{self.endpoint}/{self.repo_id}/resolve/{self.commit or self.revision}/{CONFIG}"

    @property
    def gated(self) -> bool | None:
        """The licence gate as this answer shows it: a gated refusal; a read without a token is ungated."""
        if self.outcome == "gated":
            return True
        if self.outcome == "read" and not self.with_token:
            return False
        if self.outcome == "read" and self.anonymous:
            return self.anonymous != "ok"
        return None  # not read, or the anonymous request had no clear answer: the gate is not known

    @property
    def gate_said(self) -> str:
        """What the Hub answered that shows the gate, in words ("" where it did not)."""
        if self.outcome == "gated":
            sent = "validate's token" if self.with_token else "no token"
            return f"{self.detail} ({sent})"
        return f"{self.anonymous} (no token)" if self.gated else ""

    def why_not(self) -> str:
        """Why the Hub gave no facts, in words (for an answer other than `read`)."""
        at = f"{self.repo_id}@{self.revision}"
        token = "validate's token (HF_TOKEN) has no access" if self.with_token else "validate sent no token"
        return {
            "read": f"the Hub served {self.url}",
            "offline": "HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set, so the Hub was not asked",
            "not-a-repo-id": f"{self.repo_id!r} is not a Hub repository id ({self.detail})",
            "gated": f"the Hub ({self.endpoint}) answered {self.detail} for {at}: the repository is gated "
            f"and {token}; gated-model-needs-token takes the gate as known",
            "no-repo": f"the Hub ({self.endpoint}) has no repository {self.repo_id} ({self.detail}; a "
            "private one needs HF_TOKEN)",
            "no-revision": f"the Hub ({self.endpoint}) has no revision {self.revision!r} of {self.repo_id} "
            f"({self.detail})",
            "no-config": f"the Hub ({self.endpoint}) has no {CONFIG} in {at} ({self.detail})",
            "unreachable": f"the Hub ({self.endpoint}) did not answer ({self.detail})",
            "refused": f"the Hub ({self.endpoint}) refused {at} ({self.detail})",
            "no-cache": f"the Hub ({self.endpoint}) answered, but the Hugging Face cache could not keep "
            f"{at}'s {CONFIG} ({self.detail}); HF_HUB_CACHE names a writable one",
        }[self.outcome]


def offline() -> bool:
    """Whether huggingface_hub is offline, read from the environment now as its constants module reads it
    at import (an empty HF_HUB_OFFLINE gives way to TRANSFORMERS_OFFLINE)."""
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.upper() in OFFLINE_TRUE


def endpoint() -> str:
    """HF_ENDPOINT as it is now, else the endpoint huggingface_hub took at import (its default Hub)."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _timeout() -> float:
    try:
        return float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or ETAG_TIMEOUT_S)
    except ValueError:
        return ETAG_TIMEOUT_S


_answers: dict[tuple[Any, ...], Answer] = {}
_silent_endpoints: set[str] = set()  # endpoints that did not answer in this run: not asked again
_lock = threading.Lock()


def fetch(repo_id: str, revision: str | None, cache_dir: Path) -> Answer:
    """What the Hub says of repo_id's config.json at `revision` (main if None), once per run and setting."""
    asked = revision or "main"
    if offline():
        return Answer("offline", repo_id, "", asked, False)
    from huggingface_hub import get_token
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        return Answer("not-a-repo-id", repo_id, "", asked, False, detail=str(error).splitlines()[0])
    hub = endpoint()
    try:
        token = get_token()  # HF_TOKEN, else the stored one (an OIDC exchange, where configured, may fail)
    except Exception as error:
        return Answer("refused", repo_id, hub, asked, False, detail=f"no token: {error}")
    key = (repo_id, asked, hub, token, str(cache_dir))
    with _lock:
        if key in _answers:
            return _answers[key]
        if hub in _silent_endpoints:
            return Answer(
                "unreachable", repo_id, hub, asked, bool(token), detail="no answer earlier in this run"
            )
    answer = _within_deadline(repo_id, asked, hub, token, cache_dir)
    with _lock:
        _answers[key] = answer
        if answer.outcome == "unreachable":
            _silent_endpoints.add(hub)
    return answer


def forget() -> None:
    """Drop what this run's look-ups learned (tests change the Hub between runs of one process)."""
    with _lock:
        _answers.clear()
        _silent_endpoints.clear()


def _within_deadline(repo_id: str, revision: str, hub: str, token: str | None, cache_dir: Path) -> Answer:
    # huggingface_hub retries a failed HEAD with a 60 s timeout when nothing is cached: a deadline bounds it.
    # The thread is a daemon: one still waiting when the deadline passes does not hold the process.
    box: list[Answer] = []
    worker = threading.Thread(
        target=lambda: box.append(_ask(repo_id, revision, hub, token, cache_dir)), daemon=True
    )
    worker.start()
    seconds = _timeout() * DEADLINE_REQUESTS
    worker.join(seconds)
    if box:
        return box[0]
    return Answer(
        "unreachable", repo_id, hub, revision, bool(token), detail=f"no answer within {seconds:g} s"
    )


def _ask(repo_id: str, revision: str, hub: str, token: str | None, cache_dir: Path) -> Answer:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    def answer(outcome: Outcome, detail: str = "", **found: Any) -> Answer:
        return Answer(outcome, repo_id, hub, revision, bool(token), detail=detail, **found)

    try:
        # HEAD first, without huggingface_hub's fall-back to the cache and its retries: what the Hub itself
        # says decides the outcome (a gated or missing revision is not hidden behind a cached copy).
        url = hf_hub_url(repo_id, CONFIG, revision=revision, endpoint=hub)
        head = get_hf_file_metadata(url, token=token or False, timeout=_timeout(), endpoint=hub)
        if not head.commit_hash:
            return answer("refused", "the answer carries no X-Repo-Commit: not a Hub endpoint?")
        config = Path(_download(repo_id, CONFIG, revision, hub, token, cache_dir))
        _index(repo_id, revision, hub, token, cache_dir)  # lands beside config.json, where it is read
    except Exception as error:  # the Hub's and the connection's errors alike: classified, never raised
        return answer(*_classify(error))
    anonymous = _anonymous(url, hub) if token else ""
    return answer("read", folder=config.parent, commit=head.commit_hash, anonymous=anonymous)


def _anonymous(url: str, hub: str) -> str:
    """The same HEAD without a token: the answer the engine's download gets without a tokenSecret."""
    from huggingface_hub import get_hf_file_metadata
    from huggingface_hub.errors import GatedRepoError

    try:
        get_hf_file_metadata(url, token=False, timeout=_timeout(), endpoint=hub)
    except GatedRepoError as error:
        return f"{getattr(error.response, 'status_code', '')} GatedRepo".strip()
    except Exception:
        return ""  # private, unreachable, refused: nothing clear about the licence gate
    return "ok"


def _download(
    repo_id: str, filename: str, revision: str, hub: str, token: str | None, cache_dir: Path
) -> str:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    quiet = are_progress_bars_disabled()
    disable_progress_bars()  # validate's output is its report, not a download's progress
    try:
        return hf_hub_download(
            repo_id,
            filename,
            revision=revision,
            cache_dir=cache_dir,
            endpoint=hub,
            token=token or False,
            etag_timeout=_timeout(),
        )
    finally:
        if not quiet:
            enable_progress_bars()


def _index(repo_id: str, revision: str, hub: str, token: str | None, cache_dir: Path) -> str | None:
    """The safetensors index, which a single-file checkpoint does not have. It only adds the weight bytes:
    whatever keeps it (absent, a failure after config.json came) leaves them to the parameter count."""
    try:
        return _download(repo_id, INDEX, revision, hub, token, cache_dir)
    except Exception:
        return None


def _classify(error: Exception) -> tuple[Outcome, str]:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    words = " ".join(str(error).split())[:300] or type(error).__name__
    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, GatedRepoError):  # before RepositoryNotFoundError, its base class
        return "gated", f"{status} GatedRepo"
    if isinstance(error, RevisionNotFoundError):
        return "no-revision", f"{status} RevisionNotFound"
    if isinstance(error, RepositoryNotFoundError):
        return "no-repo", f"{status} RepoNotFound"
    if isinstance(error, LocalEntryNotFoundError | OfflineModeIsEnabled):
        return "unreachable", words  # the HEAD answered, the download then did not (cache fall-back failed)
    if isinstance(error, EntryNotFoundError):
        return "no-config", f"{status} EntryNotFound"
    if isinstance(error, HfHubHTTPError) and status is not None and status < 500 and status != 429:
        return "refused", f"HTTP {status}: {words}"
    if getattr(error, "errno", None) in CACHE_ERRNOS:
        return "no-cache", f"{type(error).__name__}: {words}"
    return "unreachable", f"{type(error).__name__}: {words}"
