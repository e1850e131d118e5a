"""The report's rows: RLX's op kinds in the categories and order of RLX's coverage page
(``rlx_kinds.toml``, with the RLX commits they were read from), then the kinds rlx_ref
registers that RLX's list lacks."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

KINDS_FILE = Path(__file__).with_name("rlx_kinds.toml")
RLX_ONLY_TITLE = "rlx_ref-only kinds"


@dataclass(frozen=True)
class RlxKinds:
    """RLX's kind list: categories ``(title, kinds)`` in page order, where it came from,
    which kinds RLX's page itself lists, and RLX's quant schemes by family."""

    categories: tuple
    source: dict
    on_page: frozenset
    quant_families: tuple

    @property
    def kinds(self) -> list:
        return [k for _, ks in self.categories for k in ks]


@lru_cache(maxsize=None)
def rlx_kinds(path: str | None = None) -> RlxKinds:
    """Parse ``rlx_kinds.toml`` (or ``path``); a kind listed twice is an error."""
    with open(path or KINDS_FILE, "rb") as f:
        data = tomllib.load(f)
    cats, seen, on_page = [], set(), set()
    for cat in data["category"]:
        kinds = tuple(cat["kinds"]) + tuple(cat.get("added", ()))
        twice = seen.intersection(kinds) | {k for k in kinds if kinds.count(k) > 1}
        if twice:
            raise ValueError(f"{path or KINDS_FILE}: {sorted(twice)} listed more than once")
        seen.update(kinds)
        on_page.update(cat["kinds"])
        cats.append((cat["title"], kinds))
    fams = tuple((q["family"], tuple(q["schemes"])) for q in data.get("quant", ()))
    return RlxKinds(tuple(cats), dict(data.get("source", {})), frozenset(on_page), fams)


def row_plan(registered: list) -> list:
    """``[(title, [(kind, registered?)...])]``: RLX's categories with every RLX kind (a kind
    rlx_ref lacks is kept, unregistered), then the kinds only rlx_ref has (sorted)."""
    have = set(registered)
    rk = rlx_kinds()
    plan = [(title, [(k, k in have) for k in kinds]) for title, kinds in rk.categories]
    extra = sorted(have - set(rk.kinds))
    if extra:
        plan.append((RLX_ONLY_TITLE, [(k, True) for k in extra]))
    return plan


def source_note() -> str:
    """Where the row list came from, for the pages."""
    s = rlx_kinds().source
    return (f"`{s['enum_path']}` (`pub enum OpKind`, {s['enum_kinds']} kinds) at "
            f"{s['repository']}@{s['enum_commit'][:12]} and the categories of RLX's "
            f"`{s['page_path']}` at @{s['page_commit'][:12]}")
