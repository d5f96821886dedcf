"""Pointing a user at a mistake in their file: where it is, and what they probably meant.

Inventories and playbooks are hand-written YAML, so every error about them has to name a
real ``file:line:field``. PyYAML's ``safe_load`` throws node positions away; the loader
here keeps them on the containers it builds (``LineMap.key_lines``, ``LineList.item_lines``)
while the data stays ordinary dicts and lists that the rest of the code can use as is.

Inventories also come from CMDBs and cloud tags, so the loader bounds what a file may
cost: a ~440-byte alias bomb (``&a [x, x, ...]``, ``&b [*a, *a, ...]``, ...) expands ten
times per level, nesting deeper than any setting needs, an alias inside its own anchor
(a loop every walker follows for ever). Each is refused while the document is composed,
in time proportional to its text, at the line and the key path where it was written.
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Iterable

import yaml

from reprofleet.errors import InputError, Location


class LineMap(dict[Any, Any]):
    """A YAML mapping that remembers the line of itself and of each of its keys."""

    line: int | None = None
    key_lines: dict[Any, int]


class LineList(list[Any]):
    """A YAML sequence that remembers the line of itself and of each item."""

    line: int | None = None
    item_lines: list[int]


def line_of(container: Any, key: Any = None) -> int | None:
    """Line (1-based) where ``key`` (or ``container`` itself) was written, if known."""
    if key is None:
        return getattr(container, "line", None)
    if isinstance(container, LineMap):
        return container.key_lines.get(key, container.line)
    if isinstance(container, LineList) and isinstance(key, int):
        if 0 <= key < len(container.item_lines):
            return container.item_lines[key]
        return container.line
    return None


def did_you_mean(word: object, choices: Iterable[str]) -> str:
    """`` (did you mean 'attempts'?)`` for the closest choice, or ``""`` when none is close."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        close = [c for c in choices if c.lower() == word.lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


def plain(value: Any) -> Any:
    """A deep copy of ``value`` as plain dicts and lists (no line bookkeeping)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


MAX_YAML_CHARS = 16 << 20  # one inventory, vars file or playbook
MAX_NODES = 200_000  # values in one document once every alias is expanded
MAX_DEPTH = 64  # mappings and lists inside each other


class YamlTooBig(yaml.MarkedYAMLError):
    """A document refused while it was composed: too many values once aliases are expanded,
    too deep, or an alias inside its own anchor; ``field`` is the key path it was at."""

    def __init__(self, problem: str, mark: Any, field: str) -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.field = field


class LocatedLoader(yaml.SafeLoader):
    """SafeLoader that builds LineMap/LineList; subclasses may add tags or reject duplicates.

    Composing is bounded (MAX_NODES once expanded, MAX_DEPTH, no alias loops): see the
    module's docstring."""

    #: called as ``on_duplicate(key, line)`` for a key written twice in one mapping
    on_duplicate: Callable[[Any, int], None] | None = None

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._expanded = 0  # values composed so far, every alias counted as the values it stands for
        self._anchor_sizes: dict[str, int] = {}
        self._open_anchors: set[str] = set()
        self._path: list[str] = []

    def _field(self) -> str:
        shown = self._path if len(self._path) <= 6 else self._path[:3] + ["..."] + self._path[-2:]
        return "".join(part if part.startswith("[") else f".{part}" for part in shown).lstrip(".") or "(document)"

    def _count(self, values: int, mark: Any) -> None:
        self._expanded += values
        if self._expanded > MAX_NODES:
            raise YamlTooBig(f"more than {MAX_NODES} values once its aliases are expanded (an alias bomb?)",
                             mark, self._field())

    def compose_node(self, parent: Any, index: Any) -> Any:
        name = (f"[{index}]" if isinstance(index, int) else str(index.value)[:60]
                if isinstance(index, yaml.ScalarNode) else None)
        if name is not None:
            self._path.append(name)
        try:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                if event.anchor in self._open_anchors:
                    raise YamlTooBig(f"alias *{event.anchor} is inside its own anchor (a loop)", event.start_mark,
                                     self._field())
                self._count(self._anchor_sizes.get(str(event.anchor), 1), event.start_mark)
                return super().compose_node(parent, index)
            if len(self._path) >= MAX_DEPTH or self._depth >= MAX_DEPTH:
                raise YamlTooBig(f"nested deeper than {MAX_DEPTH} levels", event.start_mark, self._field())
            anchor = getattr(event, "anchor", None)
            start = self._expanded
            self._count(1, event.start_mark)
            if anchor is not None:
                self._open_anchors.add(anchor)
            self._depth += 1
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
                self._open_anchors.discard(anchor)
            if anchor is not None:
                self._anchor_sizes[anchor] = self._expanded - start
            return node
        finally:
            if name is not None:
                self._path.pop()

    _depth = 0

    def construct_located_mapping(self, node: yaml.MappingNode) -> LineMap:
        explicit = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
        self.flatten_mapping(node)  # resolves '<<: *anchor' merge keys first
        merged = len(node.value) - explicit
        mapping = LineMap()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        explicit_keys: set[Any] = set()
        for position, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                ) from None
            if position >= merged:  # keys from a merged anchor may be overridden
                if key in explicit_keys and self.on_duplicate is not None:
                    self.on_duplicate(key, line)
                explicit_keys.add(key)
            mapping[key] = self.construct_object(value_node, deep=True)
            mapping.key_lines[key] = line
        return mapping

    def construct_located_sequence(self, node: yaml.SequenceNode) -> LineList:
        items = LineList(self.construct_object(child, deep=True) for child in node.value)
        items.line = node.start_mark.line + 1
        items.item_lines = [child.start_mark.line + 1 for child in node.value]
        return items


