"""The strict YAML loader of sweep specs and `--set` values: `SpecLoader`, a `yaml.SafeLoader`.

It refuses, in one line naming the line of the file, what `yaml.safe_load` would take silently or
could not survive: a key written twice in one mapping (YAML keeps only the last, so a factor's
levels could be overwritten without a word), a sweep file over 1 MiB or not a regular file (checked
before a byte is parsed), an alias bomb ("billion laughs"), an alias inside what it names, and
nesting deep enough to exhaust Python's recursion. Values PyYAML cannot construct (`!!int abc`, the
date 2001-13-45, an integer over 4,300 digits) are refused the same way, not with a traceback.
"""
from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import yaml

from gptlab.errors import GptlabError, first_line, shown

# Limits of the loader. A real sweep is a few kilobytes, a few levels deep, with at most a seeds
# list of 10,000 entries (sweep.runs MAX_SEEDS); these are generous multiples of that, and keep a
# hostile or mangled file (an alias bomb, 10^5 nested brackets) from hanging the lab or its memory.
MAX_SPEC_BYTES = 2**20  # a sweep file over 1 MiB is refused before it is parsed
MAX_SPEC_NODES = 20_000  # values in the spec, counting every expansion of an alias (pure-Python YAML: ~1 s)
MAX_SPEC_DEPTH = 32  # nesting of mappings and lists, aliases expanded (a sweep needs about 5)
_MERGE_TAG = "tag:yaml.org,2002:merge"


SWEEP_MAPPING = "a sweep must be a YAML mapping with name, base and grid"


def read_spec_file(path: str | Path, mapping: str = SWEEP_MAPPING) -> dict[str, Any]:
    """Read a sweep YAML with the lab's strict loader (`SpecLoader`): size first, then parse.

    `mapping` is what the error says when the file holds no mapping (a claims file has its own words).
    A file that is not a regular file or is over MAX_SPEC_BYTES is refused before a byte is parsed;
    a duplicate key, an alias bomb or absurd nesting is refused in one line with its line number.
    """
    path = Path(path)
    try:
        info = path.stat()
    except (OSError, ValueError):  # ValueError: a NUL in the name
        raise GptlabError(f"sweep file {path} not found") from None
    if stat.S_ISDIR(info.st_mode):
        raise GptlabError(f"sweep file {path} not found (it is a directory)")
    if not stat.S_ISREG(info.st_mode):  # a FIFO or a device would block or never end
        raise GptlabError(f"sweep file {path} is not a regular file (a device or a pipe?); give a YAML file")
    too_big = GptlabError(f"{path}: over {MAX_SPEC_BYTES // 2**20} MiB ({info.st_size:,} bytes); a sweep file is a "
                          "few kilobytes of YAML, so this is not one")
    if info.st_size > MAX_SPEC_BYTES:
        raise too_big
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SPEC_BYTES + 1)  # bounded even if the file grew since stat
    except OSError as err:
        raise GptlabError(f"sweep file {path}: cannot read it ({err.strerror or err})") from None
    if len(data) > MAX_SPEC_BYTES:
        raise too_big
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise GptlabError(f"{path}: not UTF-8 text (byte {err.start}); a sweep is a YAML file") from None
    raw = load_yaml(text, str(path))
    if not isinstance(raw, dict):
        raise GptlabError(f"{path}: {mapping}, got {_what(raw)}")
    return raw


