"""The Serve gateway: REST and WebSocket task events, health, metrics, auth, provenance.

Run it with `swarm-ray serve`, `serve run deployments/gateway-local.yaml`, or from code::

    from ray import serve
    from swarm_ray.gateway import GatewayConfig, build_app

    serve.run(build_app(GatewayConfig(api_keys_file="keys.txt")), route_prefix="/")

Serve's proxy answers `/-/routes` to anyone by itself; set
`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=swarm_ray.gateway:proxy_middlewares` where
Ray starts to close it (see `_proxy`).
"""

from __future__ import annotations

from swarm_ray.gateway._app import Gateway, app, build_app
from swarm_ray.gateway._auth import ApiKeys
from swarm_ray.gateway._models import GatewayConfig
from swarm_ray.gateway._prometheus import render as render_metrics
from swarm_ray.gateway._proxy import proxy_middlewares
from swarm_ray.runtime._health import health_score

__all__ = [
    "ApiKeys",
    "Gateway",
    "GatewayConfig",
    "app",
    "build_app",
    "health_score",
    "proxy_middlewares",
    "render_metrics",
]
