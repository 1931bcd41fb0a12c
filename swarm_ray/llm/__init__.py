"""LLM agents: engines, the `LLMAgent` Serve deployment, the planner and `llm.*` capabilities.

Engines: vLLM on GPU shares, llama.cpp on CPU, and a scripted test double. Structured
output is constrained decoding followed by validation.

Nothing here imports an engine's package until that engine is loaded: the CPU path never
imports vLLM, and the scripted test double needs neither.
"""

from swarm_ray.llm._accounting import UsageReport, usage_report
from swarm_ray.llm._capabilities import (
    ChatIn,
    ChatOut,
    ExtractIn,
    ExtractOut,
    PlanIn,
    PlanOut,
    chat,
    extract_json,
    llm_catalog,
    plan,
)
from swarm_ray.llm._deployment import (
    ChatRequest,
    LLMAgent,
    LLMAppArgs,
    LLMDeploymentOptions,
    StructuredRequest,
    build_llm_app,
    capability_llm_app,
    llm_app,
)
from swarm_ray.llm._engine import (
    Completion,
    Engine,
    EngineConfig,
    EngineKind,
    GenerationParams,
    Message,
    current_engine,
    load_engine,
    use_engine,
)
from swarm_ray.llm._handle import DeploymentEngine
from swarm_ray.llm._llama_cpp import LlamaCppEngine, default_gguf
from swarm_ray.llm._planner import (
    CapabilityLine,
    DraftStage,
    LLMPlanner,
    PlanDraft,
    draft_plan,
    fallback_plan,
    plan_from_draft,
)
from swarm_ray.llm._scripted import ScriptedEngine
from swarm_ray.llm._structured import StructuredReply, generate_structured, json_schema_of
from swarm_ray.llm._vllm import VLLMEngine, gpu_memory_share

__all__ = [
    "CapabilityLine",
    "ChatIn",
    "ChatOut",
    "ChatRequest",
    "Completion",
    "DeploymentEngine",
    "DraftStage",
    "Engine",
    "EngineConfig",
    "EngineKind",
    "ExtractIn",
    "ExtractOut",
    "GenerationParams",
    "LLMAgent",
    "LLMAppArgs",
    "LLMDeploymentOptions",
    "LLMPlanner",
    "LlamaCppEngine",
    "Message",
    "PlanDraft",
    "PlanIn",
    "PlanOut",
    "ScriptedEngine",
    "StructuredReply",
    "StructuredRequest",
    "UsageReport",
    "VLLMEngine",
    "build_llm_app",
    "capability_llm_app",
    "chat",
    "current_engine",
    "default_gguf",
    "draft_plan",
    "extract_json",
    "fallback_plan",
    "generate_structured",
    "gpu_memory_share",
    "json_schema_of",
    "llm_app",
    "llm_catalog",
    "load_engine",
    "plan",
    "plan_from_draft",
    "usage_report",
    "use_engine",
]