def _what(raw: Any) -> str:
    return "an empty file" if raw is None else "a list" if isinstance(raw, list) else "a single value"


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """`--set train.lr=3e-4` items -> {dotted key: value parsed as YAML, by the sweep file's loader}."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise GptlabError(f"--set expects KEY=VALUE, got {shown(item)}")
        if key in overrides:  # as in a YAML mapping: a second value must not silently replace the first
            raise GptlabError(f"--set {shown(key)}: given twice; give each key once")
        overrides[key] = load_yaml(value, f"--set {shown(key)}")
    return overrides


class SpecLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses what a sweep never needs and a silent loss would hide.

    Refused: a key written twice in one mapping (YAML keeps only the last, so a factor's levels
    could be overwritten without a word); more than MAX_SPEC_NODES values or MAX_SPEC_DEPTH levels,
    counted both while composing (so a huge file stops early) and through every alias (a "billion
    laughs" is a few lines whose expansion is exponential); an alias inside what it names (a cycle).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._composed = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        mark = self.peek_event().start_mark
        self._composed += 1
        if self._composed > MAX_SPEC_NODES:
            raise yaml.composer.ComposerError(None, None, f"more than {MAX_SPEC_NODES:,} values; a sweep has a few "
                                              "dozen", mark)
        if self._depth >= MAX_SPEC_DEPTH:  # the composer recurses: stop long before Python's recursion limit
            raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_SPEC_DEPTH} levels deep", mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # PyYAML's scalar constructors raise a bare ValueError for `!!int abc`, the date 2001-13-45 or an
        # integer over Python's 4,300-digit limit: name the line instead of showing a traceback.
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as err:
            raise yaml.constructor.ConstructorError(None, None, f"cannot read the value {shown(node.value)}: {err}",
                                                    node.start_mark) from None

    def check_graph(self, root: yaml.Node) -> None:
        """Size, depth and cycles of the composed graph with aliases expanded, and duplicate keys.

        Iterative and memoised by node: an alias bomb is measured without being expanded.
        """
        size: dict[int, int] = {}
        height: dict[int, int] = {}
        visiting: set[int] = set()
        stack: list[tuple[yaml.Node, bool, str]] = [(root, False, "")]
        while stack:
            node, finished, where = stack.pop()
            key = id(node)
            children = _children(node)
            if finished:
                visiting.discard(key)
                size[key] = 1 + sum(size[id(c)] for c in children)
                height[key] = 1 + max((height[id(c)] for c in children), default=0)
                if size[key] > MAX_SPEC_NODES:
                    raise _graph_error(f"more than {MAX_SPEC_NODES:,} values once aliases are expanded (an alias "
                                       "repeated inside what it repeats?)", node, where)
                if height[key] > MAX_SPEC_DEPTH:
                    raise _graph_error(f"nested more than {MAX_SPEC_DEPTH} levels deep once aliases are expanded",
                                       node, where)
                continue
            if key in size:
                continue
            if key in visiting:
                raise _graph_error("an alias refers to a mapping or list that contains it (a cycle)", node, where)
            visiting.add(key)
            if isinstance(node, yaml.MappingNode):
                self._check_unique_keys(node, where)
            stack.append((node, True, where))
            labels = _child_labels(node, where)
            stack.extend((c, False, label) for c, label in zip(reversed(children), reversed(labels)))

    def _check_unique_keys(self, node: yaml.MappingNode, where: str) -> None:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
                continue  # a non-scalar key is refused by the constructor; merged keys may be overridden
            key = self.construct_object(key_node, deep=True)  # so `true` and `yes`, `1` and `0x1` are one key
            try:
                first = seen.get(key)
            except TypeError:  # unhashable: the constructor refuses it
                continue
            if first is not None:
                under = f" under {where}" if where else " at the top level"
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {shown(key)}{under} is written twice (first at line {first.line + 1}); a "
                    "mapping keeps only the last one, so remove one", key_node.start_mark)
            seen[key] = key_node.start_mark


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _child_labels(node: yaml.Node, where: str) -> list[str]:
    """Where each child sits, for messages: 'grid.model.norm', 'exclude[0]'."""
    if isinstance(node, yaml.SequenceNode):
        return [f"{where}[{i}]" for i in range(len(node.value))]
    labels = []
    for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else []:
        name = key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"
        name = name if len(name) <= 40 else name[:40] + "..."
        labels += [where or "the top level", f"{where}.{name}" if where else name]
    return labels


def _graph_error(problem: str, node: yaml.Node, where: str) -> yaml.YAMLError:
    return yaml.composer.ComposerError(None, None, f"{where or 'the spec'}: {problem}", node.start_mark)




def load_yaml(text: str, source: str) -> Any:
    """Parse YAML text with `SpecLoader`; any problem is one `GptlabError` naming `source` and the line."""
    loader = None
    try:
        loader = SpecLoader(text)  # its reader refuses a character YAML does not allow
        root = loader.get_single_node()
        if root is None:
            return None
        loader.check_graph(root)
        return loader.construct_document(root)
    except yaml.reader.ReaderError as err:  # a character YAML does not allow (NUL, most control characters)
        line = text.count("\n", 0, err.position) + 1
        char = err.character if isinstance(err.character, int) else ord(err.character)
        raise GptlabError(f"{source}: invalid YAML at line {line}: the character U+{char:04X} is not allowed in "
                          "YAML (a control character?)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or first_line(err)
        raise GptlabError(one_line(f"{source}: invalid YAML{where}: {problem}")) from None
    finally:
        if loader is not None:
            loader.dispose()


def one_line(text: str) -> str:
    """`text` with every character that breaks or hides a line (newlines, other controls) escaped."""
    return "".join(repr(c)[1:-1] if c.isspace() and c != " " or not c.isprintable() else c for c in text)
