"""Agent surfaces: the MCP tool server (`gatekeeper mcp`) and the summaries written for agents.

Everything here is a thin layer over `gatekeeper.api`; nothing in this package decides a
verdict. Importing it is cheap: the `mcp` package is imported only when the server starts.
"""
