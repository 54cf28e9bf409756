"""kvtier.helmyaml against the real Helm 3 and Helm 4: generated plain scalars, as values and as keys, in
one values file; a throwaway chart prints `toJson .Values`, and validate's loader must read every value
and key as Helm did, types included (`y` is true, `1:20` is text, `1e3` a number, `0o17` is 15).
Scalars the model says Helm refuses (.inf, .nan, a null or 65-bit key) are each checked alone: Helm must
refuse the file and the loader must say so, naming the line."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from render import helm_bin

from kvtier import helm, helmyaml
from kvtier.errors import UserError
from kvtier.validate.inputs import loader

SEED = 20261203
GENERATED = 400
# pieces of scalars, weighted to the places where YAML 1.1, go-yaml and PyYAML part ways
PIECES = [
    *"0123456789", "0", "1", "_", ".", "e", "E", "+", "-", "x", "o", "b", "X", "O", "B", ":", "a", "f",
    "y", "n", "Y", "N", "on", "off", "yes", "no", "true", "null", "~", "inf", "nan", ".inf", ".nan",
    "T", "t", "Z", "-05:00", "2026-12-03", " 10:30:00",
]  # fmt: skip
KNOWN = [
    "y", "Y", "n", "N", "yes", "No", "on", "OFF", "tRue", "~", "null", "nUll", "1e3", "1.0e3", "1.5e+3",
    "1.", "-.5", ".5", "+1", "0o17", "017", "09", "08.5", "0x1F", "0b101", "-0b101", "0b-101", "1_000",
    "1__0", "_1", "1_", "0x_1F", "1:20", "10:30:00", "0:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
    "inf", "+inf", "0x1p-2", "1e400", "1e-400", "12345678901234567890", "-9223372036854775809",
    "9223372036854775807", "18446744073709551616", "0", "-0", "+0", "0.", "=", "1,000", "$1", "0x", "0b",
    "0o", "00", "-", "+", ".", "1e", "1e+", ".e3",
]  # fmt: skip
REFUSED_VALUES = [".inf", "-.inf", "+.INF", ".nan", ".NaN"]
REFUSED_KEYS = ["~", "null", "18446744073709551615", "9223372036854775808"]
TEMPLATE = "values: {{ toJson .Values | quote }}\n"


def is_plain_scalar(text: str) -> bool:
    """The text reads back as one plain scalar of exactly that text, as a value and as a key."""
    for doc in (f"k: {text}\n", f"{text}: v\n"):
        try:
            node = yaml.compose(doc, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            return False
        key, value = node.value[0]
        scalar = value if doc.startswith("k:") else key
        if not isinstance(scalar, yaml.ScalarNode) or scalar.style is not None or scalar.value != text:
            return False
    return True


def scalars() -> list[str]:
    rng = random.Random(SEED)
    out = [s for s in KNOWN if is_plain_scalar(s)]
    while len(out) < len(KNOWN) + GENERATED:
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 5))).strip()
        if text and text not in out and is_plain_scalar(text):
            out.append(text)
    return out


def typed(value: Any) -> Any:
    """A value with its JSON type spelled out: Python's True == 1 and 1 == 1.0 must not hide a mismatch."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    return ("number", float(value))


