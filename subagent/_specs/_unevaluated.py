"""The ``unevaluatedItems`` and ``unevaluatedProperties`` keywords of JSON Schema
(drafts 2019-09 and 2020-12) as ``jsonschema`` keyword functions whose work is linear
in the instance and charged to a step bound.

``jsonschema``'s own functions list the evaluated indexes or keys and look each item
up in that list (quadratic: 60,000 items took 28 s). Here the evaluated ones are a
prefix length, an "all" flag and a set, gathered by one walk over the adjacent
in-place applicators (``$ref``, ``allOf``, ``anyOf``, ``oneOf``, ``if``/``then``/
``else``, ``dependentSchemas``) and the keywords that evaluate items or properties
(``prefixItems``, ``items``, ``additionalItems``, ``contains``, ``properties``,
``additionalProperties``, a nested ``unevaluated*``). An ``anyOf``/``oneOf`` branch or
an ``if`` counts only when the instance is valid against it; ``not`` never counts.
Other applicators are walked without a validity check: if one fails, the schema
holding the keyword fails anyway. The walk costs one step per schema visited, per key
of a ``properties`` and per item or key looked at; validity checks go through the
validator, whose keywords are charged too.

The schema may not use ``$id``, ``$dynamicRef``, ``$recursiveRef`` or
``patternProperties`` (refused before these run), so every ``$ref`` resolves from the
schema's root and no key is evaluated by a pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

import attrs


@attrs.define
class _Items:
    """The evaluated items of an array: ``all`` of them, or the first ``prefix`` and
    those at ``indexes``."""

    prefix: int = 0
    all: bool = False
    indexes: set[int] = attrs.Factory(set)


@attrs.define
class _Keys:
    """The evaluated properties of an object: ``all`` of them, or those in ``keys``."""

    all: bool = False
    keys: set[str] = attrs.Factory(set)


class Unevaluated:
    """The two keyword functions for one schema (pass :meth:`items` and
    :meth:`properties` to ``jsonschema.validators.extend``); plain synchronous code,
    not checkpoints, safe to call from several threads at once.

    Args:
      root: the whole schema (``$ref`` values resolve against it).
      charge: takes a count of steps; raises when the bound is passed.
      tuple_items: draft 2019-09's arrays (``items`` as a list of schemas, then
        ``additionalItems``; ``contains`` evaluates nothing) instead of 2020-12's
        (``prefixItems``, then ``items``).
    """

    def __init__(
        self, root: Mapping[str, Any], charge: Callable[[int], None], *, tuple_items: bool
    ) -> None:
        import referencing
        import referencing.jsonschema

        spec = referencing.jsonschema.specification_with(
            root.get("$schema", ""), default=referencing.jsonschema.DRAFT202012
        )
        registry: referencing.Registry[Any] = referencing.Registry()
        self._resolver = registry.with_resource("", spec.create_resource(root)).resolver(
            base_uri=""
        )
        self._charge = charge
        self._tuple_items = tuple_items

    def items(
        self, validator: Any, unevaluated: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        """The ``unevaluatedItems`` keyword (a ``jsonschema`` keyword function)."""
        if unevaluated is True or not isinstance(instance, list):
            return
        found = _Items()
        self._walk_items(validator, instance, schema, found, top=True)
        if found.all:
            return
        left = ((index, instance[index], instance[index])
                for index in range(found.prefix, len(instance)))
        yield from self._first_error(validator, unevaluated, left, found.indexes, "items")

    def properties(
        self, validator: Any, unevaluated: Any, instance: Any, schema: Any
    ) -> Iterator[Any]:
        """The ``unevaluatedProperties`` keyword (a ``jsonschema`` keyword function)."""
        if unevaluated is True or not isinstance(instance, dict):
            return
        found = _Keys()
        self._walk_keys(validator, instance, schema, found, top=True)
        if found.all:
            return
        left = ((key, value, key) for key, value in instance.items())
        yield from self._first_error(validator, unevaluated, left, found.keys, "properties")

    def _first_error(
        self, validator: Any, unevaluated: Any, left: Iterable[tuple[Any, Any, Any]],
        evaluated: Container[Any], what: str,
    ) -> Iterator[Any]:
        # The first of the (where, value, shown) not evaluated that ``unevaluated``
        # refuses, each looked at charged one step.
        import jsonschema

        for where, value, shown in left:
            self._charge(1)
            if where in evaluated:
                continue
            if unevaluated is False:
                yield jsonschema.ValidationError(
                    f"Unevaluated {what} are not allowed ({shown!r} was unexpected)",
                    path=[where],
                )
                return
            error = next(validator.descend(value, unevaluated, path=where), None)
            if error is not None:
                yield error
                return

    def _walk_items(
        self, validator: Any, instance: list[Any], schema: Any, found: _Items, top: bool
    ) -> None:
        # The items *schema* evaluates in place (in a schema the instance is valid
        # against, or the one holding the keyword: *top*, whose own keyword is skipped).
        self._charge(1)
        if found.all or not isinstance(schema, dict):
            return
        if self._tuple_items:
            items = schema.get("items")
            if isinstance(items, list):
                found.prefix = max(found.prefix, len(items))
                if "additionalItems" in schema:
                    found.all = True
            elif items is not None:
                found.all = True
        else:
            prefix = schema.get("prefixItems")
            if isinstance(prefix, list):
                found.prefix = max(found.prefix, len(prefix))
            if "items" in schema:
                found.all = True
            if "contains" in schema:
                contains = schema["contains"]
                for index, item in enumerate(instance):
                    self._charge(1)
                    if index not in found.indexes and _valid(validator, item, contains):
                        found.indexes.add(index)
        if not top and "unevaluatedItems" in schema:
            found.all = True
        if found.all:
            return
        for sub in self._in_place(validator, instance, schema):
            self._walk_items(validator, instance, sub, found, top=False)
            if found.all:
                return

    def _walk_keys(
        self, validator: Any, instance: dict[str, Any], schema: Any, found: _Keys, top: bool
    ) -> None:
        self._charge(1)
        if found.all or not isinstance(schema, dict):
            return
        if "additionalProperties" in schema or (not top and "unevaluatedProperties" in schema):
            found.all = True
            return
        properties = schema.get("properties")
        if isinstance(properties, dict):
            self._charge(len(properties))
            found.keys.update(name for name in properties if name in instance)
        dependent = schema.get("dependentSchemas")
        if isinstance(dependent, dict):
            self._charge(len(dependent))
            for name, sub in dependent.items():
                if name in instance:
                    self._walk_keys(validator, instance, sub, found, top=False)
        for sub in self._in_place(validator, instance, schema):
            self._walk_keys(validator, instance, sub, found, top=False)
            if found.all:
                return

    def _in_place(self, validator: Any, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        """The subschemas of *schema* that apply to *instance* itself and whose
        annotations count (``$ref``, ``allOf``, valid ``anyOf``/``oneOf`` branches,
        ``if`` and ``then`` or ``else``)."""
        ref = schema.get("$ref")
        if isinstance(ref, str):
            yield self._resolver.lookup(ref).contents
        yield from schema.get("allOf", ())
        for keyword in ("anyOf", "oneOf"):
            for sub in schema.get(keyword, ()):
                self._charge(1)
                if _valid(validator, instance, sub):
                    yield sub
        if "if" in schema:
            if _valid(validator, instance, schema["if"]):
                yield schema["if"]
                if "then" in schema:
                    yield schema["then"]
            elif "else" in schema:
                yield schema["else"]


def _valid(validator: Any, instance: Any, schema: Any) -> bool:
    return next(validator.descend(instance, schema), None) is None
