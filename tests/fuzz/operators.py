"""The mutation operators' registry and the context one mutation runs in.

An operator has a family (``json``, ``cell``, ``payload``, ``bomb``, ``shard``, ``tree``),
a ``targets`` function listing what it can act on in a store (an empty list: it does not
apply to that store) and an ``apply`` function that mutates a copy of the store given
one target and a seeded ``random.Random``, returning a one-line description.  A case is
``(seed store, operator, rng seed)``: the target is ``rng.choice(targets)`` and every
further choice comes from the same generator, so a case replays exactly.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .storeio import ArrayInfo, Inventory


@dataclass
class Ctx:
    """One mutation: the store copy, a directory outside it, the generator, the seed's inventory."""

    store: Path
    outside: Path
    rng: random.Random
    inv: Inventory

    def path(self, key: str) -> Path:
        return self.store / key if key else self.store

    def read(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def write(self, key: str, data: bytes) -> None:
        self.path(key).write_bytes(data)

    def doc(self, key: str) -> Any:
        return json.loads(self.read(key))

    def write_doc(self, key: str, doc: Any) -> None:
        self.write(key, json.dumps(doc, indent=2).encode())

    def array(self, node: str) -> ArrayInfo:
        return next(a for a in self.inv.arrays if a.node == node)


@dataclass(frozen=True)
class Operator:
    name: str
    family: str
    targets: Callable[[Inventory], list[Any]]
    apply: Callable[[Ctx, Any], str]
    doc: str


OPERATORS: dict[str, Operator] = {}


def operator(name: str, family: str, targets: Callable[[Inventory], list[Any]]) -> Callable[[Callable], Callable]:
    """Register ``apply`` (its docstring says what the mutation is) under ``name``."""

    def register(apply: Callable[[Ctx, Any], str]) -> Callable[[Ctx, Any], str]:
        if name in OPERATORS:
            raise ValueError(f"operator {name!r} registered twice")
        OPERATORS[name] = Operator(name, family, targets, apply, (apply.__doc__ or "").strip().split("\n")[0])
        return apply

    return register


def mutate(op: Operator, store: Path, outside: Path, inv: Inventory, rng_seed: int, seed_name: str) -> str:
    """Apply one case's mutation to ``store`` (a fresh copy of the seed); its description."""
    rng = random.Random(f"{seed_name}/{op.name}/{rng_seed}")
    targets = op.targets(inv)
    if not targets:
        raise LookupError(f"operator {op.name} has no target in seed {seed_name}")
    by_role: dict[str, list[Any]] = {}
    for t in targets:
        by_role.setdefault(inv.role(t), []).append(t)
    roles = sorted(by_role)
    group = by_role[roles[rng.randrange(len(roles))]]  # a role first, then one of its targets
    target = group[rng.randrange(len(group))]
    return op.apply(Ctx(store, outside, rng, inv), target)


def load_all() -> dict[str, Operator]:
    """Every operator (importing the modules registers them)."""
    from . import ops_bytes, ops_json, ops_tree  # noqa: F401

    return OPERATORS
