"""kvtier.validate.inputs.setvalues against the real Helm 3 and Helm 4: each case's --set/--set-string flags
(over an -f file) rendered by a throwaway chart as `toJson .Values`, and Helm's refusals refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin, render

from kvtier.errors import UserError
from kvtier.validate.inputs import merge, setvalues

TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: values
data:
  values: {{ toJson .Values | quote }}
"""
DEFAULTS = {"keep": 1, "models": [{"name": "default"}], "nested": {"a": 1}}
BASE = {"models": [{"name": "a", "model": "m"}, {"name": "b"}], "text": "plain", "nothing": None}

# name -> (--set expressions, --set-string expressions)
CASES: dict[str, tuple[list[str], list[str]]] = {
    "nesting": (["a.b.c=x", "nested.b=2"], []),
    "types": (["n=1,f=1.5,t=TRUE,fa=false,z=0,o=007,neg=-3,plus=+4,big=99999999999999999999,nul=null"], []),
    "null removes a default": (["nested.a=null,keep=NULL"], []),
    "a list in braces": (["l={x,1,true,},m={}"], []),
    "an index with a gap": (["arr[2]=x"], []),
    "keys inside list items": (["arr[0].name=x,arr[0].port=80,arr[1].name=y"], []),
    "into the -f file's list": (["models[0].name=z", "models[1].extra=1"], []),
    "nested lists": (["m[0][1]=x,m[1][0].k=v"], []),
    "escapes": (["a\\.b=c", "v=x\\,y", "w=a\\=b", "back=x\\\\y"], []),
    "empty values": (["e=", "k=v,"], []),
    "a value with = in it": (["eq=a=b"], []),
    "strings": ([], ["s=1,t=true,n=null"]),
    "every --set before every --set-string": (["o=1"], ["o=str"]),
    "an index without a value": (["arr[0]"], []),
}
REFUSED: dict[str, tuple[list[str], list[str]]] = {
    "no value": (["a"], []),
    "no value before a comma": (["a,b=1"], []),
    "a word as index": (["a[x]=1"], []),
    "an unclosed index": (["a[0"], []),
    "an unclosed list": (["l={x,y"], []),
    "a key under a string": (["text.x=1"], []),
    "a key under a null": (["nothing.x=1"], []),
    "an index into a string": (["text[0]=1"], []),
    "a key map without a value": (["a.=1"], []),
    "a negative index": (["a[-1]=1"], []),
}
# Refused by Helm 3 only: Helm 4 ends the expression there without a word (a typo all the same).
HELM3_ONLY = {"an unclosed index"}


@pytest.fixture(scope="module")
def chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("helm-set") / "setchart"
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v2", "name": "setchart", "version": "0.1.0"})
    )
    (root / "values.yaml").write_text(yaml.safe_dump(DEFAULTS))
    (root / "templates" / "values.yaml").write_text(TEMPLATE)
    (root / "base.yaml").write_text(yaml.safe_dump(BASE))
    return root


def _flags(sets: list[str], strings: list[str]) -> list[str]:
    # --set-string first on the command line: Helm still applies it after every --set
    return [arg for s in strings for arg in ("--set-string", s)] + [arg for s in sets for arg in ("--set", s)]


def helm(chart: Path, sets: list[str], strings: list[str], major: int) -> Any:
    result = render(chart, values=[chart / "base.yaml"], major=major, extra=_flags(sets, strings))
    if result.returncode != 0:
        return result.stderr
    [doc] = [d for d in yaml.safe_load_all(result.stdout) if d]
    return json.loads(doc["data"]["values"])


def ours(chart: Path, sets: list[str], strings: list[str]) -> dict[str, Any]:
    user = setvalues.apply(BASE, sets, strings)
    return merge.compute(user, merge.load_chart(chart)).values


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("case", sorted(CASES))
def test_set_values_are_helms(need, chart: Path, case: str, major: int) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built: run `make tools`")
    theirs = helm(chart, *CASES[case], major)
    assert not isinstance(theirs, str), f"Helm {major} refused: {theirs}"
    assert ours(chart, *CASES[case]) == theirs


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_helm_refuses_is_refused(need, chart: Path, case: str, major: int) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built: run `make tools`")
    theirs = helm(chart, *REFUSED[case], major)
    if major == 4 and case in HELM3_ONLY:
        assert not isinstance(theirs, str), f"Helm 4 refuses it now: {theirs}; drop it from HELM3_ONLY"
    else:
        assert isinstance(theirs, str), f"Helm {major} rendered {theirs}"
    with pytest.raises(
        UserError, match="Helm 3 refuses it, Helm 4 ignores" if case in HELM3_ONLY else "Helm refuses it too"
    ):
        ours(chart, *REFUSED[case])


def test_typed_values() -> None:
    assert [setvalues.typed(v) for v in ("1", "-3", "007", "0", "1.5", "True", "NULL", "")] == [
        1,
        -3,
        "007",
        0,
        "1.5",
        True,
        None,
        "",
    ]
    assert setvalues.typed("1", strings=True) == "1"
    assert setvalues.typed(str(2**63)) == str(2**63), "beyond int64: a string, as in Helm"


def test_the_base_is_not_changed() -> None:
    base = {"models": [{"name": "a"}]}
    assert setvalues.apply(base, ["models[0].name=b"], []) == {"models": [{"name": "b"}]}
    assert base == {"models": [{"name": "a"}]}
