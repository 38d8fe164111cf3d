"""What the run can use: the dialects and benchmark families plug-ins register.

Built-in families and dialects register exactly as a third party does: each is a module named in
the ``pytest_plsqlbench`` entry-point group (pyproject.toml) implementing some of the hooks of
:mod:`pytest_plsqlbench.hooks`; a ``conftest.py`` may implement them too. :func:`load_plugins`
registers the group's modules and the core's own plugin modules into pytest's plugin manager;
:func:`outside_pytest` does the same for the ``plsqlbench`` command, so it sees what a run
sees. The core asks a :class:`Registry`, never a list of names.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import hooks
from .errors import UsageError
from .lexicon import Lexicon, SafetyRules
from .protocols import Dialect, Family

#: The entry-point group of plug-in modules (like pytest's ``pytest11``).
ENTRY_POINT_GROUP = "pytest_plsqlbench"

#: The core's own plugin modules (answers, generation, fault handling, output): registered after the
#: group's, so their hooks run in the order they always did (a later registration is called first).
CORE_PLUGINS = (
    "pytest_plsqlbench.builtin_answers",
    "pytest_plsqlbench.generation.plugin",
    "pytest_plsqlbench.faults",
    "pytest_plsqlbench.concise",
    "pytest_plsqlbench.loading",
)


class PluginWarning(UserWarning):
    """A plug-in of the group could not be loaded (the run goes on without it)."""


def load_entry_points(manager: pluggy.PluginManager) -> None:
    """Register each module of the entry-point group (one warning for one that fails to import)."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    if not found:
        # An editable install made before the group existed: the metadata is stale.
        warnings.warn(
            f"no '{ENTRY_POINT_GROUP}' entry points are installed, so no dialect or benchmark family is "
            "registered; reinstall the package (pip install -e .)",
            PluginWarning,
            stacklevel=2,
        )
    for ep in found:
        if manager.get_plugin(ep.name) is not None or manager.is_blocked(ep.name):
            continue
        try:
            module = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in must not stop the others
            warnings.warn(f"plug-in {ep.name} ({ep.value}) cannot be loaded, running without it: {exc}",
                          PluginWarning, stacklevel=2)
            continue
        if not manager.is_registered(module):
            manager.register(module, ep.name)


def load_plugins(manager: pluggy.PluginManager) -> None:
    """The group's modules, then the core's (pytest: from ``pytest_addhooks``)."""
    load_entry_points(manager)
    for name in CORE_PLUGINS:
        module = importlib.import_module(name)
        if not manager.is_registered(module):
            manager.register(module, f"plsqlbench-{name.rsplit('.', 1)[-1]}")


def _returned(manager: pluggy.PluginManager, hook: str, protocol: type, what: str) -> list[Any]:
    """What each implementation of the no-argument ``hook`` returned, lowest priority first (so a
    later one of the same name replaces an earlier one), each checked against ``protocol``."""
    caller = getattr(manager.hook, hook, None)
    out: list[Any] = []
    for impl in caller.get_hookimpls() if caller is not None else ():
        for obj in impl.function() or ():
            name = getattr(obj, "name", None)
            if not isinstance(obj, protocol) or not isinstance(name, str) or not name:
                members = {*getattr(protocol, "__annotations__", {}), *(m for m in vars(protocol) if not m.startswith("_"))}
                missing = sorted(m for m in members if getattr(obj, m, None) is None)
                raise UsageError(
                    f"plug-in {impl.plugin_name}: {hook} returned {obj!r}, not a {what} "
                    f"(missing: {', '.join(missing) or 'a name'})"
                )
            out.append(obj)
    return out


class Registry:
    """The registered dialects and families, by name (a later registration of a name wins)."""

    def __init__(self, dialects: Iterable[Dialect] = (), families: Iterable[Family] = ()) -> None:
        self.dialects: dict[str, Dialect] = {d.name: d for d in dialects}
        self.families: dict[str, Family] = {f.name: f for f in families}

    @classmethod
    def from_plugins(cls, manager: pluggy.PluginManager) -> Registry:
        """Ask every registered plug-in (``pytest_plsql_metric_families``: the deprecated spelling
        of ``pytest_plsql_families``, kept one release)."""
        families = [
            *_returned(manager, "pytest_plsql_metric_families", Family, "benchmark family"),
            *_returned(manager, "pytest_plsql_families", Family, "benchmark family"),
        ]
        return cls(_returned(manager, "pytest_plsql_dialects", Dialect, "dialect"), families)

    def dialect(self, name: str, option: str = "--plsql-dialect") -> Dialect:
        """The dialect ``name``; one error listing the registered ones when there is none."""
        try:
            return self.dialects[name]
        except KeyError:
            raise UsageError(
                f"{option}: no dialect {name!r} is registered (registered: {', '.join(sorted(self.dialects)) or 'none'})"
            ) from None

    def default_dialect(self) -> Dialect:
        """The dialect a run takes when the user names none: the first registered one that
        :attr:`~pytest_plsqlbench.protocols.Dialect.runs_without_setup` (the built-ins: PostgreSQL,
        whose embedded server needs nothing but ``pip install``), else the first registered."""
        found = next((d for d in self.dialects.values() if d.runs_without_setup), None)
        found = found or next(iter(self.dialects.values()), None)
        if found is None:
            raise UsageError("no dialect is registered (reinstall the package: pip install -e .)")
        return found


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager with pytest's rule: a ``pytest_*`` function is a hook implementation even
    without ``@pytest.hookimpl``."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> pluggy.HookimplOpts | None:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name.startswith("pytest_") and inspect.isroutine(getattr(plugin, name, None)):
            opts = pluggy.HookimplOpts(wrapper=False, hookwrapper=False, optionalhook=False, tryfirst=False,
                                       trylast=False, specname=None)
        return opts


@functools.cache
def plugin_manager() -> pluggy.PluginManager:
    """A plugin manager outside pytest with our hookspecs and the group's modules (the
    ``plsqlbench`` command's: it sees the plug-ins a run sees, conftests aside)."""
    manager = _PluginManager("pytest")
    manager.add_hookspecs(hooks)
    load_entry_points(manager)
    return manager


@functools.cache
def outside_pytest() -> Registry:
    """The registry of the ``plsqlbench`` command."""
    return Registry.from_plugins(plugin_manager())


_active: list[Registry] = []


def use(registry: Registry) -> Registry:
    """Make ``registry`` the process's (a run's, set at its start: code without the run's config,
    such as the generation prompts and ``runner.open_backend``, asks :func:`active`)."""
    _active[:] = [registry]
    return registry


def active() -> Registry:
    """The run's registry in a run, else the ``plsqlbench`` command's."""
    return _active[0] if _active else outside_pytest()


def rules_for(dialect: str) -> tuple[Lexicon, SafetyRules]:
    """How the registered ``dialect``'s scripts are read and what its answers may touch (the
    splitter and the safety check turn a task's dialect name into rules here)."""
    found = active().dialect(dialect, option="dialect")
    return found.lexicon, found.safety


def default_dialect_of(manager: pluggy.PluginManager) -> str | None:
    """The default dialect's name among the dialects ``manager``'s plug-ins register so far (for
    ``--help``, at start-up: only the dialects are asked); None when there is none or a return is
    no dialect (the run reports that, once, when it builds its :class:`Registry`)."""
    try:
        return Registry(_returned(manager, "pytest_plsql_dialects", Dialect, "dialect")).default_dialect().name
    except UsageError:
        return None
