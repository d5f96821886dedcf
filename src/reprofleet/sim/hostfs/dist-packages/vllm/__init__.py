"""vllm on a simulated host: the fake engine of reprofleet's simulated fleet.

``LLM(model, **kwargs)`` prints a realistic engine-start log for this version (set by the
docker image tag, or the host's default) and ends the way the host's wedge model decides:
it returns, raises, hangs, or takes the whole host down. See rfsim.engine.
"""

from typing import Any, List

from rfsim.engine import Engine as _Engine
from rfsim.engine import version as _version

__version__ = _version()


class LLM:
    def __init__(self, model: str, **kwargs: Any) -> None:
        self.model = model
        self.kwargs = kwargs
        _Engine(model, kwargs).start()

    def generate(self, *args: Any, **kwargs: Any) -> List[Any]:
        return []


class SamplingParams:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)
