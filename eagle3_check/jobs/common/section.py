"""`Section`: one job's own options inside the `Config` (jobs/common/config.py), typed and frozen.

A section is a frozen dataclass in its job's package (`jobs/check/options.py` `CheckOptions`,
`jobs/gate/options.py` `GateOptions`, ...) that names the commands whose flags fill it
(`COMMANDS`) and, where a field is not spelled as the front end's option name, which flat name
fills it (`RENAMED`: `shrink_budget` -> `ShrinkOptions.budget`). A field the harness sets and no flag
does is listed in `HARNESS` (`--repro` sets the replayed request's name). `Config.build` routes each
flat option name to its section by the command (jobs/common/config.route); a command that lacks
a section gets the section's defaults.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar


class Section:
    COMMANDS: ClassVar[tuple[str, ...]] = ()  # the commands whose flags fill this section
    RENAMED: ClassVar[dict[str, str]] = {}  # flat option name -> field, where the two differ
    HARNESS: ClassVar[tuple[str, ...]] = ()  # fields set by the harness, never by a flag

    @classmethod
    def flat_names(cls) -> dict[str, str]:
        """flat option name -> field, for every field of the section."""
        field_of = {f.name: f.name for f in dataclasses.fields(cls)}
        for flat, name in cls.RENAMED.items():
            del field_of[name]
            field_of[flat] = name
        return field_of

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)
