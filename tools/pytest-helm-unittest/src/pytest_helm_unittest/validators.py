"""Every helm-unittest assertion type: its check, whether it is an antonym (notEqual is equal
negated), and whether it needs a successful render (only failedTemplate does not)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_helm_unittest.checks import Context, Result
from pytest_helm_unittest.checks_documents import (
    contains_document,
    equal_raw,
    failed_template,
    field_is,
    has_documents,
    match_regex_raw,
    snapshot_check,
)
from pytest_helm_unittest.checks_values import (
    contains,
    equal,
    exists,
    is_subset,
    is_type,
    length_equal,
    match_regex,
    null_or_empty,
    operator_check,
)

__all__ = ["VALIDATORS", "Context", "Result"]

# name -> (validator, antonym, requires a successful render)
VALIDATORS: dict[str, tuple[Callable[[Any, Context], Result], bool, bool]] = {
    "matchSnapshot": (snapshot_check(False), False, True),
    "matchSnapshotRaw": (snapshot_check(True), False, True),
    "equal": (equal, False, True),
    "notEqual": (equal, True, True),
    "greaterOrEqual": (operator_check("greater"), False, True),
    "notGreaterOrEqual": (operator_check("greater"), True, True),
    "lessOrEqual": (operator_check("less"), False, True),
    "notLessOrEqual": (operator_check("less"), True, True),
    "equalRaw": (equal_raw, False, True),
    "notEqualRaw": (equal_raw, True, True),
    "exists": (exists, False, True),
    "notExists": (exists, True, True),
    "isNull": (exists, True, True),
    "isNotNull": (exists, False, True),
    "matchRegex": (match_regex, False, True),
    "notMatchRegex": (match_regex, True, True),
    "matchRegexRaw": (match_regex_raw, False, True),
    "notMatchRegexRaw": (match_regex_raw, True, True),
    "contains": (contains, False, True),
    "notContains": (contains, True, True),
    "isKind": (field_is("kind", " to be kind"), False, True),
    "isAPIVersion": (field_is("apiVersion", " to be apiVersion"), False, True),
    "hasDocuments": (has_documents, False, True),
    "isSubset": (is_subset, False, True),
    "isNotSubset": (is_subset, True, True),
    "isNullOrEmpty": (null_or_empty, False, True),
    "isNotNullOrEmpty": (null_or_empty, True, True),
    "isEmpty": (null_or_empty, False, True),
    "isNotEmpty": (null_or_empty, True, True),
    "failedTemplate": (failed_template, False, False),
    "notFailedTemplate": (failed_template, True, True),
    "containsDocument": (contains_document, False, True),
    "lengthEqual": (length_equal, False, True),
    "notLengthEqual": (length_equal, True, True),
    "isType": (is_type, False, True),
    "isNotType": (is_type, True, True),
}
