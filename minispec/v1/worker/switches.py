"""What a runner switch is: the design it belongs to, the presets that name a setting of
switches, a learner's settings, and what a runner reads once they are resolved
(minispec's own idea: vLLM ships each fix and never a switch back to the fault; the
design enum stands for vLLM's choice of runner, vLLM 0.30.0: ``vllm/config/vllm.py``).

``ModelRunner`` names the built-in designs; a ``Switch`` is one seam in one design's
runner where the fix, the fault or a learner's function runs; a ``SwitchPreset``
(``fixes=`` or ``faults=``) names the switches it turns to their fault;
``SwitchSettings`` is a learner's setting of one design's switches (its
``RunnerFixes``); ``Switches``, the resolved result in ``VllmConfig.switches``, gives a
runner the one function to call per switch (``pick``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import ClassVar


class ModelRunner(StrEnum):
    """The names of the four built-in runner designs (``model_runner=``): V1, V2, the relay
    and replicated drafting. A ``StrEnum``, so ``"v1"`` and ``ModelRunner.V1`` are the
    same argument; what each design needs is its record in ``designs.py``, and nothing
    else branches on these names."""

    V1 = "v1"
    V2 = "v2"
    RELAY = "relay"  # SGLang PR #30775's relay payload (relay/model_runner.py)
    REPLICATED = "replicated"  # every stage drafts, only accept results travel (relay/replicated.py)

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Switch:
    """One seam of one design's runner. ``fault``: what runs there when a preset puts the
    fault back (None: a plug point). ``within``: the switch whose function this one runs
    inside; a learner's function there replaces both, so a fault here is refused with
    it."""

    name: str
    design: str  # the design's name (a ModelRunner member for the built-in four)
    fault: Callable | None = None
    within: Switch | None = None


class SwitchPreset(StrEnum):
    """The one preset type: a named setting of switches, written ``NAME = "its-name",
    (switches it turns to their fault)``; every other switch runs its fix. A
    ``StrEnum``, so a preset compares equal to its name and prints as it (argparse's
    choices, errors, notebooks)."""

    def __new__(cls, name: str, faults: tuple[Switch, ...] = ()):
        preset = str.__new__(cls, name)
        preset._value_ = name
        preset.faults = faults
        return preset

    def __repr__(self) -> str:
        return repr(self.value)

    @property
    def designs(self) -> tuple[str, ...]:
        """The designs of the switches it turns; none if it turns none: it applies to every design."""
        return tuple(dict.fromkeys(s.design for s in self.faults))

    def settings(self) -> dict[Switch, Callable]:
        """Each switch it turns, with its fault."""
        return {switch: switch.fault for switch in self.faults}


@dataclass(frozen=True, repr=False)
class SwitchSettings:
    """A learner's setting of each switch of one design, one field per switch, named as it:
    True (the fix), False (the fault) or a function; a plug point takes None (the
    runner's own) or a function. Checked when it is built."""

    SWITCHES: ClassVar[tuple[Switch, ...]] = ()

    def __post_init__(self):
        for switch in self.SWITCHES:
            value = getattr(self, switch.name)
            if callable(value):
                continue
            if switch.fault is not None and not isinstance(value, bool):
                raise ValueError(f"{switch.name}={value!r}: expected True (the fix), False (the fault) or a function")
            if switch.fault is None and value is not None:
                raise ValueError(f"{switch.name}={value!r}: expected None (the runner's own) or a function")

    @property
    def designs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.design for s in self.SWITCHES))

    def settings(self) -> dict[Switch, Callable]:
        """Each switch set away from its fix, with the fault or the learner's function."""
        chosen = {}
        for switch in self.SWITCHES:
            value = getattr(self, switch.name)
            if callable(value):
                chosen[switch] = value
            elif value is False:
                chosen[switch] = switch.fault
        return chosen

    def __repr__(self) -> str:
        """The fields set away from their default, a function by its name: error messages
        and trace labels read ``RunnerFixes(move_row=my_move_row)``."""
        changed = [f"{f.name}={_shown(getattr(self, f.name))}" for f in fields(self)
                   if getattr(self, f.name) is not f.default]
        return f"{type(self).__name__}({', '.join(changed)})"


def _shown(value) -> str:
    return value.__name__ if callable(value) and hasattr(value, "__name__") else repr(value)


@dataclass(frozen=True)
class Switches:
    """Every switch moved off its fix, to its fault or a learner's function, for one run's
    design; any other switch runs its fix."""

    chosen: Mapping[Switch, Callable] = field(default_factory=dict)

    def pick(self, switch: Switch, fix: Callable) -> Callable:
        """The one function a runner calls at ``switch``: a learner's, the fault, or ``fix``."""
        return self.chosen.get(switch, fix)


EVERY_FIX = Switches()
