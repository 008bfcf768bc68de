"""Which chat model to use, from its two settings (read by `gpu_triage.settings`): none unless
one is configured.

`GPU_TRIAGE_LLM_PROVIDER` names a provider (`openai`, `anthropic`, …) or `module:Class` for
any `BaseChatModel` subclass; `GPU_TRIAGE_LLM_MODEL` names the model. The provider package is
imported only then, so a base install needs none of them; a missing one is a one-line error
naming the package to install. Credentials are the provider package's own business (e.g.
`OPENAI_API_KEY`): they are never read here and never enter a prompt.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

PROVIDER_ENV = "GPU_TRIAGE_LLM_PROVIDER"
MODEL_ENV = "GPU_TRIAGE_LLM_MODEL"

# provider → (module, class, pip package). The same names langchain's init_chat_model uses.
PROVIDERS: dict[str, tuple[str, str, str]] = {
    "openai": ("langchain_openai", "ChatOpenAI", "langchain-openai"),
    "azure_openai": ("langchain_openai", "AzureChatOpenAI", "langchain-openai"),
    "anthropic": ("langchain_anthropic", "ChatAnthropic", "langchain-anthropic"),
    "google_genai": ("langchain_google_genai", "ChatGoogleGenerativeAI", "langchain-google-genai"),
    "mistralai": ("langchain_mistralai", "ChatMistralAI", "langchain-mistralai"),
    "groq": ("langchain_groq", "ChatGroq", "langchain-groq"),
    "ollama": ("langchain_ollama", "ChatOllama", "langchain-ollama"),
    "bedrock_converse": ("langchain_aws", "ChatBedrockConverse", "langchain-aws"),
}


class ProviderError(ValueError):
    """The model configuration cannot be used. One line, naming the variable or package."""


def model_from_env(env: Mapping[str, str]) -> BaseChatModel | None:
    """The configured chat model, or None when `GPU_TRIAGE_LLM_PROVIDER` is unset/empty.
    `env` holds the two variables as the settings read them (`CommonSettings.llm`)."""
    provider = (env.get(PROVIDER_ENV) or "").strip()
    if not provider or provider.lower() in ("none", "off"):
        return None
    model = (env.get(MODEL_ENV) or "").strip()
    if not model:
        raise ProviderError(f"{PROVIDER_ENV}={provider} needs {MODEL_ENV} (the model name)")
    try:
        from langchain_core.language_models import BaseChatModel
    except ImportError:
        raise ProviderError(
            f"{PROVIDER_ENV} is set but langchain-core is not installed: "
            "pip install 'gpu-triage[llm]'"
        ) from None
    if ":" in provider:
        module_name, _, class_name = provider.partition(":")
        package = module_name.split(".")[0]
    elif provider.lower() in PROVIDERS:
        module_name, class_name, package = PROVIDERS[provider.lower()]
    else:
        known = ", ".join(sorted(PROVIDERS))
        raise ProviderError(
            f"{PROVIDER_ENV}={provider} is not a known provider ({known}) or module:Class"
        )
    cls = _load(module_name, class_name, package=package)
    if not (isinstance(cls, type) and issubclass(cls, BaseChatModel)):
        raise ProviderError(f"{PROVIDER_ENV}={provider} is not a langchain-core BaseChatModel")
    try:
        instance: BaseChatModel = cls(model=model)
    except Exception as e:  # pydantic validation (e.g. missing API key) from the provider
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ProviderError(f"cannot create {class_name}(model={model!r}): {first}") from None
    return instance


def _load(module_name: str, class_name: str, *, package: str) -> Any:
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and module_name.startswith(e.name):
            raise ProviderError(
                f"{PROVIDER_ENV} needs the package {package}: pip install {package}"
            ) from None
        raise
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise ProviderError(f"{module_name} has no {class_name}") from None
