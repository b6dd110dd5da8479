//! `safe-lanes-mcp`: the agent's side of safe-lanes, an MCP server over stdio.

#![forbid(unsafe_code)]

fn main() {
    #[allow(clippy::print_stdout)]
    {
        println!("safe-lanes-mcp {}", env!("CARGO_PKG_VERSION"));
    }
}
