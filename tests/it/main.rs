//! The integration tests, one binary (STYLE.md): the real `stormwatch`
//! binary, real OpenTelemetry exporters, real sockets and files.

mod admission;
mod admission_conn;
mod alert_bodies;
mod alert_isolation;
mod alerts;
mod cluster;
mod cluster_lb;
mod common;
mod crash;
mod crash_flusher;
mod crash_grpc;
mod dashboard;
mod fixtures;
mod frameworks;
mod import;
mod import_bounds;
mod interop_grpc_python;
mod interop_node;
mod interop_python;
mod interop_rust;
mod load;
mod mcp_clients;
mod mcp_http;
mod memcap;
mod metrics;
mod open_surface;
mod operate;
mod otlp_grpc;
mod otlp_http;
mod readrace;
mod seal;
mod sealed;
mod sweep;
