"""LLM backends shared by the LLM judge, generators and LLM-driven attacks."""

from __future__ import annotations

from robusteval.llm.backends import LLMBackend, LocalCausalLM, OpenAICompatible, load_backend, resolve_backend
from robusteval.llm.errors import LLMRequestError
from robusteval.llm.stats import backend_report, call_with

__all__ = ["LLMBackend", "LLMRequestError", "LocalCausalLM", "OpenAICompatible", "backend_report", "call_with",
           "load_backend", "resolve_backend"]
