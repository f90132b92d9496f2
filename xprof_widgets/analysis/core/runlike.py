"""What an analysis may ask of the run it is given: `xprof_widgets.Run` has all of it. The
analyses take a run typed so, never probing it with `getattr` (the layers forbid them to
import `run.py`)."""

from __future__ import annotations

from typing import Protocol

from ...io.xspace import XSpaceFile


class RunLike(Protocol):
    name: str
    #: Kernels run in CUDA graphs get their HLO op (`command_buffers`); False: XProf's accounting.
    attribute_cuda_graphs: bool

    @property
    def hosts(self) -> list[str]: ...

    @property
    def readable_hosts(self) -> list[str]: ...

    def host_spaces(self) -> list[tuple[str, XSpaceFile]]: ...

    @property
    def hlo_protos(self) -> dict[str, bytes]: ...

    def xspace(self, host: str | None = None) -> XSpaceFile: ...

    def xspaces(self) -> list[XSpaceFile]: ...
