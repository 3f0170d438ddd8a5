//! The Redis store: one Lua script per check, all checks of a request in one pipeline.
