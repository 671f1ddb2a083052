"""Runner plugins: ordered, Runner-global lifecycle policy (descriptors, hooks, results, built-ins).

A Runner's ``plugins=[...]`` descriptors are compiled once (:func:`compile_plugins`); each hook of each plugin
runs as a worker job (:func:`run_plugin_hook`, or inline when opted in) and the engine turns its answer into a
step with :func:`interpret`. See ``docs/PLUGINS.md``.
"""

from adk_actors.plugins.descriptors import PluginDescriptor, PluginPipeline, compile_plugins
from adk_actors.plugins.hooks import HOOKS, NOTIFY_ONLY, run_plugin_hook
from adk_actors.plugins.pipeline import PluginStep, amend_event, check_value, interpret

__all__ = [
    "HOOKS",
    "NOTIFY_ONLY",
    "PluginDescriptor",
    "PluginPipeline",
    "PluginStep",
    "amend_event",
    "check_value",
    "compile_plugins",
    "interpret",
    "run_plugin_hook",
]
