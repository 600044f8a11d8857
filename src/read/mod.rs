//! The read models the dashboard and the MCP server share, below both: the
//! rollup in memory and the tools table made from it ([`data`]), what the
//! reads keep between requests (the rollup, the signals, the incidents and
//! the tools table, [`cache`]), one trace judged attempt by attempt
//! ([`trace`]), and incidents as every surface shows them ([`incidents`]).
//! No HTTP, no HTML, no MCP here: `dash` renders these, `mcp` answers with
//! them, `cmd` prints the incidents.

pub mod cache;
pub mod data;
pub mod incidents;
pub mod trace;
