"""Every runner switch in one place, and the one resolver that checks ``fixes=`` and
``faults=`` against ``model_runner=`` when the config is built. vLLM has no switches; the
nearest thing is how it refuses a feature the chosen runner lacks when its config is
built (vLLM 0.30.0: ``vllm/config/vllm.py``, ``__post_init__`` 1853-1856 calls
``_validate_v1_model_runner`` 3090-3095 or ``_validate_v2_model_runner`` 3079-3088:
"Model Runner V2 does not yet support: ...").

Each design's switches live next to its code (``runner_fixes.py`` for V1,
``gpu/runner_fixes.py`` for V2, ``relay/runner_fixes.py`` for the relay; replicated
drafting has none), and each design's record (``designs.py``) names its settings and presets:
``arguments()`` gathers what each engine argument takes from the registered designs.
A preset, or a learner's ``RunnerFixes``, given with a design it does not apply to is
refused with the argument, the value and the design, e.g.
``fixes='vllm-0.9.2' applies to model_runner='v1'; got model_runner='v2'``; so is a fault
preset whose switch runs inside a function a learner's ``RunnerFixes`` replaces. Nothing
given is ever ignored. The result, ``Switches``, is what the runners read.
"""

from __future__ import annotations

from dataclasses import dataclass

from minispec.v1.worker.designs import DESIGNS
from minispec.v1.worker.gpu.runner_fixes import BeyondTokensFaultPreset
from minispec.v1.worker.runner_fixes import LEFT_OUT
from minispec.v1.worker.scheduler_switches import SchedulerFaultPreset
from minispec.v1.worker.switches import Switch, Switches, SwitchPreset, SwitchSettings
from minispec.v1.worker.tree_switches import TreeFaultPreset


@dataclass(frozen=True)
class Argument:
    """What one engine argument takes: a preset's name, a learner's settings, or None."""

    presets: tuple[type[SwitchPreset], ...]  # one preset type per design that has presets for it
    settings: tuple[type[SwitchSettings], ...] = ()
    optional: bool = False

    def expected(self) -> str:
        names = f"one of {sorted(str(p) for kind in self.presets for p in kind)}"
        return ("None or " if self.optional else "") + names + (" or a RunnerFixes" if self.settings else "")


def arguments() -> dict[str, Argument]:
    """What ``fixes=`` and ``faults=`` take, gathered from every registered design's record."""
    designs = DESIGNS.values()
    return {
        "fixes": Argument(_unique(d.fixes_presets for d in designs), _unique(d.settings for d in designs)),
        # the scheduler's preset, the beyond-tokens one and the tree's serve the designs they were checked on,
        # beside each design's own
        "faults": Argument(_unique(d.fault_presets for d in designs) + (SchedulerFaultPreset, BeyondTokensFaultPreset,
                                                                                TreeFaultPreset),
                           optional=True),
    }


def _unique(kinds) -> tuple:
    return tuple(dict.fromkeys(k for k in kinds if k is not None))


def resolve_switches(model_runner: str, **given) -> Switches:
    """``given``: each engine argument of ``arguments()`` by name, e.g. ``fixes="all", faults=None``."""
    chosen: dict[Switch, object] = {}
    origin: dict[Switch, str] = {}  # which argument moved each switch, for the messages
    for argument, value in given.items():
        setting = _setting(argument, value)
        if setting is None:
            continue
        if setting.designs and model_runner not in setting.designs:  # none: it applies to every design
            raise ValueError(f"{argument}={setting!r} applies to model_runner={' or '.join(map(repr, setting.designs))}; "
                             f"got model_runner={model_runner!r}")
        for switch, function in setting.settings().items():
            chosen[switch], origin[switch] = function, f"{argument}={setting!r}"
    for switch in chosen:
        if switch.within in chosen:
            raise ValueError(f"{origin[switch]} switches {switch.name}, a part of the runner's own "
                             f"{switch.within.name}, which {origin[switch.within]} replaces: expected one of the two")
    return Switches(chosen)


def _setting(argument: str, value) -> SwitchPreset | SwitchSettings | None:
    takes = arguments()[argument]
    if isinstance(value, takes.settings) or (value is None and takes.optional):
        return value
    if isinstance(value, str) and value in LEFT_OUT:
        raise ValueError(f"{argument}={value!r} is not a preset: {LEFT_OUT[value]}")
    for kind in takes.presets:
        if isinstance(value, str) and value in set(kind):
            return kind(value)
    raise ValueError(f"{argument}={value!r}: expected {takes.expected()}")