@pytest.fixture(scope="module")
def chart(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("yaml-chart")
    (folder / "templates").mkdir()
    (folder / "Chart.yaml").write_text("apiVersion: v2\nname: yamlprobe\nversion: 0.1.0\n")
    (folder / "templates" / "values.yaml").write_text(TEMPLATE)
    return folder


def helm_reads(chart: Path, values: Path, major: int) -> tuple[Any, str]:
    """(Helm's values, '') or (None, Helm's error)."""
    result = helm.run(["template", "probe", str(chart), "--values", str(values)], major=major, timeout=120)
    if result.returncode:
        return None, result.stderr.strip()
    return json.loads(yaml.safe_load(result.stdout)["values"]), ""


def expected_refusal(text: str, as_key: bool) -> bool:
    value = helmyaml.resolve(text)[1]
    if as_key:
        return helmyaml.key_text(value) is None
    return bool(helmyaml.json_problem(value))


@pytest.mark.parametrize("major", [3, 4])
def test_every_generated_scalar_reads_as_helm_reads_it(need, chart: Path, tmp_path: Path, major: int) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built: run `make tools`")
    texts = scalars()
    values = [t for t in texts if not expected_refusal(t, as_key=False)]
    keys, seen = [], set()
    for text in texts:
        # two keys that become the same JSON key would race in Go's map: one each
        json_key = helmyaml.key_text(helmyaml.resolve(text)[1])
        if json_key is not None and json_key not in seen:
            seen.add(json_key)
            keys.append(text)
    lines = [f"v{i}: {text}" for i, text in enumerate(values)]
    lines += ["keys:"] + [f"  {text}: {i}" for i, text in enumerate(keys)]
    path = tmp_path / "values.yaml"
    path.write_text("\n".join(lines) + "\n")
    theirs, error = helm_reads(chart, path, major)
    assert theirs is not None, f"Helm {major} refused a file the model reads: {error}"
    mine = loader.load(path).data
    for i, text in enumerate(values):
        assert typed(mine[f"v{i}"]) == typed(theirs[f"v{i}"]), f"value {text!r}"
    assert sorted(mine["keys"]) == sorted(theirs["keys"]), "keys as Helm turns them into JSON keys"
    assert typed(mine) == typed(theirs)
    assert len(values) > 300 and len(keys) > 150, "the generator lost its reach"


@pytest.mark.parametrize("major", [3, 4])
def test_a_file_helmyaml_writes_reads_back_in_helm_as_written(
    need, chart: Path, tmp_path: Path, major: int
) -> None:
    """Every generated text as a string value (PyYAML would leave `y`, `0E0` or `0o17` unquoted, and Helm
    would retype them), beside integers either side of 64 bits."""
    need(helm_bin(major).exists(), f"pinned Helm {major} not built: run `make tools`")
    numbers = [0, -1, 2**53, 2**63 - 1, -(2**63) - 1, 2**64]
    data = {"text": scalars(), "numbers": numbers, "flags": [True, None]}
    path = tmp_path / "written.yaml"
    path.write_text(helmyaml.dump(data, sort_keys=False))
    theirs, error = helm_reads(chart, path, major)
    assert theirs is not None, error
    assert typed(theirs) == typed(data)


@pytest.mark.parametrize("major", [3, 4])
@pytest.mark.parametrize(
    ("text", "as_key"), [(t, False) for t in REFUSED_VALUES] + [(t, True) for t in REFUSED_KEYS]
)
def test_a_scalar_helm_cannot_convert_is_refused_with_its_line(
    need, chart: Path, tmp_path: Path, major: int, text: str, as_key: bool
) -> None:
    need(helm_bin(major).exists(), f"pinned Helm {major} not built: run `make tools`")
    assert expected_refusal(text, as_key), "the model must predict this refusal"
    path = tmp_path / "values.yaml"
    path.write_text(f"# a comment\n{text}: 1\n" if as_key else f"# a comment\nk: {text}\n")
    theirs, error = helm_reads(chart, path, major)
    assert theirs is None, f"Helm {major} read {text!r}: {theirs}"
    assert "unsupported" in error, error
    with pytest.raises(UserError, match=rf"{path}:2:\d+: .*(JSON|key)"):
        loader.load(path)


def test_the_model_reads_numbers_as_go_does() -> None:
    """Spot checks whose oracle is Go's strconv documentation, not Helm: base prefixes, the leading-zero
    octal, underscores dropped, the float64 rounding of the JSON step and Go's float32 %g for keys."""
    assert helmyaml.resolve("0o17") == (helmyaml.INT_TAG, 15)
    assert helmyaml.resolve("017") == (helmyaml.INT_TAG, 15)
    assert helmyaml.resolve("09") == (helmyaml.FLOAT_TAG, 9.0)  # not octal, but a decimal float
    assert helmyaml.resolve("1_0_0") == (helmyaml.INT_TAG, 100)
    assert helmyaml.resolve("1:20") == (helmyaml.STR_TAG, "1:20")
    assert helmyaml.json_number(2**60 + 1) == float(2**60)
    assert math.isnan(helmyaml.resolve(".NaN")[1])
    assert [helmyaml.go_float32_g(f) for f in (1000.0, 1e6, 1e-5, 0.1, 16777217.0)] == [
        "1000", "1e+06", "1e-05", "0.1", "1.6777216e+07",
    ]  # fmt: skip
