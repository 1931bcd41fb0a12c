"""LLM agents: engines, the `LLMAgent` Serve deployment, the planner and `llm.*` capabilities.

Engines: vLLM on GPU shares, llama.cpp on CPU, any OpenAI-compatible endpoint over HTTP
(with a cluster-wide budget per endpoint), and a scripted test double. Structured
output is constrained decoding followed by validation. The tool agent
(`llm.agent.tools`) calls capabilities as child sub-tasks and MCP servers' tools;
wide research (`wide_research`) fans one out per item into a traced table.

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
    EndpointLimits,
    Engine,
    EngineConfig,
    EngineKind,
    GenerationParams,
    Message,
    Prices,
    ToolCall,
)
from swarm_ray.llm._handle import DeploymentEngine
from swarm_ray.llm._llama_cpp import LlamaCppEngine, default_gguf
from swarm_ray.llm._load import current_engine, load_engine, use_engine
from swarm_ray.llm._openai import OpenAIEngine
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
from swarm_ray.llm._settings import (
    LLMSettings,
    McpServer,
    TenantTools,
    engine_config_for,
    llm_resources,
    llm_settings,
)
from swarm_ray.llm._structured import StructuredReply, generate_structured, json_schema_of
from swarm_ray.llm._tool_agent import (
    AgentUsage,
    ToolAgentIn,
    ToolAgentOut,
    TranscriptEntry,
    run_tool_agent,
)
from swarm_ray.llm._toolbox import ToolOutcome
from swarm_ray.llm._vllm import VLLMEngine, gpu_memory_share
from swarm_ray.llm._wide import (
    ResearchRow,
    RowIn,
    RowOut,
    TableIn,
    TableOut,
    research_row,
    research_table,
)

__all__ = [
    "AgentUsage",
    "CapabilityLine",
    "ChatIn",
    "ChatOut",
    "ChatRequest",
    "Completion",
    "DeploymentEngine",
    "DraftStage",
    "EndpointLimits",
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
    "LLMSettings",
    "LlamaCppEngine",
    "McpServer",
    "Message",
    "OpenAIEngine",
    "PlanDraft",
    "PlanIn",
    "PlanOut",
    "Prices",
    "ResearchRow",
    "RowIn",
    "RowOut",
    "ScriptedEngine",
    "StructuredReply",
    "StructuredRequest",
    "TableIn",
    "TableOut",
    "TenantTools",
    "ToolAgentIn",
    "ToolAgentOut",
    "ToolCall",
    "ToolOutcome",
    "TranscriptEntry",
    "UsageReport",
    "VLLMEngine",
    "build_llm_app",
    "capability_llm_app",
    "chat",
    "current_engine",
    "default_gguf",
    "draft_plan",
    "engine_config_for",
    "extract_json",
    "fallback_plan",
    "generate_structured",
    "gpu_memory_share",
    "json_schema_of",
    "llm_app",
    "llm_catalog",
    "llm_resources",
    "llm_settings",
    "load_engine",
    "plan",
    "plan_from_draft",
    "research_row",
    "research_table",
    "run_tool_agent",
    "usage_report",
    "use_engine",
]
