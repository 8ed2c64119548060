"""Import user plugin modules named in a sweep's `plugins:` list (and only those).

A plugin is an importable module name (`my_components`) or a path to a `.py` file, relative to
the sweep YAML's folder or the current directory. Importing it runs its `@REGISTRY.register`
decorators. Modules are cached in `sys.modules`, so importing twice never registers twice. A sweep
stores its entries resolved in its sweep.yaml, where `stored_plugins` reads them back.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from gptlab.errors import GptlabError


def _module_name_for(path: Path) -> str:
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:8]
    return f"gptlab_plugin_{path.stem}_{digest}"


def resolve_plugin(entry: str, base_dir: Path | None = None) -> str:
    """Turn a plugin entry into what workers import: an absolute .py path or a module name."""
    if not isinstance(entry, str) or not entry:
        raise GptlabError(f"plugins: entries must be module names or .py paths, got {entry!r}")
    if entry.endswith(".py"):
        for folder in (base_dir, Path.cwd()):
            candidate = (Path(folder) / entry) if folder is not None else Path(entry)
            if candidate.is_file():
                return str(candidate.resolve())
            if candidate.is_dir():
                raise GptlabError(f"plugins: '{entry}' is a directory ({candidate.resolve()}); name a .py file in it, "
                                  "or the package as a module name")
        raise GptlabError(f"plugins: file '{entry}' not found (relative to the YAML's folder or the current directory)")
    return entry


def import_plugin(entry: str, search_path: list[str] | None = None) -> ModuleType:
    """Import one resolved plugin entry; errors name the plugin and the underlying problem."""
    for folder in search_path or []:
        if folder not in sys.path:
            sys.path.insert(0, folder)
    try:
        if entry.endswith(".py"):
            path = Path(entry)
            name = _module_name_for(path)
            if name in sys.modules:
                return sys.modules[name]
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
        return importlib.import_module(entry)
    except GptlabError as err:
        raise GptlabError(f"plugins: '{entry}': {err}") from None
    except Exception as err:  # an ImportError or a bug in the plugin: name it, in one line
        raise GptlabError(f"plugins: cannot import '{entry}': {type(err).__name__}: {err}") from None
    except SystemExit as err:  # a plugin must register entries, not end the program that imports it
        raise GptlabError(f"plugins: '{entry}' called sys.exit({err.code!r}) while being imported; a plugin only "
                          "defines and registers entries") from None
    except KeyboardInterrupt:  # raised by the plugin, or Ctrl-C during its import: either way, name it
        raise GptlabError(f"plugins: importing '{entry}' was interrupted (KeyboardInterrupt); nothing was "
                          "trained") from None


def import_plugins(entries: list[str], search_path: list[str] | None = None) -> None:
    for entry in entries:
        import_plugin(entry, search_path)


def stored_plugins(sweep_yaml: Path) -> list[str]:
    """The entries of the `plugins:` of a stored sweep.yaml (resolved when the sweep started); none without it."""
    from gptlab.runio import read_yaml

    if not sweep_yaml.is_file():
        return []
    try:
        raw = read_yaml(sweep_yaml)
    except Exception as err:  # unreadable or not YAML: say which file, in one line
        raise GptlabError(f"{sweep_yaml}: cannot read it ({type(err).__name__}); name the run's plugins with --plugin") \
            from None
    entries = raw.get("plugins") if isinstance(raw, dict) else None
    if entries is None:
        return []
    if not isinstance(entries, list) or not all(isinstance(e, str) and e for e in entries):
        raise GptlabError(f"{sweep_yaml}: plugins must be a list of module names or .py paths, got {entries!r}")
    return entries
