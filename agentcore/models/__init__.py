"""Model adapters: real chat APIs over HTTP, a replay-file model, and model spec strings.

``OpenAIChatModel`` and ``AnthropicChatModel`` need httpx (``pip install
'subagent[models]'``); they are imported on first use, so ``resolve_model`` and
``ReplayModel`` work without it. :func:`price` uses genai-prices' snapshot of
providers' prices when it is installed (``pip install 'subagent[prices]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._fallback import FallbackModel as FallbackModel
from ._fallback import StreamingFallbackModel as StreamingFallbackModel
from ._fallback import model_name as model_name
from ._prices import ModelPrices as ModelPrices
from ._prices import PriceTable as PriceTable
from ._prices import has_price as has_price
from ._prices import load_prices as load_prices
from ._prices import price as price
from ._ratelimit import DEFAULT_MAX_PAUSE as DEFAULT_MAX_PAUSE
from ._ratelimit import RateLimited as RateLimited
from ._ratelimit import RateLimiter as RateLimiter
from ._ratelimit import RateLimiterStatistics as RateLimiterStatistics
from ._ratelimit import StreamingRateLimited as StreamingRateLimited
from ._replay import ReplayModel as ReplayModel
from ._resolve import SCHEMES as SCHEMES
from ._resolve import resolve_model as resolve_model

if TYPE_CHECKING:
    from ._anthropic import AnthropicChatModel as AnthropicChatModel
    from ._openai import OpenAIChatModel as OpenAIChatModel

__all__ = [
    "DEFAULT_MAX_PAUSE",
    "SCHEMES",
    "AnthropicChatModel",
    "FallbackModel",
    "ModelPrices",
    "OpenAIChatModel",
    "PriceTable",
    "RateLimited",
    "RateLimiter",
    "RateLimiterStatistics",
    "ReplayModel",
    "StreamingFallbackModel",
    "StreamingRateLimited",
    "has_price",
    "load_prices",
    "model_name",
    "price",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    # The HTTP adapters import httpx; importing them lazily keeps it optional.
    if name == "OpenAIChatModel":
        from ._openai import OpenAIChatModel

        return OpenAIChatModel
    if name == "AnthropicChatModel":
        from ._anthropic import AnthropicChatModel

        return AnthropicChatModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