LocatedLoader.add_constructor("tag:yaml.org,2002:map", LocatedLoader.construct_located_mapping)
LocatedLoader.add_constructor("tag:yaml.org,2002:seq", LocatedLoader.construct_located_sequence)


def load_located_yaml(
    text: str,
    file: str,
    error: type[InputError],
    *,
    loader: type[LocatedLoader] = LocatedLoader,
    reject_duplicates: bool = False,
) -> Any:
    """Parse one YAML document; syntax errors become ``error`` at the line YAML names.

    ``reject_duplicates`` turns a key written twice in one mapping into an error (YAML
    silently keeps the last one, which hides a pasted-twice ``env:`` block).
    """

    def duplicate(key: Any, line: int) -> None:
        raise error(Location(file, line, str(key)), f"key {key!r} is written twice in this mapping")

    if len(text) > MAX_YAML_CHARS:
        raise error(Location(file, 1, "(document)"), f"larger than {MAX_YAML_CHARS >> 20} MiB: not a hand-written file")

    try:
        instance = loader(text)  # the reader checks every character here
    except yaml.reader.ReaderError as exc:
        at = text[: max(exc.position, 0)].count("\n") + 1
        raise error(Location(file, at), f"YAML syntax: character {chr(exc.character)!r} is not allowed in YAML "
                    f"(column {exc.position - text.rfind(chr(10), 0, exc.position)})") from None
    if reject_duplicates:
        instance.on_duplicate = duplicate
    try:
        return instance.get_single_data()
    except YamlTooBig as exc:
        at = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
        raise error(Location(file, at, exc.field), f"YAML refused: {exc.problem}") from None
    except RecursionError:
        raise error(Location(file, 1, "(document)"), f"YAML refused: nested deeper than {MAX_DEPTH} levels") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        what = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        if exc.context_mark is not None and mark is not None and exc.context_mark.line != mark.line:
            what += f" (it began on line {exc.context_mark.line + 1})"
        raise error(Location(file, line), f"YAML syntax: {what}") from None
    except yaml.reader.ReaderError as exc:
        at = text[: max(exc.position, 0)].count("\n") + 1
        raise error(Location(file, at), f"YAML syntax: character {chr(exc.character)!r} is not allowed in YAML") from None
    except yaml.YAMLError as exc:
        raise error(Location(file, 1), "YAML syntax: " + " ".join(str(exc).split())) from None
    finally:
        instance.dispose()
