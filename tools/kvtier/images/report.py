"""Output of `kvtier images`: one reference a line (what a mirror script reads), a table, or JSON."""

from __future__ import annotations

import json
from typing import Any

from kvtier.images.listing import Image


def to_json(images: list[Image]) -> str:
    items: list[dict[str, Any]] = [
        {
            "image": i.image,
            "registry": i.reference.registry,
            "repository": i.reference.repository,
            "tag": i.reference.tag,
            "digest": i.reference.digest,
            "usedBy": [{"kind": u.kind, "name": u.name, "container": u.container} for u in i.used_by],
        }
        for i in images
    ]
    return json.dumps(items, indent=2)


def text(images: list[Image]) -> str:
    return "".join(f"{i.image}\n" for i in images)


def print_table(images: list[Image]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text  # plain text: an IPv6 registry's brackets are not markup

    table = Table(title="images the release pulls", title_justify="left")
    for column in ("image", "pulled as", "used by"):
        table.add_column(column, overflow="fold")
    for i in images:
        used = "\n".join(f"{u.kind}/{u.name} {u.container}" for u in i.used_by)
        table.add_row(Text(i.image), Text(str(i.reference)), Text(used))
    Console(width=max(Console().width, 120)).print(table)
